package serving

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubesearch/kubesearch/internal/auth"

	"github.com/kubesearch/kubesearch/internal/testpki"
)

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// serve serves a guarded "secret" handler and an open "/healthz" on e's listener.
func serve(t *testing.T, e *Endpoints) net.Listener {
	t.Helper()
	l, err := e.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	mux.Handle("GET /metrics", e.Guard(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "metrics") })))
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l
}

func get(t *testing.T, client *http.Client, url, token string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(body)), resp.Header
}

func TestGuard(t *testing.T) {
	tokens := writeFile(t, "tokens.csv", []byte("reader-token,reader,\n"))
	for _, tc := range []struct {
		name  string
		opts  Options
		path  string
		token string
		want  int
	}{
		{"open without authentication", Options{}, "/metrics", "", http.StatusOK},
		{"no credentials", Options{Authentication: auth.Options{TokenAuthFile: tokens}}, "/metrics", "", http.StatusUnauthorized},
		{"unknown token", Options{Authentication: auth.Options{TokenAuthFile: tokens}}, "/metrics", "reader-token2", http.StatusUnauthorized},
		{"a reader of the token file", Options{Authentication: auth.Options{TokenAuthFile: tokens}}, "/metrics", "reader-token", http.StatusOK},
		// Anonymous would be no authentication: it is ignored, not honoured.
		{"anonymous ignored", Options{Authentication: auth.Options{TokenAuthFile: tokens, Anonymous: true}}, "/metrics", "", http.StatusUnauthorized},
		{"probe open", Options{Authentication: auth.Options{TokenAuthFile: tokens}}, "/healthz", "", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := New(tc.opts, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			l := serve(t, e)
			code, body, header := get(t, http.DefaultClient, "http://"+l.Addr().String()+tc.path, tc.token)
			if code != tc.want {
				t.Errorf("GET %s: %d %q, want %d", tc.path, code, body, tc.want)
			}
			if code == http.StatusUnauthorized && (body != "Unauthorized" || header.Get("WWW-Authenticate") == "") {
				t.Errorf("401 %q with WWW-Authenticate %q: want a plain Unauthorized and a Bearer challenge", body, header.Get("WWW-Authenticate"))
			}
		})
	}
}

// Without authentication, an address other hosts reach is served (an upgrade breaks no scraper)
// with a warning naming the flag; loopback and authenticated listeners say nothing.
func TestListenWarnsWithoutAuthentication(t *testing.T) {
	tokens := writeFile(t, "tokens.csv", []byte("reader-token,reader,\n"))
	for _, tc := range []struct {
		name string
		opts Options
		addr string
		warn bool
	}{
		{"loopback", Options{}, "127.0.0.1:0", false},
		{"every interface", Options{}, "0.0.0.0:0", true},
		{"every interface, authenticated", Options{Authentication: auth.Options{TokenAuthFile: tokens}}, "0.0.0.0:0", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			e, err := New(tc.opts, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			l, err := e.Listen(tc.addr)
			if err != nil {
				t.Fatal(err)
			}
			l.Close()
			warned := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), "--token-auth-file")
			if warned != tc.warn {
				t.Errorf("warned %v, want %v:\n%s", warned, tc.warn, logs.String())
			}
		})
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{TLSCertFile: "tls.crt"}, "--tls-cert-file, --tls-private-key-file: both or neither"},
		{Options{Authentication: auth.Options{ClientCAFile: "ca.pem"}}, "--client-ca-file: client certificates need HTTPS"},
		{Options{Authentication: auth.Options{TokenAuthFile: "tokens.csv", TokenReviewMaxInFlight: -1}}, "--token-review-max-in-flight"},
	} {
		errs := tc.opts.Check()
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want) {
			t.Errorf("Check(%+v) = %v, want one error naming %q", tc.opts, errs, tc.want)
		}
	}
	if _, err := New(Options{Authentication: auth.Options{TokenAuthFile: filepath.Join(t.TempDir(), "none.csv")}}, nil); err == nil || !strings.Contains(err.Error(), "--token-auth-file") {
		t.Errorf("New with a missing token file: %v, want an error naming --token-auth-file", err)
	}
}

// HTTPS with the certificate of the files, and client certificates of the client CA as readers.
func TestTLSWithClientCertificates(t *testing.T) {
	ca := testpki.NewCA(t, "test CA")
	serverCert, serverKey := testpki.PEM(t, ca.Issue(t, pkix.Name{CommonName: "kubesearch-collector"}, x509.ExtKeyUsageServerAuth))
	clientCert, clientKey := testpki.PEM(t, ca.Issue(t, pkix.Name{CommonName: "prometheus"}, x509.ExtKeyUsageClientAuth))
	e, err := New(Options{
		Authentication: auth.Options{ClientCAFile: writeFile(t, "ca.pem", ca.PEM)},
		TLSCertFile:    writeFile(t, "tls.crt", serverCert), TLSKeyFile: writeFile(t, "tls.key", serverKey),
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	l := serve(t, e)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	pair, err := tls.X509KeyPair(clientCert, clientKey)
	if err != nil {
		t.Fatal(err)
	}
	client := func(certs ...tls.Certificate) *http.Client {
		return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs}}}
	}
	url := "https://" + l.Addr().String() + "/metrics"
	if code, body, _ := get(t, client(pair), url, ""); code != http.StatusOK || body != "metrics" {
		t.Errorf("with a client certificate: %d %q, want 200", code, body)
	}
	if code, _, _ := get(t, client(), url, ""); code != http.StatusUnauthorized {
		t.Errorf("without credentials: %d, want 401", code)
	}
}
