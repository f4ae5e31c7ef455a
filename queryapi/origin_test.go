package queryapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubesearch/kubesearch/internal/auth"
)

// newGuardServer is a query API authenticating with o, accepting the extra hosts of accept.
func newGuardServer(t *testing.T, o auth.Options, accept ...string) *Server {
	t.Helper()
	authn, err := auth.New(o)
	if err != nil {
		t.Fatal(err)
	}
	hosts, err := newAcceptHosts(accept)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{opts: Options{RequestTimeout: 5 * time.Second}, log: slog.New(slog.DiscardHandler), metrics: newMetrics(),
		catalog: newCatalog(), authn: authn, hosts: hosts}
	s.engine = s.routes()
	return s
}

// request sends GET path to s with the Host and headers given (name, value, ...).
func request(t *testing.T, s *Server, path, host string, headers ...string) (int, string) {
	t.Helper()
	r := httptest.NewRequestWithContext(t.Context(), http.MethodGet, path, nil)
	r.Host = host
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	w := httptest.NewRecorder()
	s.engine.ServeHTTP(w, r)
	if w.Code == http.StatusForbidden {
		var st metav1.Status
		if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil || st.Kind != "Status" || st.Reason != metav1.StatusReasonForbidden || st.Code != 403 {
			t.Errorf("GET %s (Host %q): a 403 that is not a Forbidden Status: %s", path, host, w.Body)
		}
	}
	return w.Code, w.Body.String()
}

// TestAnonymousRequestsServeLoopbackHostsOnly is the DNS rebinding attack: a page whose name now
// resolves to 127.0.0.1 sends its own name in Host; only names that cannot be rebound are served.
func TestAnonymousRequestsServeLoopbackHostsOnly(t *testing.T) {
	s := newGuardServer(t, auth.Options{Anonymous: true})
	for _, tc := range []struct {
		host string
		want int
	}{
		{"localhost:8080", 200},
		{"LocalHost:8080", 200},
		{"localhost", 200},
		{"127.0.0.1:8080", 200},
		{"127.0.0.2:8080", 200},
		{"[::1]:8080", 200},
		{"[::1]", 200},
		{"kubesearch.localhost:8080", 200}, // RFC 6761: browsers resolve it to loopback themselves
		{"10.0.0.7:8080", 200},             // an IP address: nothing was resolved, nothing rebound
		{"evil.example:8080", 403},
		{"evil.example", 403},
		{"127.0.0.1.nip.io:8080", 403},  // a name that resolves to loopback is a name
		{"localhost.evil.example", 403}, // not under .localhost
		{"evillocalhost:8080", 403},
		{"", 403},
	} {
		t.Run(tc.host, func(t *testing.T) {
			code, body := request(t, s, "/openapi.json", tc.host)
			if code != tc.want {
				t.Fatalf("Host %q: %d, want %d: %s", tc.host, code, tc.want, body)
			}
			if code == 403 && (!strings.Contains(body, `host \"`+hostname(tc.host)+`\"`) || !strings.Contains(body, "--accept-hosts")) {
				t.Errorf("Host %q: the 403 should name the host and --accept-hosts: %s", tc.host, body)
			}
		})
	}
	// The kubelet probes with the pod's IP, a load balancer with any name: probes answer all.
	for _, path := range []string{"/healthz"} {
		if code, body := request(t, s, path, "evil.example:8080", "Origin", "http://evil.example"); code != 200 {
			t.Errorf("%s for a foreign host: %d, want 200: %s", path, code, body)
		}
	}
}

func TestAcceptHostsServesMoreNames(t *testing.T) {
	s := newGuardServer(t, auth.Options{Anonymous: true}, `kubesearch\.lan`, `^[a-z]+\.corp\.example$`)
	for _, tc := range []struct {
		host string
		want int
	}{
		{"kubesearch.lan:8080", 200},
		{"KubeSearch.LAN", 200}, // host names have no case
		{"shop.corp.example:443", 200},
		{"localhost:8080", 200},              // still served
		{"kubesearch.lan.evil.example", 403}, // a pattern matches the whole name
		{"evil-kubesearch.lan:8080", 403},    // from its start too
		{"a.b.corp.example", 403},            // [a-z]+ is one label
		{"kubesearchxlan", 403},              // the dot is escaped
		{"evil.example:8080", 403},
	} {
		if code, body := request(t, s, "/openapi.json", tc.host); code != tc.want {
			t.Errorf("Host %q: %d, want %d: %s", tc.host, code, tc.want, body)
		}
	}
}

