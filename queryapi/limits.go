package queryapi

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// limiter bounds what one subject may ask: requests per second (a token bucket each) and open
// watches, so one client cannot starve the others. Subjects are keyed by user name; buckets of
// subjects gone quiet are dropped.
type limiter struct {
	rate       rate.Limit
	burst      int
	maxWatches int

	mu       sync.Mutex
	subjects map[string]*subjectLimits
	swept    time.Time
}

type subjectLimits struct {
	bucket  *rate.Limiter
	watches int
	used    time.Time
}

func newLimiter(perSecond float64, burst, maxWatches int) *limiter {
	l := &limiter{rate: rate.Limit(perSecond), burst: burst, maxWatches: maxWatches, subjects: map[string]*subjectLimits{}}
	if perSecond <= 0 {
		l.rate = rate.Inf
	}
	return l
}

func (l *limiter) get(name string, now time.Time) *subjectLimits {
	if now.Sub(l.swept) > time.Minute {
		for k, s := range l.subjects {
			if s.watches == 0 && now.Sub(s.used) > 10*time.Minute {
				delete(l.subjects, k)
			}
		}
		l.swept = now
	}
	s := l.subjects[name]
	if s == nil {
		s = &subjectLimits{bucket: rate.NewLimiter(l.rate, l.burst)}
		l.subjects[name] = s
	}
	s.used = now
	return s
}

// allow takes one request of a subject; when refused, how long until one would pass.
func (l *limiter) allow(name string) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	r := l.get(name, now).bucket.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// startWatch counts an open watch of a subject, refusing one past the bound; done ends it.
func (l *limiter) startWatch(name string) (done func(), ok bool) {
	if l == nil {
		return func() {}, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.get(name, time.Now())
	if l.maxWatches > 0 && s.watches >= l.maxWatches {
		return nil, false
	}
	s.watches++
	return func() {
		l.mu.Lock()
		s.watches--
		l.mu.Unlock()
	}, true
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
	if unauthenticatedPaths[c.Request.URL.Path] {
		c.Next()
		return
	}
	subj := subjectOf(c)
	if ok, wait := s.limits.allow(subj.user.Name); !ok {
		tooManyRequests(c, wait, fmt.Sprintf("too many requests from %q: at most %g per second (burst %d); retry later",
			subj.user.Name, float64(s.limits.rate), s.limits.burst))
		c.Abort()
		return
	}
	c.Next()
}
