package queryapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus/testutil"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kubesearch/kubesearch/internal/auth"
	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/store"
)

// boundedServer is a facade over st with the bounds of o, authenticating with authn.
func boundedServer(t *testing.T, st searcher, o Options, authn *auth.Authenticator) *Server {
	t.Helper()
	wms := []store.Watermark{
		{Cluster: "member1", Resource: "pods", Kind: "Pod", ResourceVersion: 500},
		{Cluster: "member2", Resource: "pods", Kind: "Pod", ResourceVersion: 700},
	}
	f := &fleet{readWatermarks: func(context.Context) ([]store.Watermark, error) { return wms, nil },
		interval: time.Second, staleAfter: time.Minute, log: slog.New(slog.DiscardHandler), now: time.Now}
	f.poll(t.Context())
	o.RequestTimeout, o.ResourceVersionWait = 5*time.Second, 300*time.Millisecond
	s := &Server{opts: o, log: slog.New(slog.DiscardHandler), store: st, fleet: f, metrics: newMetrics(),
		catalog: testCatalog(), authn: authn, limits: newLimiter(o, nil)}
	s.engine = s.routes()
	return s
}

// tokenAuth authenticates the token,user lines given, and with a TokenReview API at reviewURL
// when it is set.
func tokenAuth(t *testing.T, reviewURL string, lines ...string) *auth.Authenticator {
	t.Helper()
	dir := t.TempDir()
	o := auth.Options{TokenAuthFile: filepath.Join(dir, "tokens.csv")}
	if err := os.WriteFile(o.TokenAuthFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if reviewURL != "" {
		o.AuthenticationKubeconfig = filepath.Join(dir, "kubeconfig")
		kc := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: %q}}]\n"+
			"users: [{name: u, user: {token: reviewer}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n", reviewURL)
		if err := os.WriteFile(o.AuthenticationKubeconfig, []byte(kc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	a, err := auth.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// fakeTokenReview is a TokenReview API accepting the tokens of valid (token → user name) and
// counting the reviews it is asked.
func fakeTokenReview(t *testing.T, valid map[string]string) (url string, reviews *atomic.Int64) {
	t.Helper()
	reviews = &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reviews.Add(1)
		body, _ := io.ReadAll(r.Body)
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
		review, ok := obj.(*authenticationv1.TokenReview)
		if err != nil || !ok {
			http.Error(w, fmt.Sprintf("not a TokenReview: %v", err), http.StatusBadRequest)
			return
		}
		if name, ok := valid[review.Spec.Token]; ok {
			review.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: name}}
		} else {
			review.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
		}
		review.APIVersion, review.Kind = "authentication.k8s.io/v1", "TokenReview"
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(review)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, reviews
}

// boundRequest sends GET path to s's engine from remote (ip:port) with a bearer token ("": none).
func boundRequest(t *testing.T, s *Server, remote, path, token string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequestWithContext(t.Context(), http.MethodGet, path, nil)
	r.RemoteAddr, r.Host = remote, "127.0.0.1"
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	s.engine.ServeHTTP(w, r)
	return w
}

// checkTooMany checks a 429 is a TooManyRequests Status with a Retry-After.
func checkTooMany(t *testing.T, w *httptest.ResponseRecorder, what string) {
	t.Helper()
	var st metav1.Status
	if w.Code != http.StatusTooManyRequests || json.Unmarshal(w.Body.Bytes(), &st) != nil || st.Reason != metav1.StatusReasonTooManyRequests {
		t.Fatalf("%s: %d %s, want a 429 TooManyRequests Status", what, w.Code, w.Body)
	}
	if n, err := strconv.Atoi(w.Header().Get("Retry-After")); err != nil || n < 1 {
		t.Errorf("%s: Retry-After %q", what, w.Header().Get("Retry-After"))
	}
}

func TestSourceOf(t *testing.T) {
	for _, tc := range []struct{ remote, want string }{
		{"192.0.2.7:1234", "192.0.2.7"},
		{"[::ffff:192.0.2.7]:1234", "192.0.2.7"},
		{"[2001:db8:1:2:aaaa::1]:443", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:bbbb::9]:443", "2001:db8:1:2::/64"},
		{"[fe80::1%eth0]:80", "fe80::/64"},
		{"@", "a peer without an IP address"},
	} {
		if got := sourceOf(tc.remote).String(); got != tc.want {
			t.Errorf("sourceOf(%q) = %s, want %s", tc.remote, got, tc.want)
		}
	}
}