// TestCrossOriginBrowserRequestsRefused: a page of another origin (whose requests a browser marks
// with Origin or Sec-Fetch-Site) is refused; kubectl, curl and a page of the API's own origin are not.
func TestCrossOriginBrowserRequestsRefused(t *testing.T) {
	s := newGuardServer(t, auth.Options{Anonymous: true})
	for _, tc := range []struct {
		name    string
		headers []string
		want    int
	}{
		{"no Origin (kubectl, client-go, curl)", nil, 200},
		{"same origin", []string{"Origin", "http://localhost:8080"}, 200},
		{"same origin, other case", []string{"Origin", "http://LOCALHOST:8080"}, 200},
		{"same origin, fetch metadata", []string{"Origin", "http://localhost:8080", "Sec-Fetch-Site", "same-origin"}, 200},
		{"typed in the address bar", []string{"Sec-Fetch-Site", "none"}, 200},
		{"another site", []string{"Origin", "http://evil.example"}, 403},
		{"another port of localhost", []string{"Origin", "http://localhost:3000"}, 403},
		{"another loopback name", []string{"Origin", "http://127.0.0.1:8080"}, 403},
		{"sandboxed or file page", []string{"Origin", "null"}, 403},
		{"not a URL", []string{"Origin", "::"}, 403},
		{"cross-site without Origin (an img or script tag)", []string{"Sec-Fetch-Site", "cross-site"}, 403},
		{"same-site, another origin", []string{"Sec-Fetch-Site", "same-site"}, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := request(t, s, "/openapi.json", "localhost:8080", tc.headers...)
			if code != tc.want {
				t.Fatalf("%v: %d, want %d: %s", tc.headers, code, tc.want, body)
			}
			if code == 403 && !strings.Contains(body, "another origin") {
				t.Errorf("%v: the 403 should say why: %s", tc.headers, body)
			}
		})
	}
}

// TestCredentialsServeAnyHostButNoOtherOrigin: credentials a page cannot make a browser send are
// served under any name; a browser page of another origin is refused even with them (a browser
// sends client certificates on its own), and without anonymous access nothing changes for Host.
func TestCredentialsServeAnyHostButNoOtherOrigin(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(tokens, []byte("secret-token,alice,1001,\"sre\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bearer := []string{"Authorization", "Bearer secret-token"}
	for _, anonymous := range []bool{true, false} {
		s := newGuardServer(t, auth.Options{Anonymous: anonymous, TokenAuthFile: tokens})
		if code, body := request(t, s, "/openapi.json", "kubesearch.corp.example:8443", bearer...); code != 200 {
			t.Errorf("anonymous %v: a token under a LAN name: %d, want 200: %s", anonymous, code, body)
		}
		if code, body := request(t, s, "/openapi.json", "localhost:8080", append(bearer, "Origin", "http://evil.example")...); code != 403 {
			t.Errorf("anonymous %v: a token from another origin: %d, want 403: %s", anonymous, code, body)
		}
		if code, body := request(t, s, "/openapi.json", "localhost:8080", "Authorization", "Bearer forged"); code != 401 {
			t.Errorf("anonymous %v: a forged token: %d, want 401: %s", anonymous, code, body)
		}
	}
	s := newGuardServer(t, auth.Options{TokenAuthFile: tokens})
	if code, body := request(t, s, "/openapi.json", "evil.example:8080"); code != 401 {
		t.Errorf("no credentials, no anonymous access: %d, want 401: %s", code, body)
	}
}

func TestValidateAcceptHosts(t *testing.T) {
	o := Options{OpenSearchAddresses: []string{"http://127.0.0.1:9200"}, AcceptHosts: []string{`kubesearch\.lan`, `(`, ""}}
	o.SetDefaults()
	err := o.Validate()
	if err == nil {
		t.Fatal("bad --accept-hosts patterns accepted")
	}
	for _, want := range []string{"--accept-hosts: \"(\": error parsing regexp: missing closing ): `(`", "--accept-hosts: an empty pattern"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), `--accept-hosts: "kubesearch`) {
		t.Errorf("error %q blames a good pattern", err)
	}
	o.AcceptHosts = []string{`kubesearch\.lan`, `^.*\.corp\.example$`}
	if err := o.Validate(); err != nil {
		t.Errorf("good patterns: %v", err)
	}
}
