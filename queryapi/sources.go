package queryapi

import (
	"container/list"
	"fmt"
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

// IPv6 sources are aggregated further once a prefix holds many of them: a /56 (a home or small
// site's delegation) whose /64s hold 16 states of their own, a /48 (a site's) holding 64, a /40
// holding 256 or a /32 (a provider's allocation) holding 1,024 gives each further /64 inside it the
// prefix's one state. So one holder of a /32 has at most 1,025 budgets however many of its 2^32
// /64s it uses — filling the default table takes about a hundred /32s — while the sources seen first
// keep theirs.
var prefixLevels = [...]struct{ bits, max int }{{56, 16}, {48, 64}, {40, 256}, {32, 1024}}

// sourceLimits are a bucket's token buckets (nil: no bound) and open connections. The bucket is
// a source, an IPv6 prefix holding many (prefixLevels), or the overflow (sourceTable).
type sourceLimits struct {
	key                source
	overflow           bool // shared by the sources the table had no room for
	protected          bool // a request of it was authenticated and admitted (sourceTable.promote)
	requests, failures *rate.Limiter
	conns              int
	used               time.Time
	// elem is its place in its segment; nil while it has connections open (it is never
	// forgotten then: its last connection closing puts it back) and for the overflow.
	elem *list.Element
}

// atRest says whether s holds nothing a new state would not: no connection, and buckets full.
// Forgetting such a state gives its source nothing back.
func (s *sourceLimits) atRest(now time.Time) bool {
	return s.conns == 0 && full(s.requests, now) && full(s.failures, now)
}

func full(b *rate.Limiter, now time.Time) bool {
	return b == nil || b.TokensAt(now) >= float64(b.Burst())
}

// sourceTable holds the sources' states, at most max (0: no bound); the limiter's mu guards it.
//
// A new state takes the place of another only when that one is at rest: forgetting a source that
// has spent some of its budget would give it a fresh one when it comes back, so an attacker
// cycling through addresses would launder its own budget, and a flood of new addresses would
// reset a busy client's. With no state at rest to forget, the new sources share one state, the
// overflow, until one is: the sources known keep theirs, a flood of new ones shares one budget.
//
// The states are kept in two segments, each least recently used first (a segmented LRU):
// probation for new sources, protected (at most three quarters of the table) for those with a
// request authenticated and admitted by its subject's rate. Room is made in probation only, so a
// flood without credentials, however fast, never pushes out a client that authenticated; only
// admitted requests, at their subjects' rates, move others' states back to probation.
type sourceTable struct {
	max                  int
	states               map[source]*sourceLimits
	probation, protected *list.List
	within               map[source]int // states inside each IPv6 /56 and /48 holding some
	overflow             *sourceLimits
	newState             func(source) *sourceLimits
}

func newSourceTable(max int, newState func(source) *sourceLimits) sourceTable {
	return sourceTable{max: max, states: map[source]*sourceLimits{}, probation: list.New(), protected: list.New(),
		within: map[source]int{}, newState: newState}
}

// state is the state src is judged by, made if need be, as used now.
func (t *sourceTable) state(src source, now time.Time) *sourceLimits {
	key := t.bucketOf(src)
	s := t.states[key]
	if s == nil {
		s = t.track(key, now)
	}
	s.used = now
	if s.elem != nil {
		t.segment(s).MoveToBack(s.elem)
	}
	return s
}

func (t *sourceTable) segment(s *sourceLimits) *list.List {
	if s.protected {
		return t.protected
	}
	return t.probation
}

// bucketOf is the key of src's state: its own, or that of the narrowest IPv6 prefix holding it
// that has one, or the widest prefix holding as many states as it may (prefixLevels).
func (t *sourceTable) bucketOf(src source) source {
	p := netip.Prefix(src)
	if !p.Addr().Is6() || p.Bits() != 64 {
		return src
	}
	if _, ok := t.states[src]; ok {
		return src
	}
	for _, l := range prefixLevels {
		if w := widen(p, l.bits); t.states[w] != nil {
			return w
		}
	}
	for i := len(prefixLevels) - 1; i >= 0; i-- {
		if w := widen(p, prefixLevels[i].bits); t.within[w] >= prefixLevels[i].max {
			return w
		}
	}
	return src
}

func widen(p netip.Prefix, bits int) source {
	w, _ := p.Addr().Prefix(bits) // bits < p.Bits(): never fails
	return source(w)
}

// track makes key's state, in the place of probation's least recently used one when the table is
// full and that one is at rest; else the overflow.
func (t *sourceTable) track(key source, now time.Time) *sourceLimits {
	if t.max > 0 && len(t.states) >= t.max {
		front := t.probation.Front()
		if front == nil || !front.Value.(*sourceLimits).atRest(now) {
			if t.overflow == nil {
				t.overflow = t.newState(source{})
				t.overflow.overflow = true
			}
			return t.overflow
		}
		t.forget(front.Value.(*sourceLimits))
	}
	s := t.newState(key)
	t.states[key] = s
	t.place(s)
	t.countWithin(key, 1)
	return s
}

// place puts s, without connections open, last of its segment; past protected's bound, its least
// recently used goes back to probation.
func (t *sourceTable) place(s *sourceLimits) {
	s.elem = t.segment(s).PushBack(s)
	if t.max > 0 && t.protected.Len() > t.max-t.max/4 {
		d := t.protected.Remove(t.protected.Front()).(*sourceLimits)
		d.protected = false
		d.elem = t.probation.PushBack(d)
	}
}

// promote moves src's state to protected: a request of it was authenticated and admitted.
func (t *sourceTable) promote(src source) {
	s := t.states[t.bucketOf(src)]
	if s == nil || s.protected {
		return
	}
	s.protected = true
	if s.elem != nil {
		t.probation.Remove(s.elem)
		t.place(s)
	}
}

// pin keeps s in the table while it has a connection open.
func (t *sourceTable) pin(s *sourceLimits) {
	if s.elem != nil {
		t.segment(s).Remove(s.elem)
		s.elem = nil
	}
}

// unpin lets s be forgotten again, its last connection closed now.
func (t *sourceTable) unpin(s *sourceLimits, now time.Time) {
	if !s.overflow {
		s.used = now
		t.place(s)
	}
}

// forget drops s, a state without connections open.
func (t *sourceTable) forget(s *sourceLimits) {
	t.segment(s).Remove(s.elem)
	delete(t.states, s.key)
	t.countWithin(s.key, -1)
}

// countWithin counts key's state in the IPv6 prefixes of prefixLevels holding it.
func (t *sourceTable) countWithin(key source, n int) {
	p := netip.Prefix(key)
	if !p.Addr().Is6() {
		return
	}
	for _, l := range prefixLevels {
		if p.Bits() <= l.bits {
			continue
		}
		w := widen(p, l.bits)
		if t.within[w] += n; t.within[w] <= 0 {
			delete(t.within, w)
		}
	}
}

// sweep forgets the sources quiet for ten minutes and at rest.
func (t *sourceTable) sweep(now time.Time) {
	for _, seg := range [...]*list.List{t.probation, t.protected} {
		for e := seg.Front(); e != nil; e = seg.Front() {
			s := e.Value.(*sourceLimits)
			if now.Sub(s.used) <= 10*time.Minute || !s.atRest(now) {
				break
			}
			t.forget(s)
		}
	}
}

func (l *limiter) newSourceLimits(key source) *sourceLimits {
	s := &sourceLimits{key: key}
	if l.sourceRate != rate.Inf {
		s.requests = rate.NewLimiter(l.sourceRate, l.sourceBurst)
	}
	if l.failureRate != rate.Inf {
		s.failures = rate.NewLimiter(l.failureRate, l.failureBurst)
	}
	return s
}

// sourceState is the state src is judged by; l.mu is held.
func (l *limiter) sourceState(src source, now time.Time) *sourceLimits {
	l.sweep(now)
	return l.sources.state(src, now)
}

// describe names the bucket of s in a refusal.
func (l *limiter) describe(s *sourceLimits) string {
	if s.overflow {
		return fmt.Sprintf("the new sources beyond the %d tracked", l.sources.max)
	}
	return s.key.String()
}

// authenticated says a request of src was authenticated and admitted by its subject's rate: its
// state is kept before those of sources without one (sourceTable).
func (l *limiter) authenticated(src source) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sources.promote(src)
}