// Requests per source address are bounded before authentication: requests without credentials
// (or with any) from one address are 429 past the burst, while other addresses, and the probes,
// are served; one IPv6 /64 is one source.
func TestSourceRateLimitBeforeAuthentication(t *testing.T) {
	s := boundedServer(t, &fakeStore{}, Options{SourceRateLimit: 0.001, SourceRateBurst: 3}, tokenAuth(t, "", "alice-token,alice,1"))
	for i := range 3 {
		if w := boundRequest(t, s, "192.0.2.1:1000", "/openapi.json", ""); w.Code != http.StatusUnauthorized {
			t.Fatalf("request %d of the burst: %d, want 401", i, w.Code)
		}
	}
	checkTooMany(t, boundRequest(t, s, "192.0.2.1:1001", "/openapi.json", ""), "past the burst, no credentials")
	checkTooMany(t, boundRequest(t, s, "192.0.2.1:1002", "/openapi.json", "alice-token"), "past the burst, a valid token")
	if w := boundRequest(t, s, "192.0.2.2:1000", "/openapi.json", "alice-token"); w.Code != http.StatusOK {
		t.Errorf("another address: %d, want 200", w.Code)
	}
	if w := boundRequest(t, s, "192.0.2.1:1003", "/healthz", ""); w.Code != http.StatusOK {
		t.Errorf("probe from the limited address: %d, want 200", w.Code)
	}
	for i := range 3 {
		boundRequest(t, s, fmt.Sprintf("[2001:db8:0:1::%x]:443", i+1), "/openapi.json", "")
	}
	checkTooMany(t, boundRequest(t, s, "[2001:db8:0:1:ffff::1]:443", "/openapi.json", ""), "another address of the same /64")
	if w := boundRequest(t, s, "[2001:db8:0:2::1]:443", "/openapi.json", "alice-token"); w.Code != http.StatusOK {
		t.Errorf("another /64: %d, want 200", w.Code)
	}
}

// Failed authentications per source are bounded apart: past the burst, the source's unknown
// tokens are 429 without a TokenReview, while tokens known without a new review (the token file,
// tokens the reviewer accepted) keep working from it, and other sources are reviewed as ever.
func TestSourceAuthFailuresStopTokenReviews(t *testing.T) {
	url, reviews := fakeTokenReview(t, map[string]string{"sa-token": "system:serviceaccount:shop:viewer", "new-token": "bob"})
	s := boundedServer(t, &fakeStore{}, Options{SourceAuthFailureLimit: 0.001, SourceAuthFailureBurst: 3}, tokenAuth(t, url, "alice-token,alice,1"))
	const attacker = "198.51.100.9:5000"
	if w := boundRequest(t, s, attacker, "/openapi.json", "sa-token"); w.Code != http.StatusOK {
		t.Fatalf("reviewed token: %d %s", w.Code, w.Body)
	}
	for i := range 3 {
		if w := boundRequest(t, s, attacker, "/openapi.json", fmt.Sprintf("guess-%d", i)); w.Code != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d, want 401", i, w.Code)
		}
	}
	if n := reviews.Load(); n != 4 {
		t.Fatalf("%d reviews, want 4", n)
	}
	for i := range 50 {
		checkTooMany(t, boundRequest(t, s, attacker, "/openapi.json", fmt.Sprintf("more-%d", i)), "a guess past the failure burst")
	}
	checkTooMany(t, boundRequest(t, s, attacker, "/openapi.json", "new-token"), "a valid token never seen, from the failing source")
	if n := reviews.Load(); n != 4 {
		t.Fatalf("%d reviews after the source failed too often, want still 4: its tokens reach the reviewer", n)
	}
	for _, tok := range []string{"sa-token", "alice-token"} {
		if w := boundRequest(t, s, attacker, "/openapi.json", tok); w.Code != http.StatusOK {
			t.Errorf("known token %s from the failing source: %d, want 200", tok, w.Code)
		}
	}
	if w := boundRequest(t, s, "198.51.100.10:5000", "/openapi.json", "new-token"); w.Code != http.StatusOK || reviews.Load() != 5 {
		t.Errorf("a new token from another source: %d after %d reviews, want 200 after 5", w.Code, reviews.Load())
	}
}

