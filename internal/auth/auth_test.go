package auth

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kubesearch/kubesearch/internal/testpki"
)

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func request(header string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/api/v1/pods", nil)
	if header != "" {
		r.Header.Set("Authorization", header)
	}
	return r
}

func TestAuthenticateTokenFileAndAnonymous(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.csv")
	writeFile(t, path, "alice-token,alice,uid-1,\"sre,dev\"\n")
	alice := User{Name: "alice", UID: "uid-1", Groups: []string{"sre", "dev", GroupAuthenticated}}
	tests := []struct {
		name      string
		anonymous bool
		header    string
		want      User
		ok        bool
		invalid   bool // a rejection: ErrInvalidCredentials
	}{
		{name: "known token", header: "Bearer alice-token", want: alice, ok: true},
		{name: "scheme in any case", header: "bearer alice-token", want: alice, ok: true},
		{name: "unknown token", header: "Bearer forged-token", invalid: true},
		{name: "unknown token, anonymous enabled: still refused", anonymous: true, header: "Bearer forged-token", invalid: true},
		{name: "other scheme, anonymous enabled: refused", anonymous: true, header: "Basic YWxpY2U6cHc=", invalid: true},
		{name: "empty bearer token: refused", anonymous: true, header: "Bearer ", invalid: true},
		{name: "token with a space: refused", header: "Bearer alice-token extra", invalid: true},
		{name: "no credentials", header: ""},
		{name: "no credentials, anonymous enabled", anonymous: true, want: User{Name: Anonymous, Groups: []string{GroupUnauthenticated}}, ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New(Options{TokenAuthFile: path, Anonymous: tt.anonymous})
			if err != nil {
				t.Fatal(err)
			}
			u, ok, err := a.Authenticate(request(tt.header))
			if tt.invalid != errors.Is(err, ErrInvalidCredentials) || (!tt.invalid && err != nil) {
				t.Fatalf("error %v, want invalid credentials: %v", err, tt.invalid)
			}
			if ok != tt.ok || !reflect.DeepEqual(u, tt.want) {
				t.Fatalf("got %+v, %v; want %+v, %v", u, ok, tt.want, tt.ok)
			}
			if err != nil && strings.Contains(err.Error(), "token,") {
				t.Fatalf("error %q shows a credential", err)
			}
		})
	}
}

// Every bad option is reported at once, each naming its flag.
func TestNewReportsEveryBadOption(t *testing.T) {
	dir := t.TempDir()
	badTokens := filepath.Join(dir, "tokens.csv")
	writeFile(t, badTokens, "only-two,columns\n")
	notPEM := filepath.Join(dir, "ca.crt")
	writeFile(t, notPEM, "not a certificate")
	_, err := New(Options{
		TokenAuthFile:            badTokens,
		ClientCAFile:             notPEM,
		AuthenticationKubeconfig: filepath.Join(dir, "missing.kubeconfig"),
	})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"--token-auth-file: token file " + badTokens + ": line 1", "--client-ca-file: ", "--authentication-kubeconfig: "} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "only-two") {
		t.Errorf("error %q shows the token", err)
	}

	if _, err := New(Options{}); err == nil || !strings.Contains(err.Error(), "--anonymous") {
		t.Errorf("New without any authentication: %v, want an error naming the flags", err)
	}
	if err := (Options{Anonymous: true, TokenReviewCacheTTL: -time.Second}).Check(); err == nil {
		t.Error("a negative TTL passed Check")
	}
}

