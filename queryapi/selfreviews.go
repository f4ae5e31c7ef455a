package queryapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/kubesearch/kubesearch/internal/authz"
)

// A read-only server still answers what its subject may do, as kube-apiserver does: `kubectl auth
// can-i`, `kubectl auth whoami`, and tools such as k9s, which read a refused self review as "nothing
// allowed". They are the only POSTs the facade serves, and they change nothing. Reads are answered
// by the same authorization as the requests themselves (the policy file or the members' reviews),
// writes are denied whatever the subject may do in the member.

// maxReviewBody bounds a self review's body: kube-apiserver's own are a few hundred bytes.
const maxReviewBody = 64 << 10

// readOnlyReason is why every write is denied.
const readOnlyReason = "kubesearch serves a read-only copy of the fleet; change objects in their member cluster"

// selfReview is the handler of a self review a POST path names, nil when it names none.
func (s *Server) selfReview(r *facadeRequest) func(*gin.Context, *facadeRequest) {
	if r.namespace != "" || r.name != "" || r.sub != "" || r.legacy {
		return nil
	}
	switch {
	case r.group == authorizationv1.GroupName && r.version == "v1" && r.resource == "selfsubjectaccessreviews":
		return s.selfSubjectAccessReview
	case r.group == authorizationv1.GroupName && r.version == "v1" && r.resource == "selfsubjectrulesreviews":
		return s.selfSubjectRulesReview
	case r.group == authenticationv1.GroupName && r.version == "v1" && r.resource == "selfsubjectreviews":
		return s.selfSubjectReview
	}
	return nil
}

// readReview decodes a self review's body into v; false after answering a bad one.
func readReview(c *gin.Context, v runtime.Object, kind string) bool {
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, maxReviewBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		writeStatus(c, http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge,
			fmt.Sprintf("a %s is at most %d bytes", kind, maxReviewBody), nil)
		return false
	case err != nil:
		writeStatus(c, http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Sprintf("reading the %s: %v", kind, err), nil)
		return false
	}
	// kubectl sends built-in types as protobuf; other clients JSON or YAML.
	if _, _, err := reviewCodecs.UniversalDeserializer().Decode(body, nil, v); err != nil {
		writeStatus(c, http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Sprintf("the body is not a %s: %v", kind, err), nil)
		return false
	}
	return true
}

// reviewCodecs decode the self reviews in every encoding kube-apiserver accepts.
var reviewCodecs = func() serializer.CodecFactory {
	sch := runtime.NewScheme()
	utilruntime.Must(authorizationv1.AddToScheme(sch))
	utilruntime.Must(authenticationv1.AddToScheme(sch))
	return serializer.NewCodecFactory(sch)
}()

func invalidReview(c *gin.Context, kind, field, msg string) {
	st := newStatus(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, fmt.Sprintf("%s is invalid: %s: %s", kind, field, msg))
	st.Details = &metav1.StatusDetails{Group: authorizationv1.GroupName, Kind: kind,
		Causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Field: field, Message: msg}}}
	writeStatusObject(c, st)
}

// selfSubjectAccessReview answers `kubectl auth can-i VERB RESOURCE`: in a one-cluster view about
// that member, in the fleet views about any member (as a fleet LIST is allowed when the subject may
// see something of the resource somewhere).
func (s *Server) selfSubjectAccessReview(c *gin.Context, r *facadeRequest) {
	const kind = "SelfSubjectAccessReview"
	var rev authorizationv1.SelfSubjectAccessReview
	if !readReview(c, &rev, kind) {
		return
	}
	ra, na := rev.Spec.ResourceAttributes, rev.Spec.NonResourceAttributes
	if (ra == nil) == (na == nil) {
		invalidReview(c, kind, "spec", "exactly one of resourceAttributes and nonResourceAttributes must be set")
		return
	}
	subj := subjectOf(c)
	var st authorizationv1.SubjectAccessReviewStatus
	switch {
	case na != nil && !slices.Contains(readVerbs, na.Verb):
		st.Denied, st.Reason = true, readOnlyReason
	case na != nil:
		st.Allowed = publicPath(na.Path) || subj.mayGetURL(na.Path)
	case !slices.Contains(readVerbs, ra.Verb):
		st.Denied, st.Reason = true, readOnlyReason
	case ra.Subresource != "":
		st.Reason = fmt.Sprintf("subresources (%s) are not cached: ask the member", ra.Subresource)
	default:
		cluster, ns := authz.Any, ra.Namespace
		if r.cluster != "" {
			cluster = r.cluster
		}
		if ns == "" {
			ns = authz.Any // every namespace
			if !s.namespaced(r.cluster, ra.Group, ra.Resource, subj.visible()) {
				ns = "" // as a request for a cluster-scoped resource is authorized
			}
		}
		st.Allowed = subj.allowed(ra.Verb, cluster, ns, ra.Group, ra.Resource)
		if err := subj.reviewErr(); err != nil {
			st.Allowed, st.EvaluationError = false, err.Error()
		}
	}
	rev.Status = st
	rev.APIVersion, rev.Kind = authorizationv1.SchemeGroupVersion.String(), kind
	c.JSON(http.StatusCreated, &rev)
}

