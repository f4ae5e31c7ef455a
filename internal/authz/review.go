package authz

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/singleflight"
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
	// DefaultReviewConcurrency bounds the reviews one request has in flight.
	DefaultReviewConcurrency = 16
	reviewTimeout            = 5 * time.Second
	// maxAnswers bounds the cached answers; past it the expired ones go, or all when few have.
	maxAnswers = 200_000
	// MaxReviewsPerRequest bounds what one request may ask of the members (cached answers are
	// free): past it the rest are denies, so a request naming a thousand namespaces or resources
	// cannot turn into a flood of reviews.
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
	// Concurrency bounds the reviews one request has in flight.
	Concurrency int
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
		errs = append(errs, fmt.Errorf("review concurrency: %d is negative", o.Concurrency))
	}
	return errors.Join(errs...)
}

// accessReviewer is the one call of a member's API the mode makes.
type accessReviewer interface {
	Create(ctx context.Context, r *authorizationv1.SubjectAccessReview, o metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error)
}

// Reviewer asks the member that owns an object whether a user may see it, with the user's name,
// UID and groups, as the member's kube-apiserver would be asked if the user came to it directly.
// Answers are cached per (user, cluster, verb, resource, namespace); a failed review is a deny,
// kept for DeniedTTL, and logged: a member whose API is away hides its objects from the users
// the mode decides for (fail closed), it never fails the fleet's answers.
type Reviewer struct {
	members            map[string]accessReviewer
	allowTTL, denyTTL  time.Duration
	concurrency        int
	observe            func(cluster, result string)
	log                *slog.Logger
	now                func() time.Time
	flight             singleflight.Group
	mu                 sync.Mutex
	answers            map[reviewKey]reviewAnswer
	unknownClusterSeen map[string]bool
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
		observe: o.Observe, log: o.Logger, now: time.Now, answers: map[reviewKey]reviewAnswer{}, unknownClusterSeen: map[string]bool{}}
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
// answers them, asked of the members (and their cache) as the request needs them.
type View struct {
	r    *Reviewer
	ctx  context.Context
	user auth.User
	key  string
	inv  Inventory

	mu     sync.Mutex
	asked  int  // reviews this request asked the members
	capped bool // the budget ran out (logged once)
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

// Allowed is Policy.Allowed asked of the members: whether the user may, with verb, see some object
// of resource in group, in cluster and namespace ("" for cluster-scoped objects); Any in a
// dimension asks about any value. A concrete cluster and resource are asked whether or not
// anything of them is cached, so that the answer does not depend on what exists. Any namespace is
// allowed when a review without a namespace is (a ClusterRoleBinding), or a review of one of the
// inventory's namespaces of the cluster: where the subject has a RoleBinding, the namespace exists.
// At most MaxReviewsPerRequest reviews are asked per View; past them the answers are denies.
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
	if slices.Contains(v.reviewAll(first), true) {
		return true
	}
	if namespace != Any {
		return false
	}
	var perNamespace []reviewKey
	for _, p := range pairs {
		if p.res.Namespaced {
			perNamespace = append(perNamespace, v.namespaceKeys(p.cluster, verb, p.res, nil)...)
		}
	}
	return slices.Contains(v.reviewAll(perNamespace), true)
}

// Scope is Policy.Scope asked of the members, for a query over clusters, namespaces and resources
// (empty: all): the pairs of those the inventory holds, each allowed wholly (a review without a
// namespace allowed) or in the namespaces allowed one by one, merged into few grants. It is
// never nil: this mode never grants "everything".
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
	wholly := v.reviewAll(whole)
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
	nsAllowed := v.reviewAll(nsKeys)
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

// reviewAll answers keys, from the cache or asking the members, at most Concurrency at a time.
func (v *View) reviewAll(keys []reviewKey) []bool {
	out := make([]bool, len(keys))
	var missing []int
	now := v.r.now()
	v.r.mu.Lock()
	for i, k := range keys {
		if a, ok := v.r.answers[k]; ok && now.Before(a.expires) {
			out[i] = a.allowed
		} else {
			missing = append(missing, i)
		}
	}
	v.r.mu.Unlock()
	if len(missing) == 0 {
		return out
	}
	v.mu.Lock()
	budget := max(0, MaxReviewsPerRequest-v.asked)
	first := len(missing) > budget && !v.capped
	v.capped = v.capped || len(missing) > budget
	missing = missing[:min(len(missing), budget)] // the rest stay denies
	v.asked += len(missing)
	v.mu.Unlock()
	if first {
		v.r.log.Warn("a request needs more subject access reviews than one may ask; the rest are denies",
			"user", v.user.Name, "max", MaxReviewsPerRequest)
	}
	var g errgroup.Group
	g.SetLimit(v.r.concurrency)
	for _, i := range missing {
		g.Go(func() error {
			out[i] = v.review(keys[i])
			return nil
		})
	}
	_ = g.Wait() // the reviews report their own failures, as denies
	return out
}

// review asks the member once for every request wanting the same answer at the same time. The
// review outlives the request that started it (bounded by its own timeout): the others waiting
// for it must not get a deny because the first one went away.
func (v *View) review(k reviewKey) bool {
	flightKey := fmt.Sprintf("%d:%s%d:%s%d:%s%d:%s%d:%s%s", len(k.user), k.user, len(k.cluster), k.cluster, len(k.verb), k.verb,
		len(k.group), k.group, len(k.resource), k.resource, k.namespace)
	allowed, _, _ := v.r.flight.Do(flightKey, func() (any, error) {
		allowed, err := v.ask(k)
		ttl := v.r.allowTTL
		if !allowed {
			ttl = v.r.denyTTL
		}
		if err != nil {
			v.r.log.Warn("subject access review failed; the member's objects are hidden from the user meanwhile",
				"cluster", k.cluster, "user", v.user.Name, "verb", k.verb, "resource", k.resource, "namespace", k.namespace, "err", err)
		}
		v.r.remember(k, reviewAnswer{allowed: allowed, expires: v.r.now().Add(ttl)})
		return allowed, nil
	})
	return allowed.(bool)
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

func (r *Reviewer) remember(k reviewKey, a reviewAnswer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.answers) >= maxAnswers {
		now := r.now()
		for k, a := range r.answers {
			if !now.Before(a.expires) {
				delete(r.answers, k)
			}
		}
		// A sweep that freed little would run again at the next answer, under the lock every
		// request takes: start over instead.
		if len(r.answers) > maxAnswers*9/10 {
			clear(r.answers)
		}
	}
	r.answers[k] = a
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
