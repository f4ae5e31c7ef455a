package queryapi

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubesearch/kubesearch/internal/auth"
)

// Defaults of the bounds: the flags' defaults (0 in Options is no bound). README "Security" says
// why each is what it is.
const (
	DefaultRateLimit               = 200
	DefaultRateBurst               = 400
	DefaultMaxWatches              = 1000
	DefaultMaxListsPerSubject      = 16
	DefaultMaxRequestsInFlight     = 400
	DefaultWriteTimeout            = time.Minute
	DefaultSourceRateLimit         = 1000
	DefaultSourceRateBurst         = 2000
	DefaultSourceAuthFailureLimit  = 1
	DefaultSourceAuthFailureBurst  = 20
	DefaultMaxConnectionsPerSource = 1000
	DefaultMaxTrackedSources       = 100_000
)

// Bounds that refuse, as the refusals metric names them.
const (
	boundSubjectRate       = "subject-rate"
	boundSubjectWatches    = "subject-watches"
	boundSubjectLists      = "subject-lists"
	boundInFlight          = "in-flight"
	boundSourceRate        = "source-rate"
	boundSourceAuthFailure = "source-auth-failures"
	boundSourceConnections = "source-connections"
	boundTokenReviews      = "token-reviews"
	// boundSubjectReviews: a request whose SubjectAccessReviews were past its or its subject's
	// bounds (reviews.go).
	boundSubjectReviews = "subject-access-reviews"
)

// limiter bounds what one subject may ask (requests per second, open watches, lists streaming
// every page) and, before authentication, what one source address may (requests per second,
// failed authentications, open connections: sources.go), and the requests the server serves at
// once, so one client cannot starve the others. Subjects are keyed by user name; buckets of
// subjects and sources gone quiet are dropped, and the sources' table is bounded (sources.go).
// A nil limiter bounds nothing.
type limiter struct {
	rate       rate.Limit
	burst      int
	maxWatches int
	maxLists   int

	sourceRate, failureRate   rate.Limit
	sourceBurst, failureBurst int
	maxConns                  int

	maxInFlight int64
	inFlight    atomic.Int64

	refused *prometheus.CounterVec
	now     func() time.Time

	mu       sync.Mutex
	subjects map[string]*subjectLimits
	sources  sourceTable
	swept    time.Time
}

type subjectLimits struct {
	bucket  *rate.Limiter
	watches int
	lists   int
	used    time.Time
}

// newLimiter makes the bounds of the options, its refusals counted in reg.
func newLimiter(o Options, reg prometheus.Registerer) *limiter {
	perSecond := func(r float64) rate.Limit {
		if r <= 0 {
			return rate.Inf
		}
		return rate.Limit(r)
	}
	l := &limiter{rate: perSecond(o.RateLimit), burst: o.RateBurst, maxWatches: o.MaxWatches, maxLists: o.MaxListsPerSubject,
		sourceRate: perSecond(o.SourceRateLimit), sourceBurst: o.SourceRateBurst,
		failureRate: perSecond(o.SourceAuthFailureLimit), failureBurst: o.SourceAuthFailureBurst,
		maxConns: o.MaxConnectionsPerSource, maxInFlight: int64(o.MaxRequestsInFlight),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubesearch_queryapi_refused_total",
			Help: "Requests (and, for source-connections, connections) refused by a bound, by bound: subject-rate, subject-watches, subject-lists, in-flight, source-rate, source-auth-failures, source-connections, token-reviews, subject-access-reviews.",
		}, []string{"bound"}),
		now: time.Now, subjects: map[string]*subjectLimits{}}
	l.sources = newSourceTable(o.MaxTrackedSources, l.newSourceLimits)
	if reg != nil {
		reg.MustRegister(l.refused)
	}
	return l
}

// sweep drops the state of subjects and sources gone quiet; l.mu is held.
func (l *limiter) sweep(now time.Time) {
	if now.Sub(l.swept) < time.Minute {
		return
	}
	for k, s := range l.subjects {
		if s.watches == 0 && s.lists == 0 && now.Sub(s.used) > 10*time.Minute {
			delete(l.subjects, k)
		}
	}
	l.sources.sweep(now)
	l.swept = now
}

func (l *limiter) subject(name string, now time.Time) *subjectLimits {
	l.sweep(now)
	s := l.subjects[name]
	if s == nil {
		s = &subjectLimits{bucket: rate.NewLimiter(l.rate, l.burst)}
		l.subjects[name] = s
	}
	s.used = now
	return s
}

// refuse counts a refusal by bound.
func (l *limiter) refuse(bound string) {
	if l != nil {
		l.refused.WithLabelValues(bound).Inc()
	}
}