// admitSource takes one request of a source; when refused, how long until one would pass, and
// whose budget it was (a source's, a prefix's, the overflow's). knownOnly says the source's
// failed authentications have used up their burst: only credentials known without a new review
// are judged for it.
func (l *limiter) admitSource(src source) (ok bool, wait time.Duration, knownOnly bool, who string) {
	if l == nil {
		return true, 0, false, ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	s := l.sourceState(src, now)
	if s.requests != nil {
		if ok, wait := take(s.requests, now); !ok {
			return false, wait, false, l.describe(s)
		}
	}
	return true, 0, s.failures != nil && s.failures.TokensAt(now) < 1, ""
}

// authFailed spends one of a source's failed authentications (none left: nothing more to spend;
// the source stays limited until the bucket refills).
func (l *limiter) authFailed(src source) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if s := l.sourceState(src, now); s.failures != nil {
		s.failures.AllowN(now, 1)
	}
}

// failureWait says whether a source's failed authentications are used up, and how long until one
// more may be tried, and whose they were.
func (l *limiter) failureWait(src source) (wait time.Duration, failing bool, who string) {
	if l == nil {
		return 0, false, ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	s := l.sourceState(src, now)
	if s.failures == nil {
		return 0, false, ""
	}
	tokens := s.failures.TokensAt(now)
	if tokens >= 1 {
		return 0, false, ""
	}
	return time.Duration((1 - tokens) / float64(l.failureRate) * float64(time.Second)), true, l.describe(s)
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
		if s, ok := cl.limits.openConn(sourceOfNet(c.RemoteAddr())); ok {
			return &sourceConn{Conn: c, closed: sync.OnceFunc(func() { cl.limits.closeConn(s) })}, nil
		}
		cl.limits.refuse(boundSourceConnections)
		_ = c.Close() // refused: nothing to tell a peer that has sent nothing yet
	}
}

// openConn counts a connection against its source's state, which stays in the table until its
// last connection closes (closeConn, with the state openConn answered).
func (l *limiter) openConn(src source) (*sourceLimits, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.sourceState(src, l.now())
	if s.conns >= l.maxConns {
		return nil, false
	}
	s.conns++
	l.sources.pin(s)
	return s, true
}

func (l *limiter) closeConn(s *sourceLimits) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s.conns--; s.conns == 0 {
		l.sources.unpin(s, l.now())
	}
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
