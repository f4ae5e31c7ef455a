package authz

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"

	"github.com/kubesearch/kubesearch/internal/auth"
	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/registry"
)

// Review defaults: kube-apiserver's webhook authorizer caches an allow for 5 minutes and a deny
// for 30 seconds; a grant revoked in a member stops showing here within AllowedTTL.
const (
	DefaultAllowedTTL = time.Minute
	DefaultDeniedTTL  = 30 * time.Second
	// DefaultReviewConcurrency bounds the reviews one subject has in flight, all its requests
	// together: each member has one client (200 per second), and a subject's reviews queued
	// there must not make other subjects' time out (a timeout is a deny, kept for DeniedTTL).
	DefaultReviewConcurrency = 16
	// DefaultRatePerSubject and DefaultBurstPerSubject bound the reviews one subject asks of the
	// members (a token bucket; cached answers are free): half of one member's client rate, so no
	// subject alone fills it, and a burst that covers a first request over a fleet of tens of
	// members and all their resources.
	DefaultRatePerSubject  = 100
	DefaultBurstPerSubject = 1000
	reviewTimeout          = 5 * time.Second
	// reviewWait bounds how long one question of a request waits for its subject's review slots
	// and tokens; past it the question is incomplete (IncompleteError).
	reviewWait = 5 * time.Second
	// maxAnswers bounds the cached answers of every subject together, maxAnswersPerSubject
	// those of one (remember says which go when full).
	maxAnswers           = 200_000
	maxAnswersPerSubject = 50_000
	// MaxReviewsPerRequest bounds what one request may ask of the members (cached answers are
	// free): past it the request's questions are incomplete (IncompleteError), so a request naming a
	// thousand namespaces or resources cannot turn into a flood of reviews.
	MaxReviewsPerRequest = 10_000
)

// ReviewOptions configure the SubjectAccessReview mode: each member's own RBAC (or whatever
// authorizer it runs) decides what a user sees of that member.
type ReviewOptions struct {
	// Kubeconfig (--subject-access-review-kubeconfig) makes every context a member, named after it,
	// as the collector's --kubeconfig; ClustersFile (--subject-access-review-clusters) lists them as
	// the collector's --clusters. The credentials need only "create subjectaccessreviews".
	Kubeconfig, ClustersFile string
	// AllowedTTL and DeniedTTL are how long an answer is kept.
	AllowedTTL, DeniedTTL time.Duration
	// Concurrency bounds the reviews one subject (user name) has in flight, all its requests
	// together (--subject-access-review-max-in-flight-per-subject; 0: DefaultReviewConcurrency).
	Concurrency int
	// RatePerSubject and BurstPerSubject bound the reviews one subject asks per second, a token
	// bucket (--subject-access-review-rate-per-subject, --subject-access-review-burst-per-subject;
	// rate 0: no bound). A question waits reviewWait at most for its subject's tokens and slots.
	RatePerSubject  float64
	BurstPerSubject int
	// Observe, when set, is told of every review asked of a member: its cluster and result
	// (ReviewAllowed, ReviewDenied, ReviewFailed), for metrics.
	Observe func(cluster, result string)
	Logger  *slog.Logger
}

// Review results, as Observe is told them.
const (
	ReviewAllowed = "allowed"
	ReviewDenied  = "denied"
	ReviewFailed  = "failed"
)

// Enabled says whether the mode is asked for.
func (o ReviewOptions) Enabled() bool { return o.Kubeconfig != "" || o.ClustersFile != "" }