// take takes one token of a bucket now; when refused, how long until one would pass.
func take(b *rate.Limiter, now time.Time) (bool, time.Duration) {
	r := b.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// allow takes one request of a subject; when refused, how long until one would pass.
func (l *limiter) allow(name string) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	return take(l.subject(name, now).bucket, now)
}

// startWatch counts an open watch of a subject, refusing one past the bound; done ends it.
func (l *limiter) startWatch(name string) (done func(), ok bool) {
	if l == nil {
		return func() {}, true
	}
	return l.start(name, boundSubjectWatches, l.maxWatches, func(s *subjectLimits) *int { return &s.watches })
}

// openWatch counts the request as an open watch of subj, refusing it with a 429 past the bound
// (ok false: answered), and takes it out of the in-flight bound: a watch is bounded per subject
// from here on. done ends it.
func (s *Server) openWatch(c *gin.Context, subj subject) (done func(), ok bool) {
	done, ok = s.limits.startWatch(subj.user.Name)
	if !ok {
		tooManyRequests(c, 5*time.Second, fmt.Sprintf("too many watches open for %q: at most %d", subj.user.Name, s.limits.maxWatches))
		return nil, false
	}
	leaveInFlight(c)
	return done, true
}

// startList counts a LIST of a subject streaming every page (one without a limit), refusing one
// past the bound; done ends it.
func (l *limiter) startList(name string) (done func(), ok bool) {
	if l == nil {
		return func() {}, true
	}
	return l.start(name, boundSubjectLists, l.maxLists, func(s *subjectLimits) *int { return &s.lists })
}

func (l *limiter) start(name, bound string, most int, counter func(*subjectLimits) *int) (done func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := counter(l.subject(name, l.now()))
	if most > 0 && *n >= most {
		l.refuse(bound)
		return nil, false
	}
	*n++
	return sync.OnceFunc(func() {
		l.mu.Lock()
		*n--
		l.mu.Unlock()
	}), true
}

// startRequest counts a request being served, refusing one past the bound; done ends it.
func (l *limiter) startRequest() (done func(), ok bool) {
	if l == nil || l.maxInFlight <= 0 {
		return func() {}, true
	}
	if l.inFlight.Add(1) > l.maxInFlight {
		l.inFlight.Add(-1)
		return nil, false
	}
	return sync.OnceFunc(func() { l.inFlight.Add(-1) }), true
}

// tooManyRequests answers 429 with Retry-After, as kube-apiserver's max-in-flight filter does.
func tooManyRequests(c *gin.Context, retryAfter time.Duration, message string) {
	secs := int(math.Ceil(retryAfter.Seconds()))
	c.Header("Retry-After", strconv.Itoa(max(secs, 1)))
	st := newStatus(http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, message)
	st.Details = &metav1.StatusDetails{RetryAfterSeconds: int32(max(secs, 1))}
	writeStatusObject(c, st)
}

// rateLimit is the middleware applying a subject's request rate, after authentication.
func (s *Server) rateLimit(c *gin.Context) {
	if public(c.Request.URL.Path) {
		c.Next()
		return
	}
	subj := subjectOf(c)
	if ok, wait := s.limits.allow(subj.user.Name); !ok {
		s.limits.refuse(boundSubjectRate)
		tooManyRequests(c, wait, fmt.Sprintf("too many requests from %q: at most %g per second (burst %d); retry later",
			subj.user.Name, float64(s.limits.rate), s.limits.burst))
		c.Abort()
		return
	}
	// Only now does the source's state count as a client's: a request without accepted
	// credentials, or past its subject's rate, protects no state (sourceTable).
	s.limits.authenticated(sourceOf(c.Request.RemoteAddr))
	c.Next()
}

// startFullList counts a LIST without a limit against its subject's bound: such a list streams
// every page, each held until the client has read it, and its snapshot until the last. Past the
// bound it answers 429 and ok is false.
func (s *Server) startFullList(c *gin.Context) (done func(), ok bool) {
	subj := subjectOf(c)
	done, ok = s.limits.startList(subj.user.Name)
	if !ok {
		tooManyRequests(c, time.Second, fmt.Sprintf("too many lists without a limit streaming for %q: at most %d at once; list in pages (limit), or retry later",
			subj.user.Name, s.limits.maxLists))
	}
	return done, ok
}

