package queryapi

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strings"

	"github.com/gin-gonic/gin"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A web page can read what the API answers without credentials in two ways, and guardBrowsers
// closes both, as local development servers do (Jupyter, webpack-dev-server, Vite, kubectl proxy):
//
//   - DNS rebinding: a page at evil.example makes its own name resolve to 127.0.0.1, and its
//     requests are then same-origin to the browser. They still carry the page's name in Host, so
//     an anonymous request is answered only for a Host that cannot be rebound: localhost, a name
//     under .localhost (RFC 6761: browsers resolve those to loopback themselves), an IP address
//     (no name was resolved), or a name --accept-hosts allows. A request whose credentials an
//     authenticator accepted is answered for any Host: a page cannot make a browser send them.
//   - Cross-origin requests: every request but the probes from a browser page of another origin
//     (an Origin header naming another host, Sec-Fetch-Site other than same-origin or none) is
//     refused, whoever it authenticates as. The API serves no CORS headers, and its own search page
//     (package page) calls it from the same origin, so no legitimate caller is refused, and a
//     browser sends client certificates on its own.
//
// kubectl, client-go and curl send neither Origin nor Sec-Fetch-Site. The probes answer any
// request: the kubelet sends the pod's IP as Host, and they say nothing about the fleet.

// acceptHosts are the host names, besides the loopback ones and IP addresses, that anonymous
// requests may name in their Host header (--accept-hosts).
type acceptHosts struct{ patterns []*regexp.Regexp }

// newAcceptHosts compiles --accept-hosts: regular expressions, each matching a whole host name
// (the port left out) in any case. Unlike kubectl proxy's, a pattern is anchored for the user, so
// example\.com does not accept example.com.evil.net; kubectl's ^...$ spelling works too.
func newAcceptHosts(patterns []string) (acceptHosts, error) {
	var (
		a    acceptHosts
		errs []error
	)
	for _, p := range patterns {
		if p == "" {
			errs = append(errs, errors.New(`--accept-hosts: an empty pattern; want a regular expression of host names such as 'kubesearch\.lan'`))
			continue
		}
		// Compiled alone first, so that an error quotes the pattern and not the anchors around it.
		_, err := regexp.Compile(p)
		if err == nil {
			var re *regexp.Regexp
			if re, err = regexp.Compile(`(?i)^(?:` + p + `)$`); err == nil {
				a.patterns = append(a.patterns, re)
				continue
			}
		}
		errs = append(errs, fmt.Errorf("--accept-hosts: %q: %w", p, err))
	}
	return a, errors.Join(errs...)
}

// accepts says whether anonymous requests may name host (without its port).
func (a acceptHosts) accepts(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	for _, re := range a.patterns {
		if re.MatchString(host) {
			return true
		}
	}
	return false
}

// hostname is a Host header's name: lower case, without the port or an IPv6 address's brackets.
func hostname(hostport string) string {
	h := strings.ToLower(hostport)
	if host, _, err := net.SplitHostPort(h); err == nil {
		return host
	}
	return strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
}

// crossOrigin says why r comes from a browser page of another origin, or "" when it does not.
// Same-origin compares the Origin's host and port with the Host header, as net/http's
// CrossOriginProtection does: a TLS-terminating proxy in front changes the scheme, not the name.
func crossOrigin(r *http.Request) string {
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none": // none: typed in the address bar, or a bookmark
	default:
		return fmt.Sprintf("a browser request from another origin (Sec-Fetch-Site: %s)", site)
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return ""
	}
	if u, err := url.Parse(origin); err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host) {
		return ""
	}
	return fmt.Sprintf("a browser request from another origin (Origin: %q, Host: %q)", origin, r.Host)
}

// guardBrowsers is the middleware that keeps web pages out (see above); it runs after
// authenticate, which tells anonymous requests apart.
func (s *Server) guardBrowsers(c *gin.Context) {
	if public(c.Request.URL.Path) {
		c.Next()
		return
	}
	if subjectOf(c).user.IsAnonymous() {
		if host := hostname(c.Request.Host); !s.hosts.accepts(host) {
			writeStatus(c, http.StatusForbidden, metav1.StatusReasonForbidden, fmt.Sprintf("anonymous requests for host %q are refused: "+
				"without credentials only localhost, *.localhost, IP addresses and names matching --accept-hosts are served, "+
				"so that no web page can rebind its own name to this address; add the name to --accept-hosts to serve it", host), nil)
			c.Abort()
			return
		}
	}
	if why := crossOrigin(c.Request); why != "" {
		writeStatus(c, http.StatusForbidden, metav1.StatusReasonForbidden, why+" is refused: the API answers kubectl, "+
			"client-go and other HTTP clients, and browser pages of its own origin only; open the URL directly", nil)
		c.Abort()
		return
	}
	c.Next()
}
