package queryapi

import (
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// source is where a request comes from, as the bounds before authentication see it: an IPv4
// address, or an IPv6 /64 (a single host commonly holds a whole /64: bounding each IPv6 address
// would bound nothing). The zero source stands for every peer whose address is not an IP.
//
// The address is the TCP peer's. Behind a proxy (an ingress controller, a service mesh's sidecar)
// every client is the proxy: the per-source bounds then apply to all of them together, and belong
// at the proxy instead (README "Security").
type source netip.Prefix

func sourceOf(remoteAddr string) source {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return source{}
	}
	return sourceOfAddr(ap.Addr())
}

func sourceOfNet(addr net.Addr) source {
	if a, ok := addr.(interface{ AddrPort() netip.AddrPort }); ok {
		return sourceOfAddr(a.AddrPort().Addr())
	}
	return sourceOf(addr.String())
}

func sourceOfAddr(a netip.Addr) source {
	a = a.Unmap().WithZone("")
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, err := a.Prefix(bits)
	if err != nil {
		return source{}
	}
	return source(p)
}

func (s source) String() string {
	p := netip.Prefix(s)
	switch {
	case !p.IsValid():
		return "a peer without an IP address"
	case p.Addr().Is4():
		return p.Addr().String()
	}
	return p.String()
}

// sourceLimits are a source's buckets (nil: no bound) and open connections.
type sourceLimits struct {
	requests, failures *rate.Limiter
	conns              int
	used               time.Time
}

func (l *limiter) sourceState(src source, now time.Time) *sourceLimits {
	l.sweep(now)
	s := l.sources[src]
	if s == nil {
		s = &sourceLimits{}
		if l.sourceRate != rate.Inf {
			s.requests = rate.NewLimiter(l.sourceRate, l.sourceBurst)
		}
		if l.failureRate != rate.Inf {
			s.failures = rate.NewLimiter(l.failureRate, l.failureBurst)
		}
		l.sources[src] = s
	}
	s.used = now
	return s
}

// admitSource takes one request of a source; when refused, how long until one would pass.
// knownOnly says the source's failed authentications have used up their burst: only credentials
// known without a new review are judged for it.
func (l *limiter) admitSource(src source) (ok bool, wait time.Duration, knownOnly bool) {
	if l == nil {
		return true, 0, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	s := l.sourceState(src, now)
	if s.requests != nil {
		if ok, wait := take(s.requests, now); !ok {
			return false, wait, false
		}
	}
	return true, 0, s.failures != nil && s.failures.TokensAt(now) < 1
}

// authFailed spends one of a source's failed authentications (none left: nothing more to spend;
// the source stays limited until the bucket refills).
func (l *limiter) authFailed(src source) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if s := l.sourceState(src, now); s.failures != nil {
		s.failures.AllowN(now, 1)
	}
}

// failureWait says whether a source's failed authentications are used up, and how long until one
// more may be tried.
func (l *limiter) failureWait(src source) (time.Duration, bool) {
	if l == nil {
		return 0, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	s := l.sourceState(src, now)
	if s.failures == nil {
		return 0, false
	}
	tokens := s.failures.TokensAt(now)
	if tokens >= 1 {
		return 0, false
	}
	return time.Duration((1 - tokens) / float64(l.failureRate) * float64(time.Second)), true
}

// limitConnections bounds the connections each source holds open: past the bound, a new
// connection is closed as soon as it is accepted, before a byte of it is read (or a TLS
// handshake made).
func (l *limiter) limitConnections(ln net.Listener) net.Listener {
	if l == nil || l.maxConns <= 0 {
		return ln
	}
	return &connLimitListener{Listener: ln, limits: l}
}

type connLimitListener struct {
	net.Listener
	limits *limiter
}

func (cl *connLimitListener) Accept() (net.Conn, error) {
	for {
		c, err := cl.Listener.Accept()
		if err != nil {
			return nil, err
		}
		src := sourceOfNet(c.RemoteAddr())
		if cl.limits.openConn(src) {
			return &sourceConn{Conn: c, closed: sync.OnceFunc(func() { cl.limits.closeConn(src) })}, nil
		}
		cl.limits.refuse(boundSourceConnections)
		_ = c.Close() // refused: nothing to tell a peer that has sent nothing yet
	}
}

func (l *limiter) openConn(src source) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.sourceState(src, time.Now())
	if s.conns >= l.maxConns {
		return false
	}
	s.conns++
	return true
}

func (l *limiter) closeConn(src source) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sourceState(src, time.Now()).conns--
}

// sourceConn is a connection counted against its source until closed.
type sourceConn struct {
	net.Conn
	closed func()
}

func (c *sourceConn) Close() error {
	c.closed()
	return c.Conn.Close()
}

// CloseWrite keeps net/http's graceful close (half-close, then drain) of TCP connections.
func (c *sourceConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil // net/http closes the connection next
}
