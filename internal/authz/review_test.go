package authz

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubesearch/kubesearch/internal/auth"
	"github.com/kubesearch/kubesearch/internal/query"
)

// fakeMember answers reviews as RBAC would for a set of bindings: (user, verb, group/resource,
// namespace) allowed, "" for a ClusterRoleBinding. It records every review it is asked.
type fakeMember struct {
	mu      sync.Mutex
	allow   map[[4]string]bool
	fail    error
	asked   []authorizationv1.SubjectAccessReviewSpec
	groupOK string // a group allowed everything
}

func (f *fakeMember) Create(_ context.Context, r *authorizationv1.SubjectAccessReview, _ metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, r.Spec)
	if f.fail != nil {
		return nil, f.fail
	}
	a := r.Spec.ResourceAttributes
	res := a.Group + "/" + a.Resource
	ok := f.allow[[4]string{r.Spec.User, a.Verb, res, ""}] || (a.Namespace != "" && f.allow[[4]string{r.Spec.User, a.Verb, res, a.Namespace}]) ||
		(f.groupOK != "" && slices.Contains(r.Spec.Groups, f.groupOK))
	out := r.DeepCopy()
	out.Status.Allowed = ok
	return out, nil
}

func (f *fakeMember) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.asked)
}

type fakeInventory struct {
	resources  map[string][]CachedResource
	namespaces map[string][]string
}

func (i fakeInventory) Clusters() []string {
	var cs []string
	for c := range i.resources {
		cs = append(cs, c)
	}
	slices.Sort(cs)
	return cs
}
func (i fakeInventory) Resources(c string) []CachedResource { return i.resources[c] }
func (i fakeInventory) Namespaces(_ context.Context, c string) ([]string, error) {
	return i.namespaces[c], nil
}

var (
	configmaps  = CachedResource{Resource: "configmaps", Namespaced: true}
	deployments = CachedResource{Group: "apps", Resource: "deployments", Namespaced: true}
	nodes       = CachedResource{Resource: "nodes"}
	testInv     = fakeInventory{
		resources: map[string][]CachedResource{
			"member1": {configmaps, deployments, nodes},
			"member2": {configmaps, deployments, nodes},
		},
		namespaces: map[string][]string{"member1": {"shop", "web", "kube-system"}, "member2": {"shop", "web"}},
	}
	reader = auth.User{Name: "system:serviceaccount:shop:reader", UID: "u-1", Groups: []string{"system:serviceaccounts", "system:authenticated"}}
)

