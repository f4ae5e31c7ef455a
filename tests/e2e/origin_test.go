//go:build e2e

package e2e

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// refusesWebPages checks, on a running query API serving anonymous requests on loopback at base,
// what a web page could read of the fleet: a request naming a foreign host (a page that rebound
// its name to 127.0.0.1) and one from another origin are 403 Statuses; the same request under a
// loopback name, or from the API's own origin, is answered.
func refusesWebPages(t *testing.T, base string) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	_, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, host, origin string
		want               int
		says               string
	}{
		{"a loopback name", "localhost:" + port, "", http.StatusOK, ""},
		{"a rebound name", "evil.example:" + port, "", http.StatusForbidden, "--accept-hosts"},
		{"another origin", u.Host, "http://evil.example", http.StatusForbidden, "another origin"},
		{"its own origin", u.Host, base, http.StatusOK, ""},
	} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/v1alpha1/fleet", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = tc.host
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("%s: read body: %v", tc.name, err)
		}
		if resp.StatusCode != tc.want {
			t.Errorf("%s (Host %q, Origin %q): %d, want %d: %s", tc.name, tc.host, tc.origin, resp.StatusCode, tc.want, body)
			continue
		}
		if tc.want == http.StatusForbidden {
			var st struct{ Kind, Reason, Message string }
			if err := json.Unmarshal(body, &st); err != nil || st.Kind != "Status" || st.Reason != "Forbidden" || !strings.Contains(st.Message, tc.says) {
				t.Errorf("%s: want a Forbidden Status saying %q, got %s", tc.name, tc.says, body)
			}
		}
	}
}
