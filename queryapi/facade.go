package queryapi

import (
	"fmt"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/gin-gonic/gin/render"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/version"
)

// The Kubernetes facade (DESIGN section 5) serves the cached resources the way kube-apiserver
// serves its own, read-only (the one exception, Karmada's resourceregistries, is registries.go's),
// in three views:
//   - the fleet at the root (/api, /apis, /version): every member at once;
//   - one member under /clusters/<name>/: its objects as the member has them;
//   - the qualified fleet under /qualified/: every object named "<name>_<cluster>", so a client
//     keying objects by namespace/name never merges two members' objects.

// Prefixes of the one-cluster and qualified views.
const (
	ClustersPrefix  = "/clusters/"
	QualifiedPrefix = "/qualified"
)

// qualifiedSeparator joins name and cluster in the qualified view: not a DNS character, so
// "<name>_<cluster>" never is a real object's name.
const qualifiedSeparator = "_"

// view is one of the facade's three views.
type view struct {
	cluster   string // the one-cluster view's member; "" for the fleet views
	qualified bool
	// mount is the path the view is served under besides its own prefix: "" at the root,
	// Karmada's proxy path for the fleet view that Karmada's clients reach (karmada.go).
	mount string
}

// vector says whether resourceVersions are multi-cluster vectors in the view: the fleet views have
// no single resourceVersion sequence.
func (v view) vector() bool { return v.cluster == "" }

// facadeRequest is what a facade path asks for, as kube-apiserver's RequestInfo reads it.
type facadeRequest struct {
	view
	// path is the request's path within the view: /api/v1/namespaces/shop/pods.
	path string
	// Discovery and resource paths: group "" with legacy for /api.
	legacy                         bool
	group, version                 string
	namespace, resource, name, sub string
	// openAPI is what follows /openapi/ ("v3", "v3/apis/apps/v1"); "" for any other path.
	openAPI string
	// karmada is which of Karmada's search API paths this is (karmada.go); karmadaNone for the
	// facade's own paths and for the proxy, which is the fleet view mounted elsewhere.
	karmada karmadaPath
}

func (s *Server) facadeRoutes(e *gin.Engine) {
	for _, p := range []string{"/version", "/api", "/api/*path", "/apis", "/apis/*path", "/openapi/*path",
		ClustersPrefix + ":cluster/*path", QualifiedPrefix + "/*path"} {
		e.Any(p, s.facade)
	}
}

// facade serves every facade path: parses the view and the path, refuses writes, and dispatches.
func (s *Server) facade(c *gin.Context) {
	r, errStatus := parseFacadePath(c.Request.URL.Path)
	if errStatus != nil {
		writeStatusObject(c, errStatus)
		return
	}
	if r.karmada == karmadaRegistries {
		// The one path that may take writes, and only as the control plane's aggregation layer
		// allows them (registries.go): dispatched before the read-only refusal below, by the
		// parsed path alone.
		s.serveRegistries(c, r)
		return
	}
	review := s.selfReview(r)
	if c.Request.Method == http.MethodPost && review != nil {
		review(c, r)
		return
	}
	// A subresource (exec, attach, portforward, log, eviction) is not served whatever the method:
	// kubectl exec falls back from a WebSocket GET to a SPDY POST, and the second answer must be
	// the first's "not served, ask the member", not the write refusal.
	if c.Request.Method != http.MethodGet && c.Request.Method != http.MethodHead && r.sub == "" {
		writeStatus(c, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
			fmt.Sprintf("%s is not allowed: kubesearch serves a read-only copy of the fleet; change objects in their member cluster", c.Request.Method), nil)
		return
	}
	subj := subjectOf(c)
	// A cluster the subject may not see at all is a 403 whether or not it exists; the clusters
	// named in a 404 are those the subject sees.
	if r.cluster != "" && !subj.seesCluster(r.cluster) {
		forbidden(c, subj, "clusters", "access", fmt.Sprintf("cluster %q", r.cluster))
		return
	}
	if r.cluster != "" && !slices.Contains(s.catalog.clusters(), r.cluster) {
		writeStatus(c, http.StatusNotFound, metav1.StatusReasonNotFound,
			fmt.Sprintf("cluster %q has nothing cached in kubesearch; known clusters: %s", r.cluster, strings.Join(s.visibleClusters(subj), ", ")), nil)
		return
	}
	switch {
	case r.karmada != karmadaNone:
		s.serveKarmada(c, r)
	case r.path == "/version":
		c.JSON(http.StatusOK, versionInfo())
	case r.openAPI != "":
		s.serveOpenAPI(c, r)
	case r.legacy && r.version == "":
		s.discoverRoot(c, r, true)
	case !r.legacy && r.group == "":
		s.discoverRoot(c, r, false)
	case r.version == "":
		s.discoverGroup(c, r)
	case r.resource == "":
		s.discoverGroupVersion(c, r)
	default:
		s.serveResource(c, r)
	}
}