// Check reports every option that is wrong, without reading the files.
func (o ReviewOptions) Check() error {
	var errs []error
	if o.Kubeconfig != "" && o.ClustersFile != "" {
		errs = append(errs, errors.New("--subject-access-review-kubeconfig, --subject-access-review-clusters: one or the other"))
	}
	if o.AllowedTTL < 0 || o.DeniedTTL < 0 {
		errs = append(errs, fmt.Errorf("--subject-access-review-allowed-ttl, --subject-access-review-denied-ttl: must not be negative, got %s and %s", o.AllowedTTL, o.DeniedTTL))
	}
	if o.Concurrency < 0 {
		errs = append(errs, fmt.Errorf("--subject-access-review-max-in-flight-per-subject: must not be negative, got %d", o.Concurrency))
	}
	if o.RatePerSubject < 0 || math.IsNaN(o.RatePerSubject) {
		errs = append(errs, fmt.Errorf("--subject-access-review-rate-per-subject: must not be negative, got %v", o.RatePerSubject))
	}
	if o.BurstPerSubject < 0 {
		errs = append(errs, fmt.Errorf("--subject-access-review-burst-per-subject: must not be negative, got %d", o.BurstPerSubject))
	}
	if o.RatePerSubject > 0 && o.BurstPerSubject == 0 {
		errs = append(errs, fmt.Errorf("--subject-access-review-burst-per-subject: at least 1 with --subject-access-review-rate-per-subject %g (a burst of 0 asks nothing)", o.RatePerSubject))
	}
	return errors.Join(errs...)
}

// IncompleteError is a question of a View that the members' reviews could not answer wholly: the
// request needed more reviews than it may ask (MaxReviewsPerRequest), or than its subject may ask
// now (its rate and in-flight bounds), and what it got decides nothing. Such an answer would
// depend on which reviews were asked — on members and namespaces the subject may not see — so the
// request must fail instead (the query API answers 429 with RetryAfter), never answer fewer
// objects. A retry gets further: the answers asked meanwhile are cached, and only the rest is
// asked.
type IncompleteError struct {
	Reason     string
	RetryAfter time.Duration
}

func (e *IncompleteError) Error() string {
	return "authz: subject access reviews incomplete: " + e.Reason
}

// accessReviewer is the one call of a member's API the mode makes.
type accessReviewer interface {
	Create(ctx context.Context, r *authorizationv1.SubjectAccessReview, o metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error)
}

// Reviewer asks the member that owns an object whether a user may see it, with the user's name,
// UID and groups, as the member's kube-apiserver would be asked if the user came to it directly.
// Answers are cached per (user, cluster, verb, resource, namespace); a failed review is a deny,
// kept for DeniedTTL, and logged: a member whose API is away hides its objects from the users
// the mode decides for (fail closed), it never fails the fleet's answers. What one subject asks
// (reviews in flight, reviews per second) and keeps (cached answers) is bounded per subject, by
// user name as the query API's other bounds.
type Reviewer struct {
	members           map[string]accessReviewer
	allowTTL, denyTTL time.Duration
	concurrency       int
	rate              rate.Limit // 0: no bound
	burst             int
	// wait, maxPerRequest, maxAnswers and maxPerSubject are reviewWait, MaxReviewsPerRequest,
	// maxAnswers and maxAnswersPerSubject, smaller in tests.
	wait                      time.Duration
	maxPerRequest             int
	maxAnswers, maxPerSubject int
	observe                   func(cluster, result string)
	log                       *slog.Logger
	now                       func() time.Time
	flight                    singleflight.Group

	mu                 sync.Mutex
	subjects           map[string]*reviewSubject // by user name
	answers            int                       // cached answers of every subject
	swept              time.Time
	unknownClusterSeen map[string]bool
}

// reviewSubject is what the reviewer keeps of one subject: its cached answers and its bounds.
type reviewSubject struct {
	answers map[reviewKey]reviewAnswer
	slots   chan struct{} // its reviews in flight
	bucket  *rate.Limiter // nil: no rate bound
	used    time.Time
}

type reviewKey struct {
	user, cluster, verb, group, resource, namespace string
}

type reviewAnswer struct {
	allowed bool
	expires time.Time
}