// sourceLimiter is a limiter of o on a clock the test moves.
func sourceLimiter(o Options) (*limiter, *time.Time) {
	now := time.Unix(1000, 0)
	l := newLimiter(o, nil)
	l.now = func() time.Time { return now }
	return l, &now
}

// sourceRequest takes one request of remote's source, as admit does, and tells how it was
// authenticated: authenticated and admitted by its subject's rate, or a 401.
func sourceRequest(l *limiter, remote string, authenticated bool) bool {
	src := sourceOf(remote)
	ok, _, _, _ := l.admitSource(src)
	if ok && authenticated {
		l.authenticated(src)
	} else if ok {
		l.authFailed(src)
	}
	return ok
}

// admitted takes one request of remote's source (one that is not answered yet).
func admitted(l *limiter, remote string) bool {
	ok, _, _, _ := l.admitSource(sourceOf(remote))
	return ok
}

// checkTracked fails when the sources' table holds more than its bound.
func checkTracked(t *testing.T, l *limiter, when string) {
	t.Helper()
	tb := &l.sources
	if n := len(tb.states); n > tb.max || n != tb.probation.Len()+tb.protected.Len() {
		t.Fatalf("%s: %d sources tracked (%d+%d in the segments), bound %d", when, n, tb.probation.Len(), tb.protected.Len(), tb.max)
	}
}

// The sources' table holds at most --max-tracked-sources states whatever the addresses flooding
// it. A state is forgotten only at rest (buckets full, no connection open), so a flood neither
// resets a busy client's budget nor launders the attacker's own; while no state is at rest, the
// new sources share one budget; a client that authenticated keeps its state through a flood
// without credentials.
func TestMaxTrackedSources(t *testing.T) {
	const legit, attacker = "192.0.2.1:1000", "203.0.113.9:1000"
	flooder := func(i int) string { return fmt.Sprintf("10.%d.%d.%d:4000", i>>16&0xff, i>>8&0xff, i&0xff) }

	t.Run("a flood at one instant", func(t *testing.T) {
		l, _ := sourceLimiter(Options{SourceRateLimit: 1, SourceRateBurst: 5, SourceAuthFailureLimit: 1, SourceAuthFailureBurst: 3, MaxTrackedSources: 50})
		for range 3 {
			if !sourceRequest(l, legit, true) {
				t.Fatal("the client's first requests refused")
			}
		}
		for range 5 {
			sourceRequest(l, attacker, false)
		}
		flood := 0
		for i := range 10_000 {
			if sourceRequest(l, flooder(i), false) {
				flood++
			}
			checkTracked(t, l, fmt.Sprintf("flood address %d", i))
		}
		// 48 places were free; the other 9,952 addresses shared one burst of 5.
		if flood != 48+5 {
			t.Errorf("%d requests of the flood admitted, want 53", flood)
		}
		if !admitted(l, legit) || !admitted(l, legit) || admitted(l, legit) {
			t.Error("the client's budget changed in the flood: want the 2 requests it had left, then refused")
		}
		if admitted(l, attacker) {
			t.Error("the attacker's request budget was given back by its own flood")
		}
		if _, failing, who := l.failureWait(sourceOf(attacker)); !failing || who != "203.0.113.9" {
			t.Errorf("the attacker's failed authentications: used up %v (%s), want still used up", failing, who)
		}
		if ok, _, _, who := l.admitSource(sourceOf("10.200.0.1:1")); ok || who != "the new sources beyond the 50 tracked" {
			t.Errorf("a new source in the flood: admitted %v, budget of %q; want the shared one, used up", ok, who)
		}
	})

	t.Run("a sustained flood", func(t *testing.T) {
		l, now := sourceLimiter(Options{SourceRateLimit: 20, SourceRateBurst: 40, SourceAuthFailureLimit: 1, SourceAuthFailureBurst: 3, MaxTrackedSources: 50})
		own := 0 // flood addresses judged by a state of their own
		for i := range 10_000 {
			*now = now.Add(time.Millisecond)
			if i%100 == 0 && !sourceRequest(l, legit, true) {
				t.Fatalf("the client (10 requests a second, bound 20) refused after %s of flood", time.Duration(i)*time.Millisecond)
			}
			sourceRequest(l, flooder(i), false)
			if l.sources.states[sourceOf(flooder(i))] != nil {
				own++
			}
			checkTracked(t, l, fmt.Sprintf("flood address %d", i))
		}
		// States at rest (a second after their 401) made room for new sources.
		if own <= 4*l.sources.max {
			t.Errorf("%d flood addresses had a state of their own, want the table's places reused", own)
		}
		*now = now.Add(2 * time.Second)
		if !admitted(l, "192.0.2.2:1") || l.sources.states[sourceOf("192.0.2.2:1")] == nil {
			t.Error("a new source after the flood has no state of its own")
		}
		checkTracked(t, l, "after the flood")
	})
}

