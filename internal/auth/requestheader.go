package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Headers a kube-apiserver's aggregation layer names the user in, the defaults of
// RequestHeaderOptions (kubeadm configures kube-apiserver with these).
const (
	DefaultUsernameHeader = "X-Remote-User"
	DefaultUIDHeader      = "X-Remote-Uid"
	DefaultGroupHeader    = "X-Remote-Group"
)

// RequestHeaderOptions configure the authentication of a front proxy, as kube-apiserver's
// --requestheader-* flags do: a request whose client certificate a CA of ClientCAFile signs
// (with a common name among AllowedNames, when set) comes from the proxy, which authenticated the
// user itself and names it in headers. A kube-apiserver's aggregation layer is such a proxy: the
// query API behind a Karmada control plane's APIService gets its requests so. The headers of
// any other request are never read.
type RequestHeaderOptions struct {
	// ClientCAFile (--requestheader-client-ca-file) holds the CAs that sign the proxy's client
	// certificate (the control plane's --proxy-client-cert-file). Keep it apart from
	// --client-ca-file: a certificate of this CA may name any user.
	ClientCAFile string
	// AllowedNames (--requestheader-allowed-names) are the common names the proxy's certificate
	// may have; empty, any certificate of ClientCAFile.
	AllowedNames []string
	// UsernameHeaders, UIDHeaders and GroupHeaders (--requestheader-username-headers, -uid-headers,
	// -group-headers) are where the proxy names the user: the first username header present is
	// the name, the first UID header present the UID, every value of every group header a group.
	UsernameHeaders, UIDHeaders, GroupHeaders []string
}

// Enabled says whether a front proxy is trusted.
func (o RequestHeaderOptions) Enabled() bool { return o.ClientCAFile != "" }

func (o RequestHeaderOptions) withDefaults() RequestHeaderOptions {
	if len(o.UsernameHeaders) == 0 {
		o.UsernameHeaders = []string{DefaultUsernameHeader}
	}
	if len(o.UIDHeaders) == 0 {
		o.UIDHeaders = []string{DefaultUIDHeader}
	}
	if len(o.GroupHeaders) == 0 {
		o.GroupHeaders = []string{DefaultGroupHeader}
	}
	return o
}

// check reports every bad option, each naming its flag.
func (o RequestHeaderOptions) check() []error {
	var errs []error
	if !o.Enabled() {
		if len(o.AllowedNames) > 0 {
			errs = append(errs, errors.New("--requestheader-allowed-names: needs --requestheader-client-ca-file"))
		}
		return errs
	}
	for _, h := range []struct {
		flag  string
		names []string
	}{{"--requestheader-username-headers", o.UsernameHeaders}, {"--requestheader-uid-headers", o.UIDHeaders}, {"--requestheader-group-headers", o.GroupHeaders}} {
		for _, n := range h.names {
			if !headerName(n) {
				errs = append(errs, fmt.Errorf("%s: %q is not an HTTP header name", h.flag, n))
			}
		}
	}
	if slices.Contains(o.AllowedNames, "") {
		errs = append(errs, errors.New("--requestheader-allowed-names: an empty name; leave the flag out to allow any certificate of --requestheader-client-ca-file"))
	}
	return errs
}

// requestHeader authenticates the front proxy and reads the user it names.
type requestHeader struct {
	roots                     *x509.CertPool
	allowed                   []string
	users, uids, groupHeaders []string
}

func newRequestHeader(o RequestHeaderOptions) (*requestHeader, error) {
	pool, err := readCAPool(o.ClientCAFile)
	if err != nil {
		return nil, err
	}
	o = o.withDefaults()
	return &requestHeader{roots: pool, allowed: o.AllowedNames, users: o.UsernameHeaders, uids: o.UIDHeaders, groupHeaders: o.GroupHeaders}, nil
}

// authenticate answers the user the proxy names; ok is false when the request does not come
// from the proxy (no certificate of its CA), whose headers are then ignored. A proxy that
// names no user is an error (a 401 unless other credentials of the request are accepted), never
// anonymous access: the proxy authenticated someone, and that someone is not said.
func (h *requestHeader) authenticate(r *http.Request) (user User, ok bool, err error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return User{}, false, nil
	}
	leaf, err := verifyClient(r.TLS, h.roots)
	if err != nil {
		// Another CA's certificate: a user's own, for the client certificate authenticator.
		return User{}, false, nil
	}
	if len(h.allowed) > 0 && !slices.Contains(h.allowed, leaf.Subject.CommonName) {
		return User{}, false, fmt.Errorf("front proxy certificate: common name %q is not among --requestheader-allowed-names", leaf.Subject.CommonName)
	}
	name := firstHeader(r.Header, h.users)
	if name == "" {
		return User{}, false, fmt.Errorf("front proxy: no user in %s", strings.Join(h.users, ", "))
	}
	var groups []string
	for _, g := range h.groupHeaders {
		groups = append(groups, r.Header.Values(g)...)
	}
	u := authenticated(name, firstHeader(r.Header, h.uids), groups)
	u.Proxied = true
	return u, true, nil
}

// headerName says whether s is an HTTP header name (an RFC 9110 token).
func headerName(s string) bool {
	return s != "" && strings.IndexFunc(s, func(c rune) bool {
		return !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", c))
	}) < 0
}

// firstHeader is the first non-empty value of the first of names present.
func firstHeader(hd http.Header, names []string) string {
	for _, n := range names {
		if v := strings.TrimSpace(hd.Get(n)); v != "" {
			return v
		}
	}
	return ""
}

// verifyClient verifies a presented chain against roots for client authentication and answers
// its leaf.
func verifyClient(state *tls.ConnectionState, roots *x509.CertPool) (*x509.Certificate, error) {
	leaf := state.PeerCertificates[0]
	intermediates := x509.NewCertPool()
	for _, ic := range state.PeerCertificates[1:] {
		intermediates.AddCert(ic)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: intermediates,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return nil, err
	}
	return leaf, nil
}