// NewReviewer reads the members' credentials.
func NewReviewer(o ReviewOptions) (*Reviewer, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	var clusters []registry.Cluster
	var err error
	if o.Kubeconfig != "" {
		clusters, err = registry.ClustersFromKubeconfig(o.Kubeconfig)
	} else {
		clusters, err = registry.LoadClusters(o.ClustersFile)
	}
	if err != nil {
		return nil, fmt.Errorf("subject access review members: %w", err)
	}
	members := make(map[string]accessReviewer, len(clusters))
	for _, c := range clusters {
		cfg, err := c.RESTConfig()
		if err != nil {
			return nil, fmt.Errorf("subject access review members: %w", err)
		}
		cfg.Timeout = reviewTimeout
		cfg.UserAgent = "kubesearch-queryapi"
		// A request may ask many reviews at once; client-go's default 5 QPS would queue them.
		cfg.QPS, cfg.Burst = 200, 400
		client, err := authorizationv1client.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("subject access review members: cluster %q: %w", c.Name, err)
		}
		members[c.Name] = client.SubjectAccessReviews()
	}
	return newReviewer(o, members), nil
}

func newReviewer(o ReviewOptions, members map[string]accessReviewer) *Reviewer {
	if o.AllowedTTL == 0 {
		o.AllowedTTL = DefaultAllowedTTL
	}
	if o.DeniedTTL == 0 {
		o.DeniedTTL = DefaultDeniedTTL
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultReviewConcurrency
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Observe == nil {
		o.Observe = func(string, string) {}
	}
	return &Reviewer{members: members, allowTTL: o.AllowedTTL, denyTTL: o.DeniedTTL, concurrency: o.Concurrency,
		rate: rate.Limit(o.RatePerSubject), burst: o.BurstPerSubject, wait: reviewWait, maxPerRequest: MaxReviewsPerRequest,
		maxAnswers: maxAnswers, maxPerSubject: maxAnswersPerSubject, observe: o.Observe, log: o.Logger, now: time.Now,
		subjects: map[string]*reviewSubject{}, unknownClusterSeen: map[string]bool{}}
}

// subject is the state of the subject named name, made when new; r.mu is held. Once a minute
// the subjects gone quiet are dropped: answers all expired, nothing in flight, tokens all back
// (so that going quiet never refills a bucket faster than its rate does).
func (r *Reviewer) subject(name string, now time.Time) *reviewSubject {
	if now.Sub(r.swept) >= time.Minute {
		for n, s := range r.subjects {
			if now.Sub(s.used) > max(r.allowTTL, r.denyTTL) && len(s.slots) == 0 &&
				(s.bucket == nil || s.bucket.Tokens() >= float64(r.burst)) {
				r.answers -= len(s.answers)
				delete(r.subjects, n)
			}
		}
		r.swept = now
	}
	s := r.subjects[name]
	if s == nil {
		s = &reviewSubject{answers: map[reviewKey]reviewAnswer{}, slots: make(chan struct{}, r.concurrency)}
		if r.rate > 0 {
			s.bucket = rate.NewLimiter(r.rate, r.burst)
		}
		r.subjects[name] = s
	}
	s.used = now
	return s
}

// Inventory is what a View asks about: the fleet's cached resources and, per cluster, the
// namespaces that hold cached objects (a user's view of a namespace nothing is cached in is empty
// whether or not the user may see it, so only those need asking).
type Inventory interface {
	Clusters() []string
	Resources(cluster string) []CachedResource
	Namespaces(ctx context.Context, cluster string) ([]string, error)
}

// CachedResource is one resource a member has cached.
type CachedResource struct {
	Group, Resource string
	Namespaced      bool
}

// View is one request's questions of the members for one user: Allowed and Scope, as a Policy
// answers them, asked of the members (and their cache) as the request needs them. A question it
// cannot answer wholly is a deny, and Err then says the request must fail (IncompleteError).
type View struct {
	r    *Reviewer
	ctx  context.Context
	user auth.User
	key  string
	inv  Inventory

	mu    sync.Mutex
	asked int              // reviews this request asked the members
	err   *IncompleteError // the first question left incomplete
}

// View binds the reviewer to a request (its context bounds the reviews) and its user.
func (r *Reviewer) View(ctx context.Context, user auth.User, inv Inventory) *View {
	groups := slices.Clone(user.Groups)
	slices.Sort(groups)
	// Length-prefixed: no name, UID or group can make two users' keys collide.
	var key strings.Builder
	for _, f := range append([]string{user.Name, user.UID}, groups...) {
		fmt.Fprintf(&key, "%d:%s", len(f), f)
	}
	return &View{r: r, ctx: ctx, user: user, key: key.String(), inv: inv}
}

// Err is the IncompleteError of the first question of the view the members' reviews could not
// answer wholly: every answer of the request may depend on what was not asked, so none may be
// given. Nil while every question was answered.
func (v *View) Err() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.err == nil {
		return nil
	}
	return v.err
}