func TestReviewNamespaceGrant(t *testing.T) {
	m1 := &fakeMember{allow: map[[4]string]bool{
		{reader.Name, VerbList, "/configmaps", "shop"}:  true,
		{reader.Name, VerbList, "apps/deployments", ""}: true, // a ClusterRoleBinding
	}}
	m2 := &fakeMember{allow: map[[4]string]bool{}}
	r := newReviewer(ReviewOptions{}, map[string]accessReviewer{"member1": m1, "member2": m2})
	v := r.View(t.Context(), reader, testInv)

	got := v.Scope(VerbList, nil, nil, nil)
	want := &query.Scope{Grants: []query.Grant{
		{Clusters: []string{"member1"}, Namespaces: []string{"shop"}, Resources: []query.Resource{{Resource: "configmaps"}}},
		{Clusters: []string{"member1"}, Resources: []query.Resource{{Group: "apps", Resource: "deployments"}}},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("scope:\n got %+v\nwant %+v", got, want)
	}
	for _, c := range []struct {
		verb, cluster, ns, group, resource string
		want                               bool
	}{
		{VerbList, "member1", "shop", "", "configmaps", true},
		{VerbList, "member1", "web", "", "configmaps", false},
		{VerbList, "member1", Any, "", "configmaps", true},
		{VerbList, Any, Any, "", "configmaps", true},
		{VerbList, "member2", Any, "", "configmaps", false},
		{VerbList, "member2", Any, Any, Any, false},
		{VerbList, "member1", "anything", "apps", "deployments", true},
		{VerbGet, "member1", "shop", "", "configmaps", false}, // the Role grants list only
		{"delete", "member1", "shop", "", "configmaps", false},
		{VerbList, "member1", "", "", "nodes", false},
		{VerbList, "no-such-cluster", Any, Any, Any, false},
		// Asked whether or not it is cached: the answer does not depend on what exists.
		{VerbList, "member1", "shop", "", "secrets", false},
	} {
		if got := v.Allowed(c.verb, c.cluster, c.ns, c.group, c.resource); got != c.want {
			t.Errorf("Allowed(%s, %s, %s, %s, %s) = %v, want %v", c.verb, c.cluster, c.ns, c.group, c.resource, got, c.want)
		}
	}
	// The member is asked with the user's name, UID and groups.
	spec := m1.asked[0]
	if spec.User != reader.Name || spec.UID != reader.UID || !slices.Equal(spec.Groups, reader.Groups) {
		t.Errorf("review spec %+v does not carry the user", spec)
	}
}

func TestReviewAsksOnlyWhatTheQueryNames(t *testing.T) {
	m1 := &fakeMember{allow: map[[4]string]bool{{reader.Name, VerbList, "/configmaps", "web"}: true}}
	r := newReviewer(ReviewOptions{}, map[string]accessReviewer{"member1": m1, "member2": &fakeMember{}})
	v := r.View(t.Context(), reader, testInv)
	got := v.Scope(VerbList, []string{"member1"}, []string{"web"}, []query.Resource{{Resource: "configmaps", AnyGroup: true}})
	want := &query.Scope{Grants: []query.Grant{{Clusters: []string{"member1"}, Namespaces: []string{"web"}, Resources: []query.Resource{{Resource: "configmaps"}}}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("scope %+v, want %+v", got, want)
	}
	// One review for every namespace, one for the namespace asked.
	if n := m1.calls(); n != 2 {
		t.Errorf("%d reviews, want 2: %+v", n, m1.asked)
	}
}

func TestReviewCachesAndExpires(t *testing.T) {
	m1 := &fakeMember{groupOK: "sre"}
	r := newReviewer(ReviewOptions{AllowedTTL: time.Minute, DeniedTTL: 10 * time.Second}, map[string]accessReviewer{"member1": m1})
	now := time.Unix(1_000_000, 0)
	r.now = func() time.Time { return now }
	inv := fakeInventory{resources: map[string][]CachedResource{"member1": {configmaps}}, namespaces: map[string][]string{"member1": {"shop"}}}
	sre := auth.User{Name: "ann", Groups: []string{"sre"}}
	if !r.View(t.Context(), sre, inv).Allowed(VerbList, "member1", Any, "", "configmaps") {
		t.Fatal("the group's ClusterRoleBinding is not honoured")
	}
	if !r.View(t.Context(), sre, inv).Allowed(VerbList, "member1", Any, "", "configmaps") || m1.calls() != 1 {
		t.Errorf("a second request asked the member again: %d reviews", m1.calls())
	}
	// Another user with the same name but other groups is another question.
	if r.View(t.Context(), auth.User{Name: "ann"}, inv).Allowed(VerbList, "member1", Any, "", "configmaps") {
		t.Error("ann without the group is allowed from the cache of ann with it")
	}
	// The binding is removed: the allow lasts its TTL, then the member's deny applies.
	m1.mu.Lock()
	m1.groupOK = ""
	m1.mu.Unlock()
	now = now.Add(59 * time.Second)
	if !r.View(t.Context(), sre, inv).Allowed(VerbList, "member1", Any, "", "configmaps") {
		t.Error("the allow expired before its TTL")
	}
	now = now.Add(2 * time.Second)
	if r.View(t.Context(), sre, inv).Allowed(VerbList, "member1", Any, "", "configmaps") {
		t.Error("a revoked binding still allows after the TTL")
	}
}

func TestReviewFailsClosed(t *testing.T) {
	m1 := &fakeMember{fail: errors.New("connection refused")}
	m2 := &fakeMember{groupOK: "sre"}
	r := newReviewer(ReviewOptions{}, map[string]accessReviewer{"member1": m1, "member2": m2})
	v := r.View(t.Context(), auth.User{Name: "ann", Groups: []string{"sre"}}, testInv)
	got := v.Scope(VerbWatch, nil, nil, nil)
	want := &query.Scope{Grants: []query.Grant{{Clusters: []string{"member2"}, Resources: []query.Resource{
		{Resource: "configmaps"}, {Resource: "nodes"}, {Group: "apps", Resource: "deployments"}}}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("with member1's API away: %+v, want member2's only %+v", got, want)
	}
	// A verb the facade never serves grants nothing, and asks nobody.
	before := m2.calls()
	if s := v.Scope("delete", nil, nil, nil); len(s.Grants) != 0 || m2.calls() != before {
		t.Errorf("delete: %+v after %d reviews", s, m2.calls()-before)
	}
}

func TestMergeGrantsIsDeterministic(t *testing.T) {
	g := func(c, r string, ns ...string) query.Grant {
		return query.Grant{Clusters: []string{c}, Namespaces: ns, Resources: []query.Resource{{Resource: r}}}
	}
	a := mergeGrants([]query.Grant{g("m2", "pods", "shop"), g("m1", "pods", "shop"), g("m1", "configmaps", "shop"), g("m2", "configmaps", "shop"), g("m3", "pods")})
	b := mergeGrants([]query.Grant{g("m3", "pods"), g("m1", "configmaps", "shop"), g("m2", "configmaps", "shop"), g("m1", "pods", "shop"), g("m2", "pods", "shop")})
	want := []query.Grant{
		{Clusters: []string{"m1", "m2"}, Namespaces: []string{"shop"}, Resources: []query.Resource{{Resource: "configmaps"}, {Resource: "pods"}}},
		g("m3", "pods"),
	}
	if !reflect.DeepEqual(a, want) || !reflect.DeepEqual(b, want) {
		t.Errorf("merged:\n%+v\n%+v\nwant %+v", a, b, want)
	}
}

// blockingMember answers after release is closed, allowing everything.
type blockingMember struct {
	release chan struct{}
	calls   atomic.Int32
}

func (b *blockingMember) Create(ctx context.Context, r *authorizationv1.SubjectAccessReview, _ metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error) {
	b.calls.Add(1)
	select {
	case <-b.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	out := r.DeepCopy()
	out.Status.Allowed = true
	return out, nil
}

// The first request asking a review goes away while another waits for the same answer: the
// other still gets the member's answer, and it is cached.
func TestReviewOutlivesTheRequestThatAskedIt(t *testing.T) {
	m := &blockingMember{release: make(chan struct{})}
	r := newReviewer(ReviewOptions{}, map[string]accessReviewer{"member1": m})
	inv := fakeInventory{resources: map[string][]CachedResource{"member1": {configmaps}}}
	gone, cancel := context.WithCancel(t.Context())
	first := make(chan bool)
	go func() { first <- r.View(gone, reader, inv).Allowed(VerbList, "member1", "shop", "", "configmaps") }()
	for m.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	second := make(chan bool)
	go func() {
		second <- r.View(t.Context(), reader, inv).Allowed(VerbList, "member1", "shop", "", "configmaps")
	}()
	time.Sleep(20 * time.Millisecond) // the second joins the first's review
	cancel()
	close(m.release)
	<-first
	if !<-second {
		t.Error("the second request got a deny because the first went away")
	}
	if n := m.calls.Load(); n != 1 {
		t.Errorf("%d reviews, want 1 shared", n)
	}
}

// A request naming more than MaxReviewsPerRequest namespaces asks no more than that, and is
// refused rather than answered with the namespaces it got to.
func TestReviewBudgetPerRequest(t *testing.T) {
	m := &fakeMember{}
	r := newReviewer(ReviewOptions{}, map[string]accessReviewer{"member1": m})
	inv := fakeInventory{resources: map[string][]CachedResource{"member1": {configmaps}}}
	namespaces := make([]string, MaxReviewsPerRequest+500)
	for i := range namespaces {
		namespaces[i] = fmt.Sprintf("ns-%d", i)
	}
	v := r.View(t.Context(), reader, inv)
	if s := v.Scope(VerbList, nil, namespaces, nil); len(s.Grants) != 0 {
		t.Errorf("scope %+v past the budget, want none", s)
	}
	if n := m.calls(); n != MaxReviewsPerRequest {
		t.Errorf("%d reviews for %d namespaces, want the budget, %d", n, len(namespaces), MaxReviewsPerRequest)
	}
	var incomplete *IncompleteError
	if err := v.Err(); !errors.As(err, &incomplete) || incomplete.RetryAfter <= 0 {
		t.Errorf("Err() = %v, want an IncompleteError with a RetryAfter", err)
	}
}

// hiddenFirst is a fleet where a member the reader cannot see sorts first and holds as many
// namespaces as a request may ask reviews, and the reader's one grant (configmaps in shop) is in
// the member after it.
func hiddenFirst() (map[string]accessReviewer, fakeInventory, *fakeMember) {
	namespaces := make([]string, MaxReviewsPerRequest)
	for i := range namespaces {
		namespaces[i] = fmt.Sprintf("ns-%05d", i)
	}
	visible := &fakeMember{allow: map[[4]string]bool{{reader.Name, VerbList, "/configmaps", "shop"}: true}}
	return map[string]accessReviewer{"a-hidden": &fakeMember{}, "b-visible": visible},
		fakeInventory{
			resources:  map[string][]CachedResource{"a-hidden": {configmaps}, "b-visible": {configmaps}},
			namespaces: map[string][]string{"a-hidden": namespaces, "b-visible": {"shop"}},
		}, visible
}

// A member the subject cannot see, with many namespaces and sorting first, does not spend the
// request's reviews before the member where the subject has its grant is asked.
func TestReviewBudgetIsSharedByTheClusters(t *testing.T) {
	members, inv, visible := hiddenFirst()
	r := newReviewer(ReviewOptions{}, members)
	v := r.View(t.Context(), reader, inv)
	if !v.Allowed(VerbList, Any, Any, "", "configmaps") {
		t.Errorf("the reader's RoleBinding in b-visible is not seen behind a-hidden's namespaces (Err: %v)", v.Err())
	}
	if visible.calls() == 0 {
		t.Error("b-visible was never asked")
	}
}

// A scope that needs more reviews than a request may ask is an error, never the grants of the
// reviews that were asked (which would depend on the members the subject cannot see); a retry
// asks only what is not cached, and gets the same grants as in a fleet without the hidden member.
func TestReviewIncompleteScopeIsAnError(t *testing.T) {
	members, inv, _ := hiddenFirst()
	r := newReviewer(ReviewOptions{}, members)
	want := &query.Scope{Grants: []query.Grant{{Clusters: []string{"b-visible"}, Namespaces: []string{"shop"}, Resources: []query.Resource{{Resource: "configmaps"}}}}}
	v := r.View(t.Context(), reader, inv)
	got := v.Scope(VerbList, nil, nil, nil)
	var incomplete *IncompleteError
	if err := v.Err(); !errors.As(err, &incomplete) {
		t.Fatalf("a scope past the budget: %+v and Err() = %v, want an IncompleteError", got, err)
	}
	if len(got.Grants) != 0 {
		t.Errorf("an incomplete scope grants %+v, want nothing", got)
	}
	retry := r.View(t.Context(), reader, inv)
	if got := retry.Scope(VerbList, nil, nil, nil); retry.Err() != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("the retry: %+v (Err: %v), want %+v", got, retry.Err(), want)
	}
}

// One subject asks at most its burst of reviews, then its questions are incomplete; another
// subject's reviews are its own.
func TestReviewRatePerSubject(t *testing.T) {
	namespaces := make([]string, 20)
	for i := range namespaces {
		namespaces[i] = fmt.Sprintf("ns-%d", i)
	}
	bob := auth.User{Name: "bob"}
	m := &fakeMember{allow: map[[4]string]bool{{bob.Name, VerbList, "/configmaps", "shop"}: true}}
	r := newReviewer(ReviewOptions{RatePerSubject: 0.001, BurstPerSubject: 5}, map[string]accessReviewer{"member1": m})
	inv := fakeInventory{resources: map[string][]CachedResource{"member1": {configmaps}}, namespaces: map[string][]string{"member1": append(namespaces, "shop")}}

	v := r.View(t.Context(), reader, inv)
	v.Scope(VerbList, nil, nil, nil)
	var incomplete *IncompleteError
	if err := v.Err(); !errors.As(err, &incomplete) {
		t.Errorf("22 reviews with a burst of 5: Err() = %v, want an IncompleteError", err)
	}
	if n := m.calls(); n != 5 {
		t.Errorf("%d reviews asked for the reader, want its burst, 5", n)
	}
	b := r.View(t.Context(), bob, inv)
	got := b.Scope(VerbList, []string{"member1"}, []string{"shop"}, nil)
	want := &query.Scope{Grants: []query.Grant{{Clusters: []string{"member1"}, Namespaces: []string{"shop"}, Resources: []query.Resource{{Resource: "configmaps"}}}}}
	if b.Err() != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("bob after the reader's flood: %+v (Err: %v), want %+v", got, b.Err(), want)
	}
}

// countingMember holds every review until release is closed, counting those in flight.
type countingMember struct {
	release           chan struct{}
	inFlight, maxSeen atomic.Int32
}

func (c *countingMember) Create(ctx context.Context, r *authorizationv1.SubjectAccessReview, _ metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error) {
	n := c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	for seen := c.maxSeen.Load(); n > seen && !c.maxSeen.CompareAndSwap(seen, n); seen = c.maxSeen.Load() {
	}
	select {
	case <-c.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return r.DeepCopy(), nil
}

// A subject's requests together have at most Concurrency reviews in flight: the members' clients
// are shared, and one subject's queue there must not make the others' reviews time out.
func TestReviewInFlightPerSubject(t *testing.T) {
	m := &countingMember{release: make(chan struct{})}
	r := newReviewer(ReviewOptions{Concurrency: 2}, map[string]accessReviewer{"member1": m})
	r.wait = time.Minute // the requests wait for slots, they are not refused
	namespaces := make([]string, 10)
	for i := range namespaces {
		namespaces[i] = fmt.Sprintf("ns-%d", i)
	}
	inv := fakeInventory{resources: map[string][]CachedResource{"member1": {configmaps}}, namespaces: map[string][]string{"member1": namespaces}}
	var wg sync.WaitGroup
	for i := range 3 {
		// One subject (a user name) with three UIDs: three requests asking different reviews.
		ann := auth.User{Name: "ann", UID: fmt.Sprint(i)}
		wg.Go(func() { r.View(t.Context(), ann, inv).Scope(VerbList, nil, nil, nil) })
	}
	for m.inFlight.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // the other requests' reviews would start meanwhile
	close(m.release)
	wg.Wait()
	if n := m.maxSeen.Load(); n != 2 {
		t.Errorf("%d reviews of one subject in flight at once, want at most 2", n)
	}
}

// A subject asking for many answers evicts its own, never those of a subject asking few.
func TestReviewEvictionSparesOtherSubjects(t *testing.T) {
	namespaces := make([]string, 300)
	for i := range namespaces {
		namespaces[i] = fmt.Sprintf("ns-%d", i)
	}
	m := &fakeMember{}
	r := newReviewer(ReviewOptions{}, map[string]accessReviewer{"member1": m})
	r.maxAnswers, r.maxPerSubject = 100, 60
	inv := fakeInventory{resources: map[string][]CachedResource{"member1": {configmaps}}, namespaces: map[string][]string{"member1": namespaces}}
	bob := auth.User{Name: "bob"}
	ask := func(u auth.User, ns string) {
		r.View(t.Context(), u, inv).Allowed(VerbList, "member1", ns, "", "configmaps")
	}
	for _, ns := range namespaces[:20] {
		ask(bob, ns)
	}
	before := m.calls()
	// Other subjects, each asking more than a subject may keep: the cache fills up many times.
	for i := range 5 {
		flood := auth.User{Name: fmt.Sprintf("flood-%d", i)}
		for _, ns := range namespaces {
			ask(flood, ns)
		}
	}
	flooded := m.calls()
	for _, ns := range namespaces[:20] {
		ask(bob, ns)
	}
	if n := m.calls() - flooded; n != 0 {
		t.Errorf("bob's 20 cached answers asked again %d times after other subjects' floods", n)
	}
	if flooded-before != 5*len(namespaces) {
		t.Errorf("the floods asked %d reviews, want %d", flooded-before, 5*len(namespaces))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	total := 0
	for name, s := range r.subjects {
		total += len(s.answers)
		if len(s.answers) > r.maxPerSubject {
			t.Errorf("%s keeps %d answers, more than %d", name, len(s.answers), r.maxPerSubject)
		}
	}
	if total != r.answers || total > r.maxAnswers {
		t.Errorf("%d answers cached (counted %d), want at most %d", total, r.answers, r.maxAnswers)
	}
}

func TestReviewOptionsCheckNamesTheFlags(t *testing.T) {
	err := ReviewOptions{RatePerSubject: -1, BurstPerSubject: -1, Concurrency: -1}.Check()
	for _, flag := range []string{"--subject-access-review-rate-per-subject", "--subject-access-review-burst-per-subject", "--subject-access-review-max-in-flight-per-subject"} {
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("Check() = %v, want it to name %s", err, flag)
		}
	}
	if err := (ReviewOptions{RatePerSubject: 10}).Check(); err == nil || !strings.Contains(err.Error(), "--subject-access-review-burst-per-subject") {
		t.Errorf("a rate with a burst of 0: Check() = %v, want an error naming the burst", err)
	}
	if err := (ReviewOptions{RatePerSubject: DefaultRatePerSubject, BurstPerSubject: DefaultBurstPerSubject, Concurrency: DefaultReviewConcurrency}).Check(); err != nil {
		t.Errorf("the defaults: %v", err)
	}
}

// Users whose name, UID and groups join to the same text are different users.
func TestReviewKeysDoNotCollide(t *testing.T) {
	r := newReviewer(ReviewOptions{}, nil)
	a := r.View(t.Context(), auth.User{Name: "a", Groups: []string{"b:c"}}, fakeInventory{})
	b := r.View(t.Context(), auth.User{Name: "a", Groups: []string{"b", "c"}}, fakeInventory{})
	if a.key == b.key {
		t.Errorf("two users share the key %q", a.key)
	}
}
