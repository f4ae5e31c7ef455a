package collector

import (
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubesearch/kubesearch/internal/auth"
	"github.com/kubesearch/kubesearch/internal/serving"
	"github.com/kubesearch/kubesearch/internal/stream"
)

// serveEndpoints makes a collector of one unreachable member with the given endpoint options and
// serves its HTTP endpoints on the listener New opened; nothing is collected.
func serveEndpoints(t *testing.T, endpoints serving.Options) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	c, err := New(Options{
		Registry: write("registry.yaml", `apiVersion: search.karmada.io/v1alpha1
kind: ResourceRegistry
metadata: {name: pods}
spec:
  targetCluster: {}
  resourceSelectors:
  - {apiVersion: v1, kind: Pod}
`),
		Kubeconfig: write("kubeconfig", `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: member1, context: {cluster: c, user: u}}]
current-context: member1
`),
		Stream: stream.NewLocal(stream.LocalOptions{}), ListenAddr: "127.0.0.1:0", Endpoints: endpoints,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: c.handler()}
	go func() { _ = srv.Serve(c.listener) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + c.Addr()
}

func getWithToken(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// /metrics and /status answer only the readers of the token file, any of them; the probes answer
// the kubelet without credentials.
func TestEndpointsNeedCredentials(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(tokens, []byte("queryapi-token,system:kubesearch:queryapi,\nprometheus-token,prometheus,,\"monitoring\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := serveEndpoints(t, serving.Options{Authentication: auth.Options{TokenAuthFile: tokens}})
	for _, tc := range []struct {
		path, token string
		want        int
		body        string // a prefix of the answer
	}{
		{"/metrics", "", http.StatusUnauthorized, "Unauthorized"},
		{"/status", "", http.StatusUnauthorized, "Unauthorized"},
		{"/status", "guessed-token", http.StatusUnauthorized, "Unauthorized"},
		{"/status", "queryapi-token", http.StatusOK, "{\n  \"items\": ["},
		{"/status", "prometheus-token", http.StatusOK, "{\n  \"items\": ["},
		{"/metrics", "prometheus-token", http.StatusOK, "# HELP"},
		{"/healthz", "", http.StatusOK, "ok"},
		{"/readyz", "", http.StatusServiceUnavailable, "not ready: reading the collector ledger"},
	} {
		t.Run(tc.path+" "+tc.token, func(t *testing.T) {
			code, body := getWithToken(t, base+tc.path, tc.token)
			if code != tc.want || !strings.HasPrefix(body, tc.body) {
				t.Errorf("GET %s: %d %.60q, want %d %q...", tc.path, code, body, tc.want, tc.body)
			}
		})
	}
}

// Without an authenticator the endpoints stay open, as before they could authenticate.
func TestEndpointsOpenWithoutAuthentication(t *testing.T) {
	base := serveEndpoints(t, serving.Options{})
	for _, path := range []string{"/metrics", "/status", "/healthz"} {
		if code, body := getWithToken(t, base+path, ""); code != http.StatusOK {
			t.Errorf("GET %s: %d %.60q, want 200", path, code, body)
		}
	}
}