// A client certificate signed by the client CA authenticates CN as the user and O as the groups,
// through a real TLS server configured by TLSConfig; one from another CA fails the handshake.
func TestClientCertificates(t *testing.T) {
	ca, other := testpki.NewCA(t, "kubesearch-client-ca"), testpki.NewCA(t, "someone-else")
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	writeFile(t, caFile, string(ca.PEM))
	a, err := New(Options{ClientCAFile: caFile, Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	tlsConfig, err := Options{ClientCAFile: caFile}.TLSConfig()
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
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes below are expected
	srv.StartTLS()
	t.Cleanup(srv.Close)

	get := func(cert *tls.Certificate) (*http.Response, error) {
		tr := srv.Client().Transport.(*http.Transport).Clone()
		if cert != nil {
			// Always present it: Go's client would otherwise send no certificate the server's
			// list of acceptable CAs does not name.
			tr.TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
		}
		t.Cleanup(tr.CloseIdleConnections)
		return (&http.Client{Transport: tr}).Get(srv.URL)
	}
	decode := func(resp *http.Response) (User, int) {
		t.Helper()
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var u User
		if resp.StatusCode == http.StatusOK {
			if err := json.Unmarshal(body, &u); err != nil {
				t.Fatal(err)
			}
		}
		return u, resp.StatusCode
	}

	alice := ca.Issue(t, pkix.Name{CommonName: "alice", Organization: []string{"sre", "dev"}}, x509.ExtKeyUsageClientAuth)
	resp, err := get(&alice)
	if err != nil {
		t.Fatal(err)
	}
	if u, code := decode(resp); code != http.StatusOK || !reflect.DeepEqual(u, User{Name: "alice", Groups: []string{"dev", "sre", GroupAuthenticated}}) {
		t.Errorf("client certificate: %d %+v", code, u)
	}

	// No certificate: the handshake succeeds, and the request is anonymous (enabled here).
	resp, err = get(nil)
	if err != nil {
		t.Fatal(err)
	}
	if u, code := decode(resp); code != http.StatusOK || u.Name != Anonymous {
		t.Errorf("no certificate: %d %+v", code, u)
	}

	// A certificate from another CA: the TLS layer refuses it.
	mallory := other.Issue(t, pkix.Name{CommonName: "alice", Organization: []string{"system:masters"}}, x509.ExtKeyUsageClientAuth)
	if resp, err := get(&mallory); err == nil {
		resp.Body.Close()
		t.Errorf("a certificate of another CA was answered %s", resp.Status)
	} else if !strings.Contains(err.Error(), "tls") {
		t.Errorf("a certificate of another CA: %v, want a TLS failure", err)
	}

	// A server certificate of the right CA is not a client certificate (the TLS layer already
	// refuses it; the authenticator checks again).
	server := ca.Issue(t, pkix.Name{CommonName: "alice"}, x509.ExtKeyUsageServerAuth)
	if resp, err := get(&server); err == nil {
		resp.Body.Close()
		t.Errorf("a server certificate was answered %s", resp.Status)
	}
}

// The authenticator verifies the chain itself: a TLS layer that only requests certificates (or
// trusts other CAs) does not turn a foreign certificate into a user.
func TestClientCertificateVerifiedByAuthenticator(t *testing.T) {
	ca, other := testpki.NewCA(t, "kubesearch-client-ca"), testpki.NewCA(t, "someone-else")
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	writeFile(t, caFile, string(ca.PEM))
	a, err := New(Options{ClientCAFile: caFile, Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		ca   *testpki.CA
		subj pkix.Name
		ok   bool
	}{
		{"right CA", ca, pkix.Name{CommonName: "bob", Organization: []string{"ops"}}, true},
		{"other CA", other, pkix.Name{CommonName: "bob"}, false},
		{"no common name", ca, pkix.Name{Organization: []string{"ops"}}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.ca.Issue(t, tt.subj, x509.ExtKeyUsageClientAuth)
			leaf, err := x509.ParseCertificate(c.Certificate[0])
			if err != nil {
				t.Fatal(err)
			}
			r := request("")
			r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}}
			u, ok, err := a.Authenticate(r)
			if ok != tt.ok || (tt.ok && u.Name != "bob") || (!tt.ok && !errors.Is(err, ErrInvalidCredentials)) {
				t.Fatalf("got %+v, %v, %v", u, ok, err)
			}
		})
	}
}

// fakeReviewer stands in for a kube-apiserver's TokenReview API.
type fakeReviewer struct {
	srv      *httptest.Server
	requests atomic.Int64
	tokens   map[string]authenticationv1.UserInfo
}

func newFakeReviewer(t *testing.T, tokens map[string]authenticationv1.UserInfo) *fakeReviewer {
	f := &fakeReviewer{tokens: tokens}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/apis/authentication.k8s.io/v1/tokenreviews" {
			http.NotFound(w, r)
			return
		}
		f.requests.Add(1)
		review, err := decodeReview(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if info, ok := f.tokens[review.Spec.Token]; ok {
			review.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: info, Audiences: review.Spec.Audiences}
		} else {
			review.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
		}
		review.APIVersion, review.Kind = "authentication.k8s.io/v1", "TokenReview"
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(review)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// decodeReview reads a TokenReview as an apiserver does, in whichever encoding client-go sent it
// (protobuf, for built-in types).
func decodeReview(r *http.Request) (*authenticationv1.TokenReview, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
	if err != nil {
		return nil, err
	}
	review, ok := obj.(*authenticationv1.TokenReview)
	if !ok {
		return nil, fmt.Errorf("%T is not a TokenReview", obj)
	}
	return review, nil
}

