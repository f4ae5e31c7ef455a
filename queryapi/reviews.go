package queryapi

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
	"github.com/gin-gonic/gin/render"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubesearch/kubesearch/internal/authz"
)

// errReviewsIncomplete is what a guarded answer's writes return once it was refused.
var errReviewsIncomplete = errors.New("queryapi: answer refused: subject access reviews incomplete")

// guardReviews is the middleware that keeps an answer from being written out of incomplete
// SubjectAccessReviews: when a question the request asked of the members could not be answered
// wholly (authz.IncompleteError: past the request's or its subject's bounds), whatever the
// handler decided from it — a 403, fewer clusters, a narrower scope — depends on which reviews
// were asked, so on members and namespaces the subject may not see. The answer is then a 429
// with Retry-After, which client-go retries by itself; the retry asks only the reviews not
// cached yet. Every decision a handler takes from the reviews precedes the answer's status, so it
// is checked once, there (a watch checks its later decisions itself: watch.go).
func (s *Server) guardReviews(c *gin.Context) {
	subj := subjectOf(c)
	if subj.review == nil {
		c.Next()
		return
	}
	g := &reviewGuard{ResponseWriter: c.Writer, view: subj.review, count: func() { s.limits.refuse(boundSubjectReviews) }}
	c.Writer = g
	c.Next()
	// A handler that wrote nothing: gin writes its status after the chain, past this writer.
	g.check()
}

// reviewGuard is the writer of guardReviews.
type reviewGuard struct {
	gin.ResponseWriter
	view    *authz.View
	count   func() // counts a refusal
	checked bool
	refused bool
}

// check decides, once, at the answer's first write, whether it is refused; if so it writes the
// 429 in its place.
func (g *reviewGuard) check() bool {
	if g.checked {
		return !g.refused
	}
	g.checked = true
	err := g.view.Err()
	var incomplete *authz.IncompleteError
	if !errors.As(err, &incomplete) || g.ResponseWriter.Written() {
		return true
	}
	g.refused = true
	g.count()
	secs := max(1, int(math.Ceil(incomplete.RetryAfter.Seconds())))
	// What the handler set (Warnings, Content-Length, ...) belongs to the answer refused.
	clear(g.ResponseWriter.Header())
	g.ResponseWriter.Header().Set("Retry-After", strconv.Itoa(secs))
	st := newStatus(http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests,
		fmt.Sprintf("subject access reviews incomplete: %s", incomplete.Reason))
	st.Details = &metav1.StatusDetails{RetryAfterSeconds: int32(secs)}
	g.ResponseWriter.WriteHeader(http.StatusTooManyRequests)
	_ = render.JSON{Data: st}.Render(g.ResponseWriter) // a client gone away gets nothing either way
	return false
}

func (g *reviewGuard) WriteHeader(code int) {
	if g.check() {
		g.ResponseWriter.WriteHeader(code)
	}
}

func (g *reviewGuard) WriteHeaderNow() {
	if g.check() {
		g.ResponseWriter.WriteHeaderNow()
	}
}

func (g *reviewGuard) Write(b []byte) (int, error) {
	if !g.check() {
		return 0, errReviewsIncomplete
	}
	return g.ResponseWriter.Write(b)
}

func (g *reviewGuard) WriteString(s string) (int, error) {
	if !g.check() {
		return 0, errReviewsIncomplete
	}
	return g.ResponseWriter.WriteString(s)
}

func (g *reviewGuard) Flush() {
	if g.check() {
		g.ResponseWriter.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection through this writer too.
func (g *reviewGuard) Unwrap() http.ResponseWriter { return g.ResponseWriter }

// reviewErr is the error of the subject's reviews: non-nil when a question asked of them could
// not be answered wholly, so that no answer may be given from them.
func (s subject) reviewErr() error {
	if s.review == nil {
		return nil
	}
	return s.review.Err()
}

// reviewedAgain is subj with a new View of the members' reviews, bound to ctx, for the questions a
// long request (a watch) asks long after it began: each time within bounds of its own, as a new
// request's.
func (s *Server) reviewedAgain(ctx context.Context, subj subject) subject {
	if subj.review != nil {
		subj.review = s.reviewer.View(ctx, subj.user, s.inv)
	}
	return subj
}