// deny records why a question is a deny only because it is incomplete (nil: it is a deny).
func (v *View) deny(err *IncompleteError) bool {
	if err != nil {
		v.mu.Lock()
		if v.err == nil {
			v.err = err
		}
		v.mu.Unlock()
	}
	return false
}

// Allowed is Policy.Allowed asked of the members: whether the user may, with verb, see some object
// of resource in group, in cluster and namespace ("" for cluster-scoped objects); Any in a
// dimension asks about any value. A concrete cluster and resource are asked whether or not
// anything of them is cached, so that the answer does not depend on what exists. Any namespace is
// allowed when a review without a namespace is (a ClusterRoleBinding), or a review of one of the
// inventory's namespaces of the cluster: where the subject has a RoleBinding, the namespace exists.
// The first allow answers; a deny needs every review, so one that could not all be asked is an
// IncompleteError (Err).
//
// How long the first question about a cluster takes says whether the cluster exists: a member
// costs review round trips (then its answers are cached), a name the inventory does not hold
// costs none, as a cached answer. Its answer is the same deny either way.
func (v *View) Allowed(verb, cluster, namespace, group, resource string) bool {
	if !slices.Contains([]string{VerbGet, VerbList, VerbWatch}, verb) {
		return false
	}
	clusters := []string{cluster}
	if cluster == Any {
		clusters = v.inv.Clusters()
	}
	type pair struct {
		cluster string
		res     CachedResource
	}
	var pairs []pair
	for _, c := range clusters {
		if group != Any && resource != Any {
			cr := CachedResource{Group: group, Resource: resource, Namespaced: true}
			for _, known := range v.inv.Resources(c) {
				if known.Group == group && known.Resource == resource {
					cr.Namespaced = known.Namespaced
				}
			}
			pairs = append(pairs, pair{c, cr})
			continue
		}
		for _, cr := range v.inv.Resources(c) {
			if (group == Any || cr.Group == group) && (resource == Any || cr.Resource == resource) {
				pairs = append(pairs, pair{c, cr})
			}
		}
	}
	// One batch per step, asked in parallel: the named namespace (a namespaced review honours
	// ClusterRoleBindings too); or every namespace at once, then the namespaces one at a time.
	first := make([]reviewKey, len(pairs))
	for i, p := range pairs {
		ns := namespace
		if ns == Any {
			ns = ""
		}
		first[i] = v.keyOf(p.cluster, verb, p.res, ns)
	}
	got, incomplete := v.reviewAll(first, true, true)
	if slices.Contains(got, true) {
		return true
	}
	if namespace != Any {
		return v.deny(incomplete)
	}
	var perNamespace []reviewKey
	for _, p := range pairs {
		if p.res.Namespaced {
			perNamespace = append(perNamespace, v.namespaceKeys(p.cluster, verb, p.res, nil)...)
		}
	}
	// Past the first step's bounds, only cached allows can still answer: asking would wait and
	// be refused again.
	got, incompleteNS := v.reviewAll(perNamespace, true, incomplete == nil)
	if slices.Contains(got, true) {
		return true
	}
	return v.deny(cmp.Or(incomplete, incompleteNS))
}