// parseFacadePath reads a facade path. A path outside the facade's grammar is a 404 Status.
func parseFacadePath(p string) (*facadeRequest, *metav1.Status) {
	if p == karmadaGroupPath || strings.HasPrefix(p, karmadaGroupPath+"/") {
		return parseKarmadaPath(p)
	}
	r := &facadeRequest{}
	switch {
	case strings.HasPrefix(p, ClustersPrefix):
		rest := strings.TrimPrefix(p, ClustersPrefix)
		name, inner, _ := strings.Cut(rest, "/")
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return nil, newStatus(http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("cluster name %q: %s", name, strings.Join(errs, "; ")))
		}
		r.cluster, p = name, "/"+inner
	case p == QualifiedPrefix || strings.HasPrefix(p, QualifiedPrefix+"/"):
		r.qualified, p = true, strings.TrimPrefix(p, QualifiedPrefix)
	}
	return parseKubePath(r, p)
}

// parseKubePath reads p, a path within r's view, as kube-apiserver's grammar has it.
func parseKubePath(r *facadeRequest, p string) (*facadeRequest, *metav1.Status) {
	r.path = p
	parts := strings.Split(strings.Trim(p, "/"), "/")
	notFound := newStatus(http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource")
	switch parts[0] {
	case "version":
		if len(parts) != 1 {
			return nil, notFound
		}
		r.path = "/version"
		return r, nil
	case "openapi":
		r.openAPI = strings.Join(parts[1:], "/")
		if r.openAPI == "" {
			return nil, notFound
		}
		return r, nil
	case "api":
		r.legacy = true
		parts = parts[1:]
		if len(parts) > 0 {
			r.version, parts = parts[0], parts[1:]
		}
	case "apis":
		parts = parts[1:]
		if len(parts) > 0 {
			r.group, parts = parts[0], parts[1:]
		}
		if len(parts) > 0 {
			r.version, parts = parts[0], parts[1:]
		}
	default:
		return nil, notFound
	}
	if len(parts) > 0 && parts[0] == "" {
		parts = parts[1:] // a trailing slash
	}
	// namespaces/<ns>/<resource>... is a namespaced resource; namespaces and namespaces/<ns> are
	// the namespaces themselves.
	if len(parts) >= 3 && parts[0] == "namespaces" {
		r.namespace, parts = parts[1], parts[2:]
	}
	switch len(parts) {
	case 0:
	case 1:
		r.resource = parts[0]
	case 2:
		r.resource, r.name = parts[0], parts[1]
	case 3:
		r.resource, r.name, r.sub = parts[0], parts[1], parts[2]
	default:
		return nil, notFound
	}
	return r, nil
}

// resources is the catalog of a view as a subject discovers it: only the resources it may see
// something of, their versions, short names and categories from the members it sees.
func (s *Server) resources(c *gin.Context, r *facadeRequest) []apiResource {
	return s.catalog.resources(r.cluster, subjectOf(c).visible())
}

func (s *Server) discoverRoot(c *gin.Context, r *facadeRequest, legacy bool) {
	rs := s.resources(c, r)
	// Karmada's group is the root's only: an aggregation layer and kubectl find it there, and it
	// holds no member's resources.
	karmada := !legacy && r.view == view{} && !slices.ContainsFunc(rs, func(x apiResource) bool { return x.Group == KarmadaGroup })
	if acceptsAggregated(c.GetHeader("Accept")) {
		c.Header("Vary", "Accept")
		body := aggregated(rs, legacy)
		if karmada {
			body.Items = append(body.Items, karmadaDiscovery(s.registries != nil))
		}
		c.Render(http.StatusOK, jsonAs{contentType: aggregatedContentType, obj: body})
		return
	}
	if legacy {
		versions := &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: c.Request.Host}}}
		c.JSON(http.StatusOK, versions)
		return
	}
	groups := groupList(rs)
	if karmada {
		groups.Groups = append(groups.Groups, karmadaAPIGroup())
	}
	c.JSON(http.StatusOK, groups)
}

