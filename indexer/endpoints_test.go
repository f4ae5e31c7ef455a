package indexer

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubesearch/kubesearch/internal/auth"
	"github.com/kubesearch/kubesearch/internal/serving"
)

// /metrics answers only the readers of the token file, any of them; the probes answer the kubelet
// without credentials. Nothing is reached: the indexer's HTTP endpoints are served without Run.
func TestEndpointsNeedCredentials(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(tokens, []byte("prometheus-token,prometheus,,\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ix, err := New(Options{
		Brokers: []string{"127.0.0.1:1"}, OpenSearchAddresses: []string{"http://127.0.0.1:1"},
		ListenAddr: "127.0.0.1:0", Endpoints: serving.Options{Authentication: auth.Options{TokenAuthFile: tokens}},
		Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: ix.handler()}
	go func() { _ = srv.Serve(ix.listener) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := ix.close(); err != nil {
			t.Error(err)
		}
	})
	for _, tc := range []struct {
		path, token string
		want        int
		body        string // a prefix of the answer
	}{
		{"/metrics", "", http.StatusUnauthorized, "Unauthorized"},
		{"/metrics", "guessed-token", http.StatusUnauthorized, "Unauthorized"},
		{"/metrics", "prometheus-token", http.StatusOK, "# HELP"},
		{"/healthz", "", http.StatusOK, "ok"},
		{"/readyz", "", http.StatusServiceUnavailable, "not ready: installing the index template"},
	} {
		t.Run(tc.path+" "+tc.token, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+ix.Addr()+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.want || !strings.HasPrefix(string(body), tc.body) {
				t.Errorf("GET %s: %d %.60q, want %d %q...", tc.path, resp.StatusCode, body, tc.want, tc.body)
			}
		})
	}
}