// An IPv6 /64 is one source; a /56 holding 16 sources, or a /48 holding 64, gives each further
// /64 inside it the prefix's one budget; other prefixes keep theirs.
func TestSourceIPv6Prefixes(t *testing.T) {
	l, _ := sourceLimiter(Options{SourceRateLimit: 1, SourceRateBurst: 5, MaxTrackedSources: 1000})
	flood := func(addr func(i int) string, n, each int) (ok int) {
		for i := range n {
			for range each {
				if admitted(l, addr(i)) {
					ok++
				}
			}
		}
		return ok
	}
	if n := flood(func(i int) string { return fmt.Sprintf("[2001:db8:0:1:%x::%x]:443", i>>16, i&0xffff) }, 10_000, 1); n != 5 || len(l.sources.states) != 1 {
		t.Errorf("10,000 addresses of one /64: %d admitted, %d states; want 5, 1", n, len(l.sources.states))
	}
	// The 256 /64s of one /56, 10 requests each: 16 /64s, then the /56.
	if n := flood(func(i int) string { return fmt.Sprintf("[2001:db8:0:2%02x::1]:443", i) }, 256, 10); n != 16*5+5 {
		t.Errorf("a /56's /64s: %d admitted, want %d", n, 16*5+5)
	}
	if _, _, _, who := l.admitSource(sourceOf("[2001:db8:0:2ff::2]:443")); who != "2001:db8:0:200::/56" {
		t.Errorf("a refusal in the /56 names %q", who)
	}
	// 10,000 /64s across a /48, each in a /56 of its own first: 64 of them, then the /48.
	if n := flood(func(i int) string { return fmt.Sprintf("[2001:db8:1:%02x%02x::1]:443", i%256, i/256) }, 10_000, 10); n != 65*5 {
		t.Errorf("a /48's /64s: %d admitted, want %d", n, 65*5)
	}
	if _, _, _, who := l.admitSource(sourceOf("[2001:db8:1:ffff::9]:443")); who != "2001:db8:1::/48" {
		t.Errorf("a refusal in the /48 names %q", who)
	}
	if got, want := len(l.sources.states), 1+17+65; got != want {
		t.Errorf("%d states, want %d", got, want)
	}
	for _, other := range []string{"[2001:db8:2::1]:443", "192.0.2.1:443"} {
		if !admitted(l, other) {
			t.Errorf("%s refused for the others' floods", other)
		}
	}
	// A provider's /32 (2001:db9::/32), one /64 in each of 65,536 /48s: at most 1,025 states, so
	// about a hundred such allocations, not one, fill the default table of 100,000.
	wide, _ := sourceLimiter(Options{SourceRateLimit: 1, SourceRateBurst: 5, MaxTrackedSources: 100_000})
	for i := range 65_536 {
		admitted(wide, fmt.Sprintf("[2001:db9:%x::1]:443", i))
	}
	if n := len(wide.sources.states); n > 1025 {
		t.Errorf("a /32's /48s hold %d states, want at most 1,025", n)
	}
	if _, _, _, who := wide.admitSource(sourceOf("[2001:db9:ffff:ff::1]:443")); who != "2001:db9::/32" {
		t.Errorf("a refusal in the /32 names %q", who)
	}
}