// Scope is Policy.Scope asked of the members, for a query over clusters, namespaces and resources
// (empty: all): the pairs of those the inventory holds, each allowed wholly (a review without a
// namespace allowed) or in the namespaces allowed one by one, merged into few grants. It is
// never nil: this mode never grants "everything". When the reviews could not all be asked it
// grants nothing, and Err says why.
func (v *View) Scope(verb string, clusters, namespaces []string, resources []query.Resource) *query.Scope {
	type pair struct {
		cluster string
		res     CachedResource
	}
	var pairs []pair
	for _, c := range v.inv.Clusters() {
		if len(clusters) > 0 && !slices.Contains(clusters, c) {
			continue
		}
		for _, cr := range v.inv.Resources(c) {
			if len(resources) == 0 || slices.ContainsFunc(resources, func(r query.Resource) bool {
				return r.Resource == cr.Resource && (r.AnyGroup || r.Group == cr.Group)
			}) {
				pairs = append(pairs, pair{c, cr})
			}
		}
	}
	scope := &query.Scope{}
	if !slices.Contains([]string{VerbGet, VerbList, VerbWatch}, verb) {
		return scope
	}
	whole := make([]reviewKey, len(pairs))
	for i, p := range pairs {
		whole[i] = v.keyOf(p.cluster, verb, p.res, "")
	}
	wholly, incomplete := v.reviewAll(whole, false, true)
	if incomplete != nil {
		v.deny(incomplete)
		return scope
	}
	var (
		nsKeys  []reviewKey
		nsOwner []int
	)
	for i, p := range pairs {
		if wholly[i] || !p.res.Namespaced {
			continue
		}
		for _, k := range v.namespaceKeys(p.cluster, verb, p.res, namespaces) {
			nsKeys, nsOwner = append(nsKeys, k), append(nsOwner, i)
		}
	}
	nsAllowed, incomplete := v.reviewAll(nsKeys, false, true)
	if incomplete != nil {
		v.deny(incomplete)
		return scope
	}
	allowedNS := make([][]string, len(pairs))
	for j, ok := range nsAllowed {
		if ok {
			allowedNS[nsOwner[j]] = append(allowedNS[nsOwner[j]], nsKeys[j].namespace)
		}
	}
	for i, p := range pairs {
		g := query.Grant{Clusters: []string{p.cluster}, Resources: []query.Resource{{Group: p.res.Group, Resource: p.res.Resource}}}
		switch {
		case wholly[i]:
		case len(allowedNS[i]) > 0:
			g.Namespaces = allowedNS[i]
			slices.Sort(g.Namespaces)
		default:
			continue
		}
		scope.Grants = append(scope.Grants, g)
	}
	scope.Grants = mergeGrants(scope.Grants)
	return scope
}

// namespaceKeys are the reviews of a namespaced resource one namespace at a time: of the
// namespaces asked for, or else of every namespace holding cached objects in the cluster.
//
// The namespaces a request names are asked even when the inventory does not hold them: it is
// read every 30 s, holds at most 10,000 of each kind per cluster, and without cached Namespace
// objects lacks the empty ones, so leaving them out would deny namespaces the member allows
// (a 403 for an empty list, a watch missing its first objects). The bounds above keep such
// requests from flooding the members instead.
func (v *View) namespaceKeys(cluster, verb string, cr CachedResource, asked []string) []reviewKey {
	namespaces := asked
	if len(namespaces) == 0 {
		var err error
		namespaces, err = v.inv.Namespaces(v.ctx, cluster)
		if err != nil {
			v.r.log.Warn("namespaces not known for subject access reviews", "cluster", cluster, "err", err)
			return nil
		}
	}
	keys := make([]reviewKey, 0, len(namespaces))
	for _, ns := range namespaces {
		if ns != "" && ns != Any {
			keys = append(keys, v.keyOf(cluster, verb, cr, ns))
		}
	}
	return keys
}

