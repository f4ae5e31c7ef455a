package auth

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
)

// gatedReviewer is a TokenReview API whose reviews wait for the test to open a gate, except those
// of the instant tokens; it counts the reviews and the most under way at once.
type gatedReviewer struct {
	srv     *httptest.Server
	valid   map[string]authenticationv1.UserInfo
	instant map[string]bool
	gate    chan struct{}
	arrived chan struct{} // one per gated review reaching the API

	mu              sync.Mutex
	reviews         map[string]int
	inFlight, worst int
}

func newGatedReviewer(t *testing.T, valid map[string]authenticationv1.UserInfo, instant ...string) *gatedReviewer {
	t.Helper()
	f := &gatedReviewer{valid: valid, instant: map[string]bool{}, gate: make(chan struct{}),
		arrived: make(chan struct{}, 1000), reviews: map[string]int{}}
	for _, tok := range instant {
		f.instant[tok] = true
	}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		review, err := decodeReview(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		tok := review.Spec.Token
		f.mu.Lock()
		f.reviews[tok]++
		f.inFlight++
		f.worst = max(f.worst, f.inFlight)
		f.mu.Unlock()
		if !f.instant[tok] {
			f.arrived <- struct{}{}
			select {
			case <-f.gate:
			case <-r.Context().Done():
			}
		}
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
		if info, ok := f.valid[tok]; ok {
			review.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: info}
		} else {
			review.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
		}
		review.APIVersion, review.Kind = "authentication.k8s.io/v1", "TokenReview"
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(review)
	}))
	t.Cleanup(f.srv.Close)
	t.Cleanup(f.open) // a test failing with reviews held must not hang the server's Close
	return f
}

func (f *gatedReviewer) open() {
	select {
	case <-f.gate:
	default:
		close(f.gate)
	}
}

// count is the number of reviews of tok, or of every token ("").
func (f *gatedReviewer) count(tok string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if tok != "" {
		return f.reviews[tok]
	}
	n := 0
	for _, c := range f.reviews {
		n += c
	}
	return n
}

// clock is a settable time for the reviewer's caches, safe for concurrent readers.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func randomToken(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

var viewer = authenticationv1.UserInfo{Username: "system:serviceaccount:shop:viewer", UID: "sa-uid"}