// Over HTTP: a flood of addresses past the table gets 429s naming the shared budget, while a
// client known before it is served.
func TestMaxTrackedSourcesServesKnownClients(t *testing.T) {
	s := boundedServer(t, &fakeStore{}, Options{SourceRateLimit: 0.001, SourceRateBurst: 10, MaxTrackedSources: 20},
		tokenAuth(t, "", "alice-token,alice,1"))
	if w := boundRequest(t, s, "192.0.2.1:1000", "/openapi.json", "alice-token"); w.Code != http.StatusOK {
		t.Fatalf("the client before the flood: %d", w.Code)
	}
	var refused *httptest.ResponseRecorder
	for i := range 500 {
		if w := boundRequest(t, s, fmt.Sprintf("198.51.%d.%d:5000", i/256, i%256), "/openapi.json", ""); w.Code == http.StatusTooManyRequests {
			refused = w
		}
		if i%100 == 0 {
			if w := boundRequest(t, s, "192.0.2.1:1001", "/openapi.json", "alice-token"); w.Code != http.StatusOK {
				t.Fatalf("the client during the flood: %d %s", w.Code, w.Body)
			}
		}
	}
	if refused == nil {
		t.Fatal("no address of the flood refused")
	}
	checkTooMany(t, refused, "an address past the table")
	if !strings.Contains(refused.Body.String(), "the new sources beyond the 20 tracked") {
		t.Errorf("the refusal does not name the shared budget: %s", refused.Body)
	}
	checkTracked(t, s.limits, "after the flood")
}

// gatedStore holds the searches block selects until the gate opens, saying when one arrives; it
// reports the snapshots released.
type gatedStore struct {
	*fakeStore
	block    func(q *query.Query) bool
	entered  chan struct{}
	gate     chan struct{}
	released chan string
}

func newGatedStore(block func(q *query.Query) bool) *gatedStore {
	return &gatedStore{fakeStore: &fakeStore{objects: fleetObjects()}, block: block,
		entered: make(chan struct{}, 100), gate: make(chan struct{}), released: make(chan string, 100)}
}

func (g *gatedStore) Search(ctx context.Context, q *query.Query) (*store.Result, error) {
	if g.block(q) {
		g.entered <- struct{}{}
		select {
		case <-g.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.fakeStore.Search(ctx, q)
}

func (g *gatedStore) Release(_ context.Context, token string) { g.released <- token }

// get sends GET path to srv with a bearer token, answering the status and body.
func get(t *testing.T, srv, path, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(body)
}

// The requests served at once are bounded (watches aside): past the bound, 429; the probes pass.
func TestMaxRequestsInFlight(t *testing.T) {
	st := newGatedStore(func(q *query.Query) bool { return q.Limit == 7 })
	s := boundedServer(t, st, Options{MaxRequestsInFlight: 2}, anonymous(t))
	srv := httptest.NewServer(s.engine)
	t.Cleanup(srv.Close)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if code, body := get(t, srv.URL, "/api/v1/pods?limit=7", ""); code != http.StatusOK {
				t.Errorf("request in flight: %d %s", code, body)
			}
		})
	}
	<-st.entered
	<-st.entered
	code, body := get(t, srv.URL, "/api/v1/pods?limit=5", "")
	if code != http.StatusTooManyRequests || !strings.Contains(body, "2 requests at once") {
		t.Errorf("a third request while two are in flight: %d %s, want 429", code, body)
	}
	if n := testutil.ToFloat64(s.limits.refused.WithLabelValues(boundInFlight)); n != 1 {
		t.Errorf("kubesearch_queryapi_refused_total{bound=%q} = %v, want 1", boundInFlight, n)
	}
	if code, _ := get(t, srv.URL, "/healthz", ""); code != http.StatusOK {
		t.Errorf("probe: %d", code)
	}
	// A watch parameter on a request that is no watch takes no request out of the bound.
	for _, path := range []string{"/v1alpha1/fleet?watch=1", "/api/v1/namespaces/shop?watch=1"} {
		if code, body := get(t, srv.URL, path, ""); code != http.StatusTooManyRequests {
			t.Errorf("%s while two are in flight: %d %s, want 429", path, code, body)
		}
	}
	close(st.gate)
	wg.Wait()
	if code, body := get(t, srv.URL, "/api/v1/pods?limit=5", ""); code != http.StatusOK {
		t.Errorf("after the two: %d %s", code, body)
	}
}