func (v *View) keyOf(cluster, verb string, cr CachedResource, namespace string) reviewKey {
	return reviewKey{user: v.key, cluster: cluster, verb: verb, group: cr.Group, resource: cr.Resource, namespace: namespace}
}

// reviewAll answers keys, from the cache or (with ask) asking the members, at most Concurrency at
// a time, the clusters in turn (fairOrder). With untilAllowed it stops at the first allow, as a
// question of Allowed needs one. A key it could not ask (past the request's budget or its
// subject's bounds, without ask, or once the view is incomplete already) stays false, and the
// error says the answers are not all there: the caller decides whether those it got answer the
// question anyway.
func (v *View) reviewAll(keys []reviewKey, untilAllowed, ask bool) ([]bool, *IncompleteError) {
	out := make([]bool, len(keys))
	var missing []int
	now := v.r.now()
	v.r.mu.Lock()
	s := v.r.subject(v.user.Name, now)
	for i, k := range keys {
		if a, ok := s.answers[k]; ok && now.Before(a.expires) {
			out[i] = a.allowed
			if a.allowed && untilAllowed {
				v.r.mu.Unlock()
				return out, nil
			}
		} else {
			missing = append(missing, i)
		}
	}
	v.r.mu.Unlock()
	if len(missing) == 0 {
		return out, nil
	}
	v.mu.Lock()
	failed := v.err
	v.mu.Unlock()
	switch {
	case failed != nil:
		return out, failed // the request fails anyway: asking more would only load the members
	case !ask:
		return out, &IncompleteError{RetryAfter: time.Second, Reason: "reviews left unasked"} // the caller has the reason
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(v.ctx), v.r.wait)
	defer cancel()
	var (
		g                errgroup.Group
		allowed, refused atomic.Bool
		over             bool
	)
	g.SetLimit(v.r.concurrency)
	for _, i := range fairOrder(keys, missing) {
		if (untilAllowed && allowed.Load()) || refused.Load() {
			break
		}
		if over = !v.spend(); over {
			break
		}
		g.Go(func() error {
			ok, asked := v.review(ctx, keys[i])
			out[i] = ok
			if ok {
				allowed.Store(true)
			}
			if !asked {
				refused.Store(true)
			}
			return nil
		})
	}
	_ = g.Wait() // the reviews report their own failures, as denies
	switch {
	case untilAllowed && allowed.Load():
		return out, nil
	case over:
		return out, &IncompleteError{RetryAfter: time.Second, Reason: fmt.Sprintf(
			"the request needs more than %d reviews of the members; retry (the answers asked are cached), or name fewer clusters, namespaces or resources",
			v.r.maxPerRequest)}
	case refused.Load():
		return out, &IncompleteError{RetryAfter: time.Second, Reason: fmt.Sprintf(
			"user %q asks more reviews of the members than it may (%s); retry later", v.user.Name, v.r.bounds())}
	}
	return out, nil
}

// spend counts one review against the request's budget; false past it (logged once).
func (v *View) spend() bool {
	v.mu.Lock()
	ok := v.asked < v.r.maxPerRequest
	first := !ok && v.asked == v.r.maxPerRequest
	v.asked++
	v.mu.Unlock()
	if first {
		v.r.log.Warn("a request needs more subject access reviews than one may ask; it is refused (429)",
			"user", v.user.Name, "max", v.r.maxPerRequest)
	}
	return ok
}

// bounds words the per-subject bounds for an error.
func (r *Reviewer) bounds() string {
	if r.rate <= 0 {
		return fmt.Sprintf("%d at once", r.concurrency)
	}
	return fmt.Sprintf("%d at once, %g per second, burst %d", r.concurrency, float64(r.rate), r.burst)
}