// A flood of random tokens gets at most TokenReviewMaxInFlight reviews at once and as many waiting;
// the rest are refused at once (ErrThrottled, a 429), and a token accepted before is reviewed
// again in its own lane, however full the unknown tokens' lane is.
func TestTokenReviewFloodSparesKnownTokens(t *testing.T) {
	f := newGatedReviewer(t, map[string]authenticationv1.UserInfo{"sa-token": viewer, "new-token": viewer}, "sa-token", "new-token")
	a, err := New(Options{AuthenticationKubeconfig: kubeconfigFor(t, f.srv.URL), TokenReviewMaxInFlight: 2, TokenReviewTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{now: time.Now()}
	a.reviewer.now = clk.Now
	if _, ok, err := a.Authenticate(request("Bearer sa-token")); !ok || err != nil {
		t.Fatalf("valid token: %v %v", ok, err)
	}
	clk.Add(DefaultTokenReviewCacheTTL + time.Second) // its answer is stale: the next request reviews it again

	const flood = 20
	results := make(chan error, flood)
	for range flood {
		tok := randomToken(t)
		go func() {
			_, _, err := a.Authenticate(request("Bearer " + tok))
			results <- err
		}()
	}
	// 2 under review (held at the API), 2 waiting for a slot, 16 refused without a review.
	for i := range flood - 4 {
		if err := <-results; !errors.Is(err, ErrThrottled) {
			t.Fatalf("flood request %d: %v, want ErrThrottled", i, err)
		}
	}
	<-f.arrived
	<-f.arrived

	// The known token, stale, is reviewed again at once: not behind the flood.
	u, ok, err := a.Authenticate(request("Bearer sa-token"))
	if !ok || err != nil || u.Name != viewer.Username {
		t.Fatalf("known token during the flood: %+v %v %v", u, ok, err)
	}
	if n := f.count("sa-token"); n != 2 {
		t.Fatalf("known token reviewed %d times, want 2", n)
	}
	// A token never seen is one of the flood, as far as anyone can tell: refused, not reviewed.
	if _, _, err := a.Authenticate(request("Bearer new-token")); !errors.Is(err, ErrThrottled) {
		t.Fatalf("unknown valid token while the lane is full: %v, want ErrThrottled", err)
	}
	if n := f.count("new-token"); n != 0 {
		t.Fatalf("an unknown token was reviewed %d times while the lane was full", n)
	}

	f.open()
	for i := range 4 {
		if err := <-results; !errors.Is(err, ErrInvalidCredentials) {
			t.Fatalf("admitted flood request %d: %v, want ErrInvalidCredentials", i, err)
		}
	}
	f.mu.Lock()
	worst := f.worst
	f.mu.Unlock()
	if unknown := f.count("") - f.count("sa-token"); unknown != 4 || worst > 2+1 { // +1: the known lane's review
		t.Fatalf("%d reviews of flood tokens (want 4), %d at once (want at most 2 of them and the known token's)", unknown, worst)
	}
	// The flood over, the new token is reviewed.
	if _, ok, err := a.Authenticate(request("Bearer new-token")); !ok || err != nil {
		t.Fatalf("unknown valid token after the flood: %v %v", ok, err)
	}
}

// Rejections are cached apart: a flood of forged tokens cannot push a valid token's answer out of
// the cache (which would send its next request to the reviewer, behind the flood).
func TestTokenReviewRejectionsDoNotEvictAcceptedTokens(t *testing.T) {
	f := newGatedReviewer(t, map[string]authenticationv1.UserInfo{"sa-token": viewer}, "sa-token")
	f.open()
	a, err := New(Options{AuthenticationKubeconfig: kubeconfigFor(t, f.srv.URL), TokenReviewCacheSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := a.Authenticate(request("Bearer sa-token")); !ok || err != nil {
		t.Fatalf("valid token: %v %v", ok, err)
	}
	for range 50 {
		if _, _, err := a.Authenticate(request("Bearer " + randomToken(t))); !errors.Is(err, ErrInvalidCredentials) {
			t.Fatalf("forged token: %v", err)
		}
	}
	if n := a.reviewer.rejected.len(); n != 8 {
		t.Fatalf("%d rejections cached, want the bound, 8", n)
	}
	if _, ok, err := a.Authenticate(request("Bearer sa-token")); !ok || err != nil {
		t.Fatalf("valid token after the flood: %v %v", ok, err)
	}
	if n := f.count("sa-token"); n != 1 {
		t.Fatalf("valid token reviewed %d times within its TTL, want 1: the flood evicted its answer", n)
	}
}

// Concurrent requests with one token share one review.
func TestTokenReviewSharedByConcurrentRequests(t *testing.T) {
	f := newGatedReviewer(t, map[string]authenticationv1.UserInfo{"sa-token": viewer})
	a, err := New(Options{AuthenticationKubeconfig: kubeconfigFor(t, f.srv.URL), TokenReviewMaxInFlight: 1, TokenReviewTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	const n = 10
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			_, ok, err := a.Authenticate(request("Bearer sa-token"))
			if !ok && err == nil {
				err = errors.New("not authenticated")
			}
			errs <- err
		})
	}
	<-f.arrived
	f.open()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("request sharing a review: %v", err)
		}
	}
	if c := f.count("sa-token"); c != 1 {
		t.Fatalf("%d reviews for %d concurrent requests with one token, want 1", c, n)
	}
}

// KnownOnly (a source that failed too often) judges only what needs no new review: the token
// file, tokens accepted before (reviewed again when stale); anything else is ErrThrottled, never
// reviewed, and a wrong credential too, so guessing stops.
func TestKnownOnly(t *testing.T) {
	f := newGatedReviewer(t, map[string]authenticationv1.UserInfo{"sa-token": viewer, "new-token": viewer}, "sa-token", "new-token")
	tokens := filepath.Join(t.TempDir(), "tokens.csv")
	writeFile(t, tokens, "file-token,alice,1\n")
	a, err := New(Options{TokenAuthFile: tokens, AuthenticationKubeconfig: kubeconfigFor(t, f.srv.URL)})
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{now: time.Now()}
	a.reviewer.now = clk.Now
	if _, ok, err := a.Authenticate(request("Bearer sa-token")); !ok || err != nil {
		t.Fatalf("valid token: %v %v", ok, err)
	}
	clk.Add(DefaultTokenReviewCacheTTL + time.Second)
	limited := func(header string) (User, bool, error) {
		r := request(header)
		return a.Authenticate(r.WithContext(KnownOnly(r.Context())))
	}
	for _, tc := range []struct {
		header string
		ok     bool
		err    error
	}{
		{"Bearer file-token", true, nil},
		{"Bearer sa-token", true, nil}, // known, stale: reviewed again
		{"Bearer new-token", false, ErrThrottled},
		{"Bearer forged", false, ErrThrottled},
		{"Basic YWxpY2U6cHc=", false, ErrThrottled},
		{"", false, nil}, // no credentials: a 401 as ever
	} {
		_, ok, err := limited(tc.header)
		if ok != tc.ok || (tc.err == nil) != (err == nil) || (tc.err != nil && !errors.Is(err, tc.err)) {
			t.Errorf("%q: %v %v, want %v %v", tc.header, ok, err, tc.ok, tc.err)
		}
	}
	if n, m := f.count("sa-token"), f.count("new-token"); n != 2 || m != 0 || f.count("") != 2 {
		t.Errorf("reviews: known token %d (want 2), unknown %d (want 0), all %d", n, m, f.count(""))
	}
	// Unmarked, the same request is reviewed.
	if _, ok, err := a.Authenticate(request("Bearer new-token")); !ok || err != nil {
		t.Errorf("unknown valid token without KnownOnly: %v %v", ok, err)
	}
}

func TestCheckTokenReviewMaxInFlight(t *testing.T) {
	err := (Options{Anonymous: true, TokenReviewMaxInFlight: -1}).Check()
	if err == nil || !strings.Contains(err.Error(), "--token-review-max-in-flight") {
		t.Fatalf("negative --token-review-max-in-flight: %v", err)
	}
}