func (s *Server) discoverGroup(c *gin.Context, r *facadeRequest) {
	for _, g := range groupsOf(s.resources(c, r)) {
		if g.name == r.group && !r.legacy {
			c.JSON(http.StatusOK, apiGroupOf(g))
			return
		}
	}
	writeStatusObject(c, newStatus(http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource"))
}

func (s *Server) discoverGroupVersion(c *gin.Context, r *facadeRequest) {
	gv := r.version
	if !r.legacy {
		gv = r.group + "/" + r.version
	}
	rs := s.resources(c, r)
	list := resourceList(rs, gv)
	if len(list.APIResources) == 0 && !(r.legacy && r.version == "v1") {
		writeStatusObject(c, newStatus(http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource"))
		return
	}
	c.JSON(http.StatusOK, list)
}

// aggregatedContentType is the media type of aggregated discovery, which clients check on the
// answer to tell it from the legacy form.
const aggregatedContentType = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

// acceptsAggregated says whether an Accept header asks for aggregated discovery v2.
func acceptsAggregated(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		mt := mediaParams(part)
		if mt.typ == "application/json" && mt.params["g"] == apidiscoveryv2.SchemeGroupVersion.Group &&
			mt.params["v"] == "v2" && mt.params["as"] == "APIGroupDiscoveryList" {
			return true
		}
	}
	return false
}

// mediaType is one entry of an Accept header.
type mediaType struct {
	typ    string
	params map[string]string
}

func mediaParams(s string) mediaType {
	fields := strings.Split(s, ";")
	mt := mediaType{typ: strings.ToLower(strings.TrimSpace(fields[0])), params: map[string]string{}}
	for _, f := range fields[1:] {
		k, v, _ := strings.Cut(strings.TrimSpace(f), "=")
		mt.params[strings.ToLower(k)] = strings.Trim(v, `"`)
	}
	return mt
}

// versionInfo is /version: the Kubernetes version of the API kubesearch speaks (its client
// libraries), marked as kubesearch's.
func versionInfo() version.Info {
	info := version.Info{Major: "1", Minor: "37", GitVersion: "v1.37.0+kubesearch", Platform: "kubesearch"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		info.GoVersion = bi.GoVersion
		for _, d := range bi.Deps {
			if d.Path == "k8s.io/apimachinery" {
				// v0.37.2 → 1.37: the API version is the libraries'.
				v := strings.TrimPrefix(d.Version, "v0.")
				if minor, patch, ok := strings.Cut(v, "."); ok {
					info.Minor, info.GitVersion = minor, "v1."+minor+"."+patch+"+kubesearch"
				}
			}
		}
	}
	return info
}

// jsonAs renders JSON under another content type.
type jsonAs struct {
	contentType string
	obj         any
}

func (j jsonAs) Render(w http.ResponseWriter) error {
	j.WriteContentType(w)
	return render.JSON{Data: j.obj}.Render(w)
}

func (j jsonAs) WriteContentType(w http.ResponseWriter) {
	w.Header().Set("Content-Type", j.contentType)
}

func newStatus(code int, reason metav1.StatusReason, msg string) *metav1.Status {
	return &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Message: msg, Reason: reason, Code: int32(code),
	}
}

func writeStatusObject(c *gin.Context, st *metav1.Status) { c.JSON(int(st.Code), st) }