// fairOrder orders the indexes of keys one cluster at a time in turn (clusters in the order they
// first appear: those a request names come first), so that what a request may ask is spread over
// its clusters, and a member with many namespaces, maybe one the subject cannot see, never takes
// it all before the others are asked.
func fairOrder(keys []reviewKey, idx []int) []int {
	var clusters []string
	by := map[string][]int{}
	for _, i := range idx {
		c := keys[i].cluster
		if _, ok := by[c]; !ok {
			clusters = append(clusters, c)
		}
		by[c] = append(by[c], i)
	}
	out := make([]int, 0, len(idx))
	for round := 0; len(clusters) > 0; round++ {
		clusters = slices.DeleteFunc(clusters, func(c string) bool {
			if round >= len(by[c]) {
				return true
			}
			out = append(out, by[c][round])
			return false
		})
	}
	return out
}

// review asks the member once for every request wanting the same answer at the same time. The
// review outlives the request that started it (bounded by its own timeout): the others waiting
// for it must not get a deny because the first one went away. asked is false when the subject's
// bounds let no review be asked within ctx: nothing is answered, or cached.
func (v *View) review(ctx context.Context, k reviewKey) (allowed, asked bool) {
	flightKey := fmt.Sprintf("%d:%s%d:%s%d:%s%d:%s%d:%s%s", len(k.user), k.user, len(k.cluster), k.cluster, len(k.verb), k.verb,
		len(k.group), k.group, len(k.resource), k.resource, k.namespace)
	got, _, _ := v.r.flight.Do(flightKey, func() (any, error) {
		release, ok := v.r.admit(ctx, v.user.Name, k.cluster)
		if !ok {
			return reviewResult{}, nil
		}
		allowed, err := v.ask(k)
		release()
		ttl := v.r.allowTTL
		if !allowed {
			ttl = v.r.denyTTL
		}
		if err != nil {
			v.r.log.Warn("subject access review failed; the member's objects are hidden from the user meanwhile",
				"cluster", k.cluster, "user", v.user.Name, "verb", k.verb, "resource", k.resource, "namespace", k.namespace, "err", err)
		}
		v.r.remember(v.user.Name, k, reviewAnswer{allowed: allowed, expires: v.r.now().Add(ttl)})
		return reviewResult{allowed: allowed, asked: true}, nil
	})
	res := got.(reviewResult)
	return res.allowed, res.asked
}

type reviewResult struct{ allowed, asked bool }

// admit takes one of the subject's slots for a review of cluster, and a token of its rate,
// waiting until ctx is done at most; release gives the slot back. A cluster without credentials
// is answered without a round trip, and costs nothing.
func (r *Reviewer) admit(ctx context.Context, name, cluster string) (release func(), ok bool) {
	if _, ok := r.members[cluster]; !ok {
		return func() {}, true
	}
	r.mu.Lock()
	s := r.subject(name, r.now())
	r.mu.Unlock()
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, false
	}
	if s.bucket != nil && s.bucket.Wait(ctx) != nil {
		<-s.slots
		return nil, false
	}
	return func() { <-s.slots }, true
}

func (v *View) ask(k reviewKey) (bool, error) {
	member, ok := v.r.members[k.cluster]
	if !ok {
		v.r.mu.Lock()
		first := !v.r.unknownClusterSeen[k.cluster]
		v.r.unknownClusterSeen[k.cluster] = true
		v.r.mu.Unlock()
		if first {
			v.r.log.Warn("no subject access review credentials for a cluster; its objects are hidden from the users the reviews decide for", "cluster", k.cluster)
		}
		return false, nil
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: v.user.Name, UID: v.user.UID, Groups: v.user.Groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: k.namespace, Verb: k.verb, Group: k.group, Resource: k.resource},
	}}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(v.ctx), reviewTimeout)
	defer cancel()
	got, err := member.Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		v.r.observe(k.cluster, ReviewFailed)
		return false, fmt.Errorf("subject access review in %s: %w", k.cluster, err)
	}
	allowed := got.Status.Allowed && !got.Status.Denied
	if allowed {
		v.r.observe(k.cluster, ReviewAllowed)
	} else {
		v.r.observe(k.cluster, ReviewDenied)
	}
	return allowed, nil
}