// A subject's LISTs without a limit (each streams every page) are bounded: past the bound, 429
// for it; lists with a limit and other subjects' lists are served.
func TestMaxListsPerSubject(t *testing.T) {
	st := newGatedStore(func(q *query.Query) bool { return q.Limit == fullListPage && q.Continue == "" })
	s := boundedServer(t, st, Options{MaxListsPerSubject: 2}, tokenAuth(t, "", "alice-token,alice,1", "bob-token,bob,2"))
	srv := httptest.NewServer(s.engine)
	t.Cleanup(srv.Close)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if code, body := get(t, srv.URL, "/api/v1/pods", "alice-token"); code != http.StatusOK || !json.Valid([]byte(body)) {
				t.Errorf("full list: %d, %d bytes", code, len(body))
			}
		})
	}
	<-st.entered
	<-st.entered
	code, body := get(t, srv.URL, "/api/v1/pods", "alice-token")
	if code != http.StatusTooManyRequests || !strings.Contains(body, "at most 2") {
		t.Errorf("alice's third full list: %d %s, want 429", code, body)
	}
	if code, body := get(t, srv.URL, "/api/v1/pods?limit=5", "alice-token"); code != http.StatusOK {
		t.Errorf("alice's paged list: %d %s", code, body)
	}
	wg.Go(func() {
		if code, body := get(t, srv.URL, "/api/v1/pods", "bob-token"); code != http.StatusOK {
			t.Errorf("bob's full list: %d %.200s", code, body)
		}
	})
	<-st.entered
	close(st.gate)
	wg.Wait()
	if code, _ := get(t, srv.URL, "/api/v1/pods", "alice-token"); code != http.StatusOK {
		t.Errorf("alice's full list after hers ended: %d", code)
	}
}

// smallBuffers accepts connections with a small send buffer, so that a client that does not
// read blocks the server's writes after a few KiB, not after the kernel's megabytes.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// stalledClient sends a GET on a raw connection with a tiny receive buffer and never reads.
func stalledClient(t *testing.T, addr, path string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.(*net.TCPConn).SetReadBuffer(4096)
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path); err != nil {
		t.Fatal(err)
	}
	return c
}

// A full LIST to a client that never reads lets go of its page and snapshot once a write has
// waited --write-timeout: the list ends, releases its snapshot and no longer counts against its
// subject. Without the deadline it would wait for the client forever.
func TestWriteTimeoutReleasesAStalledList(t *testing.T) {
	st := newGatedStore(func(*query.Query) bool { return false })
	s := boundedServer(t, st, Options{WriteTimeout: 300 * time.Millisecond, MaxListsPerSubject: 1}, anonymous(t))
	srv := httptest.NewUnstartedServer(s.engine)
	srv.Listener = smallBuffers{srv.Listener}
	srv.Start()
	t.Cleanup(srv.Close)

	stalledClient(t, srv.Listener.Addr().String(), "/api/v1/pods")
	select {
	case <-st.released:
	case <-time.After(30 * time.Second):
		t.Fatal("a full list to a client that never reads still holds its snapshot after 30s")
	}
	// Its place is given back as the handler returns: the subject's next full list is served (to
	// a client that reads).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		code, body := get(t, srv.URL, "/api/v1/pods", "")
		if code == http.StatusOK && json.Valid([]byte(body)) {
			break
		}
		if code != http.StatusTooManyRequests || time.Now().After(deadline) {
			t.Fatalf("the next full list: %d, %d bytes", code, len(body))
		}
	}
}

