package auth

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kubesearch/kubesearch/internal/testpki"
)

// TestFrontProxy: a request carrying the front proxy's certificate (of the requestheader CA, with
// an allowed common name) is the user its headers name, marked Proxied; the same headers on any
// other request are ignored and its user is not Proxied, through a real TLS server that accepts
// both CAs' certificates.
func TestFrontProxy(t *testing.T) {
	clientCA, proxyCA := testpki.NewCA(t, "client-ca"), testpki.NewCA(t, "front-proxy-ca")
	dir := t.TempDir()
	clientCAFile, proxyCAFile := filepath.Join(dir, "client-ca.crt"), filepath.Join(dir, "front-proxy-ca.crt")
	writeFile(t, clientCAFile, string(clientCA.PEM))
	writeFile(t, proxyCAFile, string(proxyCA.PEM))
	o := Options{ClientCAFile: clientCAFile, Anonymous: true, RequestHeader: RequestHeaderOptions{
		ClientCAFile: proxyCAFile, AllowedNames: []string{"front-proxy-client"}}}
	a, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	tlsConfig, err := o.TLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok, err := a.Authenticate(r)
		if err != nil || !ok {
			http.Error(w, fmt.Sprint(err), http.StatusUnauthorized)
			return
		}
		_ = json.NewEncoder(w).Encode(u)
	}))
	srv.TLS = tlsConfig
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)

	proxy := proxyCA.Issue(t, pkix.Name{CommonName: "front-proxy-client"}, x509.ExtKeyUsageClientAuth)
	otherProxy := proxyCA.Issue(t, pkix.Name{CommonName: "someone"}, x509.ExtKeyUsageClientAuth)
	alice := clientCA.Issue(t, pkix.Name{CommonName: "alice", Organization: []string{"dev"}}, x509.ExtKeyUsageClientAuth)
	// A certificate of the client CA named like the proxy is a user's, not the proxy's.
	fakeProxy := clientCA.Issue(t, pkix.Name{CommonName: "front-proxy-client"}, x509.ExtKeyUsageClientAuth)
	named := http.Header{"X-Remote-User": {"bob"}, "X-Remote-Uid": {"1001"}, "X-Remote-Group": {"sre", "system:masters"}}
	for _, c := range []struct {
		name    string
		cert    *tls.Certificate
		headers http.Header
		code    int
		want    User
	}{
		{"the proxy names a user", &proxy, named, http.StatusOK, User{Name: "bob", UID: "1001", Groups: []string{"sre", "system:masters", GroupAuthenticated}, Proxied: true}},
		{"a user's certificate: headers ignored", &alice, named, http.StatusOK, User{Name: "alice", Groups: []string{"dev", GroupAuthenticated}}},
		{"a certificate of the client CA named like the proxy: headers ignored", &fakeProxy, named, http.StatusOK, User{Name: "front-proxy-client", Groups: []string{GroupAuthenticated}}},
		{"no certificate: headers ignored", nil, named, http.StatusOK, User{Name: Anonymous, Groups: []string{GroupUnauthenticated}}},
		{"a proxy certificate with a name not allowed", &otherProxy, named, http.StatusUnauthorized, User{}},
		{"the proxy names nobody", &proxy, http.Header{"X-Remote-Group": {"system:masters"}}, http.StatusUnauthorized, User{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := srv.Client().Transport.(*http.Transport).Clone()
			if c.cert != nil {
				tr.TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return c.cert, nil }
			}
			t.Cleanup(tr.CloseIdleConnections)
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header = c.headers.Clone()
			resp, err := (&http.Client{Transport: tr}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != c.code {
				t.Fatalf("%d %s, want %d", resp.StatusCode, body, c.code)
			}
			if c.code != http.StatusOK {
				return
			}
			var u User
			if err := json.Unmarshal(body, &u); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(u, c.want) {
				t.Errorf("user %+v, want %+v", u, c.want)
			}
		})
	}
}

func TestRequestHeaderOptionsChecked(t *testing.T) {
	for _, c := range []struct {
		o    Options
		says []string
	}{
		{Options{Anonymous: true, RequestHeader: RequestHeaderOptions{AllowedNames: []string{"front-proxy-client"}}}, []string{"--requestheader-allowed-names: needs --requestheader-client-ca-file"}},
		{Options{RequestHeader: RequestHeaderOptions{ClientCAFile: "ca.crt", UsernameHeaders: []string{"X Remote User"}, GroupHeaders: []string{""}, AllowedNames: []string{""}}},
			[]string{`--requestheader-username-headers: "X Remote User" is not an HTTP header name`, `--requestheader-group-headers: "" is not`, "--requestheader-allowed-names: an empty name"}},
	} {
		err := c.o.Check()
		for _, s := range c.says {
			if err == nil || !strings.Contains(err.Error(), s) {
				t.Errorf("%+v: %v, want it to say %q", c.o, err, s)
			}
		}
	}
	// The front proxy alone is an authenticator.
	if err := (Options{RequestHeader: RequestHeaderOptions{ClientCAFile: "ca.crt"}}).Check(); err != nil {
		t.Errorf("--requestheader-client-ca-file alone: %v", err)
	}
}

// TestFrontProxySharingTheClientCA: a front proxy CA that also signs the clients' certificates lets
// any client name any user, unless the proxy's names are pinned: refused at start.
func TestFrontProxySharingTheClientCA(t *testing.T) {
	ca, other := testpki.NewCA(t, "client-ca"), testpki.NewCA(t, "front-proxy-ca")
	dir := t.TempDir()
	clients, proxy, both := filepath.Join(dir, "clients.crt"), filepath.Join(dir, "proxy.crt"), filepath.Join(dir, "both.crt")
	writeFile(t, clients, string(ca.PEM))
	writeFile(t, proxy, string(other.PEM))
	writeFile(t, both, string(other.PEM)+string(ca.PEM))
	for _, tc := range []struct {
		name    string
		proxyCA string
		allowed []string
		refused bool
	}{
		{"the same file", clients, nil, true},
		{"a bundle holding the clients' CA", both, nil, true},
		{"the same CA, names pinned", clients, []string{"front-proxy-client"}, false},
		{"its own CA", proxy, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(Options{ClientCAFile: clients, RequestHeader: RequestHeaderOptions{ClientCAFile: tc.proxyCA, AllowedNames: tc.allowed}})
			if got := err != nil && strings.Contains(err.Error(), "shares a CA with --client-ca-file"); got != tc.refused {
				t.Errorf("New: %v, want refused %v", err, tc.refused)
			}
		})
	}
}