// remember caches an answer of the subject name's. Eviction never punishes the subjects that ask
// little for one that asks much: a subject with maxPerSubject answers loses its own expired ones,
// or all its own when few have expired; with maxAnswers in all, the expired ones of every subject
// go, then the answers of the subjects holding the most, largest first, until a tenth is free.
func (r *Reviewer) remember(name string, k reviewKey, a reviewAnswer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	s := r.subject(name, now)
	if _, ok := s.answers[k]; !ok {
		if len(s.answers) >= r.maxPerSubject {
			r.dropExpired(s, now)
			// A sweep that freed little would run again at the next answer, under the lock
			// every request takes: start this subject over instead.
			if len(s.answers) > r.maxPerSubject*9/10 {
				r.answers -= len(s.answers)
				clear(s.answers)
			}
		}
		if r.answers >= r.maxAnswers {
			r.evict(now)
		}
		r.answers++
	}
	s.answers[k] = a
}

// dropExpired drops a subject's expired answers; r.mu is held.
func (r *Reviewer) dropExpired(s *reviewSubject, now time.Time) {
	for k, a := range s.answers {
		if !now.Before(a.expires) {
			delete(s.answers, k)
			r.answers--
		}
	}
}

// evict makes room in a full cache (remember); r.mu is held.
func (r *Reviewer) evict(now time.Time) {
	for _, s := range r.subjects {
		r.dropExpired(s, now)
	}
	if r.answers <= r.maxAnswers*9/10 {
		return
	}
	largest := slices.SortedFunc(maps.Values(r.subjects), func(a, b *reviewSubject) int {
		return cmp.Compare(len(b.answers), len(a.answers))
	})
	for _, s := range largest {
		if r.answers <= r.maxAnswers*9/10 {
			return
		}
		r.answers -= len(s.answers)
		clear(s.answers)
	}
}

// mergeGrants makes the grants of pairs few: those of one cluster with the same namespaces become
// one grant of their resources, then those with the same namespaces and resources one grant of
// their clusters. The order is deterministic (a query's fingerprint covers its scope).
func mergeGrants(grants []query.Grant) []query.Grant {
	key := func(xs []string) string { return strings.Join(xs, "\x00") }
	resKey := func(rs []query.Resource) string {
		s := make([]string, len(rs))
		for i, r := range rs {
			s[i] = r.Group + "/" + r.Resource
		}
		return key(s)
	}
	merge := func(gs []query.Grant, by func(query.Grant) string, add func(into *query.Grant, g query.Grant)) []query.Grant {
		index := map[string]int{}
		var out []query.Grant
		for _, g := range gs {
			k := by(g)
			if i, ok := index[k]; ok {
				add(&out[i], g)
				continue
			}
			index[k] = len(out)
			out = append(out, g)
		}
		return out
	}
	grants = merge(grants, func(g query.Grant) string { return key(g.Clusters) + "\x01" + key(g.Namespaces) },
		func(into *query.Grant, g query.Grant) { into.Resources = append(into.Resources, g.Resources...) })
	for i := range grants {
		slices.SortFunc(grants[i].Resources, func(a, b query.Resource) int {
			return strings.Compare(a.Group+"/"+a.Resource, b.Group+"/"+b.Resource)
		})
	}
	grants = merge(grants, func(g query.Grant) string { return resKey(g.Resources) + "\x01" + key(g.Namespaces) },
		func(into *query.Grant, g query.Grant) { into.Clusters = append(into.Clusters, g.Clusters...) })
	for i := range grants {
		slices.Sort(grants[i].Clusters)
	}
	slices.SortFunc(grants, func(a, b query.Grant) int {
		return strings.Compare(key(a.Clusters)+"\x01"+resKey(a.Resources)+"\x01"+key(a.Namespaces),
			key(b.Clusters)+"\x01"+resKey(b.Resources)+"\x01"+key(b.Namespaces))
	})
	return grants
}