func kubeconfigFor(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	writeFile(t, path, fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: %q}
users:
- name: u
  user: {token: reviewer-credential}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`, server))
	return path
}

func TestTokenReview(t *testing.T) {
	sa := authenticationv1.UserInfo{Username: "system:serviceaccount:shop:viewer", UID: "sa-uid",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:shop", GroupAuthenticated}}
	f := newFakeReviewer(t, map[string]authenticationv1.UserInfo{"sa-token": sa})
	tokens := filepath.Join(t.TempDir(), "tokens.csv")
	writeFile(t, tokens, "file-token,alice,1\n")
	a, err := New(Options{TokenAuthFile: tokens, AuthenticationKubeconfig: kubeconfigFor(t, f.srv.URL)})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	a.reviewer.now = func() time.Time { return now }

	// The token file answers first; the reviewer is not asked.
	if u, ok, err := a.Authenticate(request("Bearer file-token")); !ok || err != nil || u.Name != "alice" {
		t.Fatalf("token file token: %+v %v %v", u, ok, err)
	}
	if n := f.requests.Load(); n != 0 {
		t.Fatalf("%d reviews for a token of the token file", n)
	}

	want := User{Name: sa.Username, UID: sa.UID, Groups: sa.Groups}
	for range 3 {
		u, ok, err := a.Authenticate(request("Bearer sa-token"))
		if !ok || err != nil || !reflect.DeepEqual(u, want) {
			t.Fatalf("reviewed token: %+v %v %v", u, ok, err)
		}
	}
	if n := f.requests.Load(); n != 1 {
		t.Fatalf("%d reviews for one token within the cache TTL, want 1", n)
	}
	now = now.Add(DefaultTokenReviewCacheTTL + time.Second)
	if _, ok, _ := a.Authenticate(request("Bearer sa-token")); !ok || f.requests.Load() != 2 {
		t.Fatalf("an expired answer was not reviewed again (%d reviews)", f.requests.Load())
	}

	// A rejected token is a 401, and the rejection is cached for the shorter negative TTL.
	for range 3 {
		_, ok, err := a.Authenticate(request("Bearer forged-token"))
		if ok || !errors.Is(err, ErrInvalidCredentials) || errors.Is(err, ErrUnavailable) {
			t.Fatalf("forged token: %v %v", ok, err)
		}
		if strings.Contains(err.Error(), "forged-token") {
			t.Fatalf("error %q shows the token", err)
		}
	}
	if n := f.requests.Load(); n != 3 {
		t.Fatalf("%d reviews, want 3 (the rejection cached)", n)
	}
	now = now.Add(DefaultTokenReviewNegativeCacheTTL + time.Second)
	_, _, _ = a.Authenticate(request("Bearer forged-token"))
	if n := f.requests.Load(); n != 4 {
		t.Fatalf("%d reviews, want 4 (the rejection expired)", n)
	}

	// The cache is keyed by the token's hash, never the token.
	for _, c := range []*reviewCache{a.reviewer.accepted, a.reviewer.rejected} {
		for _, el := range c.byKey {
			if reflect.TypeOf(el.Value.(*cacheEntry).key) != reflect.TypeFor[[32]byte]() {
				t.Fatal("cache key is not a hash")
			}
		}
	}

	// An unreachable reviewer is ErrUnavailable (a 503), not cached, and not a rejection.
	f.srv.Close()
	now = now.Add(time.Minute)
	_, ok, err := a.Authenticate(request("Bearer sa-token"))
	if ok || !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("unreachable reviewer: %v %v", ok, err)
	}
	if strings.Contains(err.Error(), "sa-token") {
		t.Fatalf("error %q shows the token", err)
	}
	// The token file still works without the reviewer.
	if _, ok, err := a.Authenticate(request("Bearer file-token")); !ok || err != nil {
		t.Fatalf("token file with the reviewer down: %v %v", ok, err)
	}
}

// Audiences: a token the reviewer vouches for other audiences than the ones asked is refused.
func TestTokenReviewAudiences(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		review, err := decodeReview(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		review.Status = authenticationv1.TokenReviewStatus{Authenticated: true,
			User: authenticationv1.UserInfo{Username: "bob"}, Audiences: []string{"someone-else"}}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(review)
	}))
	t.Cleanup(srv.Close)
	a, err := New(Options{AuthenticationKubeconfig: kubeconfigFor(t, srv.URL), TokenReviewAudiences: []string{"kubesearch"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := a.Authenticate(request("Bearer tok")); ok || !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("token for another audience: %v %v", ok, err)
	}
}

func TestReviewCacheBounded(t *testing.T) {
	c := newReviewCache(3)
	now := time.Now()
	key := func(i byte) [32]byte { return [32]byte{i} }
	for i := range byte(10) {
		c.put(key(i), cacheEntry{expires: now.Add(time.Minute)})
		if i == 7 {
			c.get(key(7), now) // most recently used
		}
	}
	if n := c.len(); n != 3 {
		t.Fatalf("%d entries, want 3", n)
	}
	for i, want := range map[byte]bool{9: true, 8: true, 7: true, 6: false, 0: false} {
		if _, ok := c.get(key(i), now); ok != want {
			t.Errorf("entry %d kept: %v, want %v", i, ok, want)
		}
	}
}