// namespaced says whether a resource of the view is namespaced; true when the view does not cache
// it (the answer is then the policy's for every namespace).
func (s *Server) namespaced(cluster, group, resource string, vis visibleFunc) bool {
	for _, res := range s.catalog.resources(cluster, vis) {
		if res.Group == group && res.Resource == resource {
			return res.Namespaced
		}
	}
	return true
}

// publicPath says whether every authenticated subject may get a non-resource path of the facade:
// discovery, OpenAPI, version and health, which every client reads first.
func publicPath(p string) bool {
	for _, pre := range []string{"/api", "/apis", "/openapi", "/version", "/healthz", "/livez", "/readyz"} {
		if p == pre || strings.HasPrefix(p, pre+"/") {
			return true
		}
	}
	return false
}

// selfSubjectRulesReview answers `kubectl auth can-i --list`: per resource of the view the subject
// may see something of, the read verbs it may use in the namespace asked.
func (s *Server) selfSubjectRulesReview(c *gin.Context, r *facadeRequest) {
	const kind = "SelfSubjectRulesReview"
	var rev authorizationv1.SelfSubjectRulesReview
	if !readReview(c, &rev, kind) {
		return
	}
	subj := subjectOf(c)
	cluster, ns := authz.Any, rev.Spec.Namespace
	if r.cluster != "" {
		cluster = r.cluster
	}
	var st authorizationv1.SubjectRulesReviewStatus
	for _, res := range s.catalog.resources(r.cluster, subj.visible()) {
		rns := ns
		if !res.Namespaced {
			rns = ""
		} else if rns == "" {
			rns = authz.Any
		}
		var verbs []string
		for _, v := range readVerbs {
			if subj.allowed(v, cluster, rns, res.Group, res.Resource) {
				verbs = append(verbs, v)
			}
		}
		if len(verbs) > 0 {
			st.ResourceRules = append(st.ResourceRules, authorizationv1.ResourceRule{Verbs: verbs,
				APIGroups: []string{res.Group}, Resources: []string{res.Resource}})
		}
	}
	urls := []string{"/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*", "/version", "/healthz", "/livez", "/readyz"}
	if subj.mayGetURL("/metrics") {
		urls = append(urls, "/metrics")
	}
	st.NonResourceRules = []authorizationv1.NonResourceRule{{Verbs: []string{authz.VerbGet}, NonResourceURLs: urls}}
	if err := subj.reviewErr(); err != nil {
		st.Incomplete, st.EvaluationError = true, err.Error()
	}
	rev.Status = st
	rev.APIVersion, rev.Kind = authorizationv1.SchemeGroupVersion.String(), kind
	c.JSON(http.StatusCreated, &rev)
}

// selfSubjectReview answers `kubectl auth whoami`: the user the request authenticated as.
func (s *Server) selfSubjectReview(c *gin.Context, _ *facadeRequest) {
	const kind = "SelfSubjectReview"
	var rev authenticationv1.SelfSubjectReview
	if !readReview(c, &rev, kind) {
		return
	}
	u := subjectOf(c).user
	rev.Status.UserInfo = authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups}
	rev.APIVersion, rev.Kind = authenticationv1.SchemeGroupVersion.String(), kind
	c.JSON(http.StatusCreated, &rev)
}