// The deadline is per write: an answer idle far longer than --write-timeout between two writes (a
// quiet watch) is not cut, over HTTP/1.1 or HTTP/2 (where a deadline left set would reset the
// stream when it passes, written to or not).
func TestWriteTimeoutIsPerWrite(t *testing.T) {
	s := &Server{opts: Options{WriteTimeout: 100 * time.Millisecond}, limits: newLimiter(Options{}, nil)}
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.Use(s.admit)
	e.GET("/quiet", func(c *gin.Context) {
		c.Status(http.StatusOK)
		for i := range 3 {
			fmt.Fprintf(c.Writer, "event %d\n", i)
			c.Writer.Flush()
			time.Sleep(300 * time.Millisecond) // quiet for 3 write timeouts
		}
	})
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("http2=%v", h2), func(t *testing.T) {
			srv := httptest.NewUnstartedServer(e)
			srv.EnableHTTP2 = h2
			srv.StartTLS()
			t.Cleanup(srv.Close)
			resp, err := srv.Client().Get(srv.URL + "/quiet")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.ProtoMajor != map[bool]int{false: 1, true: 2}[h2] {
				t.Fatalf("served over %s", resp.Proto)
			}
			var lines []string
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				lines = append(lines, sc.Text())
			}
			if err := sc.Err(); err != nil || len(lines) != 3 {
				t.Fatalf("read %q, %v; want 3 events", lines, err)
			}
		})
	}
}

// The connections a source holds open are bounded: past the bound a new one is closed before a
// byte is read; once one closes, another is accepted.
func TestMaxConnectionsPerSource(t *testing.T) {
	l := newLimiter(Options{MaxConnectionsPerSource: 2}, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	srv.Listener.Close()
	srv.Listener = l.limitConnections(ln)
	srv.Start()
	t.Cleanup(srv.Close)
	addr := ln.Addr().String()

	// ask sends a request on c and reads the answer: false when the server closed c instead.
	ask := func(c net.Conn) bool {
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return false
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return err == nil && resp.StatusCode == http.StatusOK
	}
	var open []net.Conn
	for i := range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if !ask(c) {
			t.Fatalf("connection %d within the bound refused", i)
		}
		open = append(open, c)
	}
	third, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	if ask(third) {
		t.Fatal("a third connection from the source was served")
	}
	if n := testutil.ToFloat64(l.refused.WithLabelValues(boundSourceConnections)); n != 1 {
		t.Errorf("kubesearch_queryapi_refused_total{bound=%q} = %v, want 1", boundSourceConnections, n)
	}
	open[0].Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		ok := ask(c)
		c.Close()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a closed connection's place is not given back")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestValidateBounds(t *testing.T) {
	o := Options{OpenSearchAddresses: []string{"http://127.0.0.1:9200"}, RateLimit: 5, MaxListsPerSubject: -1,
		MaxRequestsInFlight: -2, WriteTimeout: 10 * time.Millisecond, SourceRateLimit: 10, SourceAuthFailureLimit: -1,
		MaxConnectionsPerSource: -3, MaxTrackedSources: -4}
	err := o.Validate()
	if err == nil {
		t.Fatal("bad bounds passed")
	}
	for _, flag := range []string{"--rate-burst", "--max-lists-per-subject", "--max-requests-inflight", "--write-timeout",
		"--source-rate-burst", "--source-auth-failure-limit", "--max-connections-per-source", "--max-tracked-sources"} {
		if !strings.Contains(err.Error(), flag) {
			t.Errorf("no error names %s: %v", flag, err)
		}
	}
	good := Options{OpenSearchAddresses: []string{"http://127.0.0.1:9200"}, RateLimit: DefaultRateLimit, RateBurst: DefaultRateBurst,
		MaxWatches: DefaultMaxWatches, MaxListsPerSubject: DefaultMaxListsPerSubject, MaxRequestsInFlight: DefaultMaxRequestsInFlight,
		WriteTimeout: DefaultWriteTimeout, SourceRateLimit: DefaultSourceRateLimit, SourceRateBurst: DefaultSourceRateBurst,
		SourceAuthFailureLimit: DefaultSourceAuthFailureLimit, SourceAuthFailureBurst: DefaultSourceAuthFailureBurst,
		MaxConnectionsPerSource: DefaultMaxConnectionsPerSource, MaxTrackedSources: DefaultMaxTrackedSources}
	if err := good.Validate(); err != nil {
		t.Errorf("the defaults: %v", err)
	}
}