// admit is the first bound a request meets, before authentication: its answer's writes get a
// deadline (deadline.go), it counts against the requests in flight (watches aside: they are long
// by nature and bounded per subject) and against its source's request rate; when its source has
// failed authentication too often, only credentials known without a new review are judged
// (auth.KnownOnly), and a 401 costs the source one failure. The probes pass unbounded: the
// kubelet must reach them whatever the load.
func (s *Server) admit(c *gin.Context) {
	if s.opts.WriteTimeout > 0 {
		w := newDeadlineWriter(c.Writer, s.opts.WriteTimeout)
		c.Writer = w
		defer w.finish()
	}
	if unauthenticatedPaths[c.Request.URL.Path] {
		c.Next()
		return
	}
	done, ok := s.limits.startRequest()
	if !ok {
		s.limits.refuse(boundInFlight)
		tooManyRequests(c, time.Second, fmt.Sprintf("the server is serving %d requests at once, its bound; retry later", s.limits.maxInFlight))
		c.Abort()
		return
	}
	// A watch gives its slot back once it is one (leaveInFlight): a parameter alone (watch=1 on
	// any path) must not take a request out of the bound.
	c.Set(inFlightKey, done) // done is idempotent
	defer done()
	src := sourceOf(c.Request.RemoteAddr)
	ok, wait, knownOnly, who := s.limits.admitSource(src)
	if !ok {
		s.limits.refuse(boundSourceRate)
		tooManyRequests(c, wait, fmt.Sprintf("too many requests from %s: at most %g per second (burst %d); retry later",
			who, float64(s.limits.sourceRate), s.limits.sourceBurst))
		c.Abort()
		return
	}
	if knownOnly {
		c.Request = c.Request.WithContext(auth.KnownOnly(c.Request.Context()))
	}
	c.Next()
	if c.Writer.Status() == http.StatusUnauthorized {
		s.limits.authFailed(src)
	}
}

const inFlightKey = "kubesearch.inflight"

// leaveInFlight gives back a request's slot among the requests in flight: for a watch once it
// serves, as watches are long by nature and bounded per subject instead.
func leaveInFlight(c *gin.Context) {
	if v, ok := c.Get(inFlightKey); ok {
		v.(func())()
	}
}

// throttledAuthentication answers a credential auth refused unjudged (auth.ErrThrottled): its
// source failed too often, or too many unknown tokens are under review.
func (s *Server) throttledAuthentication(c *gin.Context) {
	src := sourceOf(c.Request.RemoteAddr)
	if wait, failing, who := s.limits.failureWait(src); failing {
		s.limits.refuse(boundSourceAuthFailure)
		tooManyRequests(c, wait, fmt.Sprintf("too many failed authentications from %s: at most %g per second (burst %d); retry later",
			who, float64(s.limits.failureRate), s.limits.failureBurst))
	} else {
		s.limits.refuse(boundTokenReviews)
		tooManyRequests(c, time.Second, "too many bearer tokens under review at once; retry later")
	}
	c.Abort()
}

// validateBounds checks the bounds' options, each error naming its flag.
func (o *Options) validateBounds() []error {
	var errs []error
	for _, b := range []struct {
		flag string
		v    float64
	}{
		{"--rate-limit", o.RateLimit}, {"--rate-burst", float64(o.RateBurst)}, {"--max-watches-per-subject", float64(o.MaxWatches)},
		{"--max-lists-per-subject", float64(o.MaxListsPerSubject)}, {"--max-requests-inflight", float64(o.MaxRequestsInFlight)},
		{"--write-timeout", o.WriteTimeout.Seconds()},
		{"--source-rate-limit", o.SourceRateLimit}, {"--source-rate-burst", float64(o.SourceRateBurst)},
		{"--source-auth-failure-limit", o.SourceAuthFailureLimit}, {"--source-auth-failure-burst", float64(o.SourceAuthFailureBurst)},
		{"--max-connections-per-source", float64(o.MaxConnectionsPerSource)}, {"--max-tracked-sources", float64(o.MaxTrackedSources)},
	} {
		if b.v < 0 || math.IsNaN(b.v) {
			errs = append(errs, fmt.Errorf("%s: must not be negative, got %v", b.flag, b.v))
		}
	}
	for _, b := range []struct {
		rate, burst string
		r           float64
		n           int
	}{
		{"--rate-limit", "--rate-burst", o.RateLimit, o.RateBurst},
		{"--source-rate-limit", "--source-rate-burst", o.SourceRateLimit, o.SourceRateBurst},
		{"--source-auth-failure-limit", "--source-auth-failure-burst", o.SourceAuthFailureLimit, o.SourceAuthFailureBurst},
	} {
		if b.r > 0 && b.n == 0 {
			errs = append(errs, fmt.Errorf("%s: at least 1 with %s %g (a burst of 0 refuses everything)", b.burst, b.rate, b.r))
		}
	}
	if o.WriteTimeout > 0 && o.WriteTimeout < time.Second {
		errs = append(errs, fmt.Errorf("--write-timeout: at least 1s (0: no bound), got %s", o.WriteTimeout))
	}
	return errs
}
