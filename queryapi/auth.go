package queryapi

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubesearch/kubesearch/internal/auth"
	"github.com/kubesearch/kubesearch/internal/authz"
	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/queryapi/page"
)

// subject is who asks and the policy that applies, fixed for the whole request (a policy reloaded
// meanwhile applies from the next request on).
type subject struct {
	user   auth.User
	policy *authz.Policy // nil: no policy file
	review *authz.View   // nil: no SubjectAccessReview mode; with neither, the subject sees everything
}

const subjectKey = "kubesearch.subject"

// unauthenticatedPaths answer without credentials: probes must work for the kubelet, and say
// nothing about the fleet.
var unauthenticatedPaths = map[string]bool{"/healthz": true, "/livez": true, "/readyz": true}

// public says whether a path answers without credentials: the probes, and the search page's static
// assets (and the redirects to it), which hold no data: a browser cannot attach a bearer token to a
// page it navigates to, so the page must load before it can ask for one. Unlike the probes, the
// page's requests count against the source's bounds (admit).
func public(path string) bool {
	return unauthenticatedPaths[path] || path == "/" || path == strings.TrimSuffix(page.Prefix, "/") || strings.HasPrefix(path, page.Prefix)
}

// authenticate is the middleware that makes every request a subject's: a 401 Status without
// credentials it accepts (unless anonymous access is on), a 503 when the token reviewer is away.
func (s *Server) authenticate(c *gin.Context) {
	if public(c.Request.URL.Path) {
		c.Next()
		return
	}
	subj, err := s.authenticateRequest(c.Request)
	switch {
	case errors.Is(err, auth.ErrUnavailable):
		c.Header("Retry-After", "5")
		writeStatus(c, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "authentication is unavailable: "+err.Error(), nil)
		c.Abort()
		return
	case errors.Is(err, auth.ErrThrottled):
		s.throttledAuthentication(c)
		return
	case err != nil:
		// As kube-apiserver answers: nothing about which credential failed, or why.
		writeStatus(c, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "Unauthorized", nil)
		c.Abort()
		return
	}
	c.Set(subjectKey, subj)
	c.Next()
}

// errUnauthenticated is a request whose credentials are missing or not accepted.
var errUnauthenticated = errors.New("unauthenticated")

// authenticateRequest makes the subject of a request's credentials, with the policy and reviews
// in force now: for a new request, and again for a watch that is open (a revoked subject loses
// it). auth.ErrUnavailable when the token reviewer is away; auth.ErrThrottled when the
// credentials were refused unjudged (limits.go); errUnauthenticated when they are not accepted.
func (s *Server) authenticateRequest(r *http.Request) (subject, error) {
	user, ok, err := s.authn.Authenticate(r)
	switch {
	case errors.Is(err, auth.ErrUnavailable), errors.Is(err, auth.ErrThrottled):
		return subject{}, err
	case err != nil || !ok:
		return subject{}, errUnauthenticated
	}
	subj := subject{user: user}
	if s.authz != nil {
		subj.policy = s.authz.Policy()
	}
	if s.reviewer != nil {
		subj.review = s.reviewer.View(r.Context(), user, s.inv)
	}
	return subj, nil
}

// subjectOf is the request's subject.
func subjectOf(c *gin.Context) subject {
	v, _ := c.Get(subjectKey)
	subj, _ := v.(subject)
	return subj
}

// unrestricted says whether nothing restricts what the subject sees.
func (s subject) unrestricted() bool { return s.policy == nil && s.review == nil }

// scope is what the subject may see with verb of a query's clusters, namespaces and resources
// (the members' reviews are asked about those only), for the query model: nil is everything.
// With both a policy and reviews it is the union of what each grants.
func (s subject) scope(verb string, q *query.Query) *query.Scope {
	if s.unrestricted() {
		return nil
	}
	var parts []*query.Scope
	if s.policy != nil {
		p := s.policy.Scope(s.user, verb)
		if p == nil {
			return nil
		}
		parts = append(parts, p)
	}
	if s.review != nil {
		parts = append(parts, s.review.Scope(verb, q.Clusters, q.Namespaces, q.Resources))
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return &query.Scope{Grants: slices.Concat(parts[0].Grants, parts[1].Grants)}
}

// restrict puts the subject's scope for verb into q, once its clusters, namespaces and resources
// are set: one place for every query a request makes.
func (s subject) restrict(q *query.Query, verb string) {
	q.Scope, q.Subject = s.scope(verb, q), s.user.Name
}

// restrictView is restrict for a facade request over clusters (viewClusters).
func (s subject) restrictView(q *query.Query, verb string, clusters []string) {
	q.Clusters = slices.Clone(clusters)
	s.restrict(q, verb)
	if len(clusters) == 0 {
		// No cluster of the view the subject may see: empty Clusters would mean every cluster.
		q.Scope = &query.Scope{}
	}
}

// allowed says whether the subject may use verb on anything of (cluster, namespace, group,
// resource); authz.Any in a dimension asks whether any value of it is allowed.
func (s subject) allowed(verb, cluster, namespace, group, resource string) bool {
	return s.unrestricted() ||
		(s.policy != nil && s.policy.Allowed(s.user, verb, cluster, namespace, group, resource)) ||
		(s.review != nil && s.review.Allowed(verb, cluster, namespace, group, resource))
}

// readVerbs are the verbs the facade serves.
var readVerbs = []string{authz.VerbGet, authz.VerbList, authz.VerbWatch}

// seesCluster says whether the subject may read anything of a cluster.
func (s subject) seesCluster(cluster string) bool {
	return s.seesResource(cluster, authz.Any, authz.Any)
}

// seesResource says whether the subject may read some object of a resource in cluster (authz.Any:
// in some cluster).
func (s subject) seesResource(cluster, group, resource string) bool {
	return anyOf(readVerbs, func(v string) bool { return s.allowed(v, cluster, authz.Any, group, resource) })
}

// visible is the catalog as the subject may read it (any read verb): nil, every record, when
// nothing restricts the subject.
func (s subject) visible() visibleFunc {
	if s.unrestricted() {
		return nil
	}
	return s.seesResource
}

// visibleClusters are the clusters of the catalog the subject may read something of.
func (s *Server) visibleClusters(subj subject) []string {
	return slices.DeleteFunc(s.catalog.clusters(), func(c string) bool { return !subj.seesCluster(c) })
}

// authorizeURL guards an operational path (/metrics): its answers name every member and show the
// whole fleet's activity, so, as kube-apiserver requires get on /metrics, only a subject that may
// get everything (no policy, or a rule of "*" in every list) or one a policy rule of
// nonResourceURLs grants the path may read it.
func authorizeURL(c *gin.Context) {
	subj := subjectOf(c)
	if subj.mayGetURL(c.Request.URL.Path) {
		c.Next()
		return
	}
	writeStatus(c, http.StatusForbidden, metav1.StatusReasonForbidden,
		fmt.Sprintf("forbidden: User %q cannot get path %q", subj.user.Name, c.Request.URL.Path), nil)
	c.Abort()
}

// mayGetURL says whether the subject may get an operational path (see authorizeURL).
func (s subject) mayGetURL(path string) bool {
	// The rule first: it asks no member, and a scraper it grants must not wait for reviews.
	return (s.policy != nil && s.policy.AllowedURL(s.user, path)) || s.scope(authz.VerbGet, &query.Query{}) == nil
}

// forbidden answers 403 like a kube-apiserver: what was asked, and that this subject may not.
// Whether anything exists there is not said, and does not change the answer.
func forbidden(c *gin.Context, subj subject, name, verb, what string) {
	writeStatus(c, http.StatusForbidden, metav1.StatusReasonForbidden,
		fmt.Sprintf("%s is forbidden: User %q cannot %s %s", name, subj.user.Name, verb, what), nil)
}

// resourceWhat names a resource request for a 403 message, as kube-apiserver words it.
func resourceWhat(cluster, namespace, group, resource string) string {
	w := fmt.Sprintf("resource %q in API group %q", resource, group)
	if namespace != "" && namespace != authz.Any {
		w += fmt.Sprintf(" in the namespace %q", namespace)
	}
	if cluster != "" && cluster != authz.Any {
		w += fmt.Sprintf(" in cluster %q", cluster)
	}
	return w
}

// searchForbidden checks the explicit dimensions of a REST search: a request naming only
// clusters, namespaces or resources the subject may not see at all is a 403; otherwise the scope
// filters inside the query.
func (s subject) searchForbidden(q *query.Query) string {
	if s.unrestricted() {
		return ""
	}
	any := authz.Any
	if len(q.Clusters) > 0 && !anyOf(q.Clusters, func(c string) bool { return s.allowed(authz.VerbList, c, any, any, any) }) {
		return fmt.Sprintf("clusters %s", strings.Join(q.Clusters, ", "))
	}
	if len(q.Namespaces) > 0 && !anyOf(q.Namespaces, func(ns string) bool { return s.allowed(authz.VerbList, any, ns, any, any) }) {
		return fmt.Sprintf("namespaces %s", strings.Join(q.Namespaces, ", "))
	}
	if len(q.Resources) > 0 && !anyOf(q.Resources, func(r query.Resource) bool {
		g := r.Group
		if r.AnyGroup {
			g = any
		}
		return s.allowed(authz.VerbList, any, any, g, r.Resource)
	}) {
		names := make([]string, len(q.Resources))
		for i, r := range q.Resources {
			names[i] = r.String()
		}
		return fmt.Sprintf("resources %s", strings.Join(names, ", "))
	}
	return ""
}

func anyOf[T any](xs []T, f func(T) bool) bool {
	for _, x := range xs {
		if f(x) {
			return true
		}
	}
	return false
}
