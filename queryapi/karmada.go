package queryapi

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/kubesearch/kubesearch/internal/query"
)

// Karmada's search API (search.karmada.io/v1alpha1), the paths karmada-search serves behind the
// Karmada control plane's aggregation layer, so that Karmada's clients switch to kubesearch
// without changing a URL:
//   - .../proxying/<name>/proxy/<path>: the fleet view, mounted under that prefix (the same
//     handlers, authorization and answers: the fleet's multi-cluster resourceVersion, opaque to
//     clients as Karmada's is, 409 for a name in several clusters, the
//     resource.karmada.io/cached-from-cluster annotation);
//   - .../search/cache/<path>: lists of the fleet's cached objects, as Karmada's cache search
//     answers them (a name too: every member's object of that name, never a 409);
//   - discovery of the group, which the aggregation layer checks before it routes to a server.
//
// ResourceRegistry objects are served only with --karmada-kubeconfig, forwarded to the control
// plane storing them (registries.go); without it, kubesearch reads them from its registry files.

// KarmadaGroup and KarmadaVersion are Karmada's search API group and its version.
const (
	KarmadaGroup   = "search.karmada.io"
	KarmadaVersion = "v1alpha1"
)

const (
	karmadaGroupPath   = "/apis/" + KarmadaGroup
	karmadaVersionPath = karmadaGroupPath + "/" + KarmadaVersion
	// KarmadaProxyPath is the fleet view as Karmada's clients reach it (Karmada's docs name the
	// proxy "karmada"; karmada-search ignores the name, and so does kubesearch).
	KarmadaProxyPath = karmadaVersionPath + "/proxying/karmada/proxy"
	// KarmadaCachePath is Karmada's cache search.
	KarmadaCachePath = karmadaVersionPath + "/search/cache"
	// karmadaRegistriesPath is Karmada's ResourceRegistry objects (registries.go).
	karmadaRegistriesPath = karmadaVersionPath + "/resourceregistries"
)

// karmadaPath is which of Karmada's paths a request is.
type karmadaPath int

const (
	karmadaNone         karmadaPath = iota
	karmadaGroupDoc                 // /apis/search.karmada.io: the APIGroup
	karmadaResourceList             // /apis/search.karmada.io/v1alpha1: the APIResourceList
	karmadaCache                    // .../search/cache/<path>
	karmadaRegistries               // .../resourceregistries[/<name>[/<subresource>]] (registries.go)
)

// parseKarmadaPath reads a path under /apis/search.karmada.io. What karmada-search serves and
// kubesearch does not is a 404 Status saying so.
func parseKarmadaPath(p string) (*facadeRequest, *metav1.Status) {
	notServed := func(msg string) (*facadeRequest, *metav1.Status) {
		return nil, newStatus(http.StatusNotFound, metav1.StatusReasonNotFound, msg)
	}
	rest := strings.TrimPrefix(p, karmadaGroupPath)
	if strings.Trim(rest, "/") == "" {
		return &facadeRequest{path: p, karmada: karmadaGroupDoc}, nil
	}
	rest, ok := strings.CutPrefix(rest, "/"+KarmadaVersion)
	if !ok || (rest != "" && rest[0] != '/') {
		return notServed(fmt.Sprintf("%s: kubesearch serves %s (the proxy and the cache search) only", p, karmadaVersionPath))
	}
	if strings.Trim(rest, "/") == "" {
		return &facadeRequest{path: p, karmada: karmadaResourceList}, nil
	}
	parts := strings.SplitN(strings.TrimPrefix(rest, "/"), "/", 4)
	switch {
	case parts[0] == "proxying" && len(parts) >= 3 && parts[1] != "" && parts[2] == "proxy":
		mount := karmadaVersionPath + "/proxying/" + parts[1] + "/proxy"
		inner := "/"
		if len(parts) == 4 {
			inner += parts[3]
		}
		return parseKubePath(&facadeRequest{view: view{mount: mount}}, inner)
	case parts[0] == "search" && len(parts) >= 2 && parts[1] == "cache":
		inner := "/"
		if len(parts) >= 3 {
			inner += strings.Join(parts[2:], "/")
		}
		r, st := parseKubePath(&facadeRequest{}, inner)
		if st != nil {
			return nil, st
		}
		if r.resource == "" || r.sub != "" {
			// As karmada-search: the cache search answers resource requests only.
			return notServed(fmt.Sprintf("%s: the cache search serves resources (%s/api/v1/pods, %s/apis/apps/v1/namespaces/<namespace>/deployments/<name>); discovery is under %s",
				p, KarmadaCachePath, KarmadaCachePath, KarmadaProxyPath))
		}
		r.karmada = karmadaCache
		return r, nil
	case parts[0] == "search":
		return notServed(fmt.Sprintf("%s: kubesearch serves Karmada's cache search (%s/...) and its own REST search (%s), not Karmada's other search backends", p, KarmadaCachePath, PathSearch))
	case parts[0] == "resourceregistries":
		// Served or not, and how the rest reads, is serveRegistries' to say: only it knows
		// whether the query API has a control plane storing them.
		return &facadeRequest{path: p, karmada: karmadaRegistries}, nil
	}
	return notServed(fmt.Sprintf("%s: not a path of Karmada's search API that kubesearch serves (%s/<path>, %s/<path>)", p, KarmadaProxyPath, KarmadaCachePath))
}

// serveKarmada answers the discovery of Karmada's group and its cache search.
func (s *Server) serveKarmada(c *gin.Context, r *facadeRequest) {
	switch r.karmada {
	case karmadaGroupDoc:
		c.JSON(http.StatusOK, karmadaAPIGroup())
	case karmadaResourceList:
		c.JSON(http.StatusOK, karmadaResources(s.registries != nil))
	case karmadaCache:
		s.cacheSearch(c, r)
	case karmadaRegistries:
		s.serveRegistries(c, r)
	}
}

// cacheSearch answers Karmada's cache search: the fleet view's LIST, and for a name the LIST of
// that name, so each member's object of the name is an item (karmada-search answers a name so;
// its proxy, like the facade, answers 409).
func (s *Server) cacheSearch(c *gin.Context, r *facadeRequest) {
	params := c.Request.URL.Query()
	if boolParam(params.Get(paramWatch)) {
		st := newStatus(http.StatusBadRequest, metav1.StatusReasonBadRequest,
			fmt.Sprintf("watch: the cache search answers lists; watch through %s%s", KarmadaProxyPath, r.path))
		st.Details = &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueNotSupported, Field: paramWatch, Message: "not supported by the cache search"}}}
		writeStatusObject(c, st)
		return
	}
	if r.name != "" {
		sel := fields.OneTermEqualSelector("metadata.name", r.name).String()
		if fs := params.Get(query.ParamFieldSelector); fs != "" {
			sel = fs + "," + sel
		}
		params.Set(query.ParamFieldSelector, sel)
		c.Request.URL.RawQuery = params.Encode()
		r.name = ""
	}
	s.serveResource(c, r)
}

// karmadaResources is the group version's APIResourceList as karmada-search lists it: proxying
// and search take requests below them (Kubernetes lists no verbs for such resources), and
// resourceregistries is named so that clients looking for the kind find the group. Its verbs are
// listed only when the query API serves those objects (registries): a control plane's garbage
// collector and quota controllers list and watch every resource whose verbs say they can.
func karmadaResources(registries bool) *metav1.APIResourceList {
	rr := metav1.APIResource{Name: "resourceregistries", SingularName: "resourceregistry", Kind: "ResourceRegistry", Verbs: metav1.Verbs{}}
	resources := []metav1.APIResource{{Name: "proxying", SingularName: "proxying", Kind: "Proxying", Verbs: metav1.Verbs{}}, rr}
	if registries {
		resources[1].Verbs = registryVerbs
		resources = append(resources, metav1.APIResource{Name: "resourceregistries/status", Kind: "ResourceRegistry", Verbs: registryStatusVerbs})
	}
	resources = append(resources, metav1.APIResource{Name: "search", SingularName: "search", Kind: "Search", Verbs: metav1.Verbs{}})
	return &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: KarmadaGroup + "/" + KarmadaVersion,
		APIResources: resources,
	}
}

// The verbs of served ResourceRegistry objects and of their status, as kube-apiserver lists a
// CRD's with a status subresource.
var (
	registryVerbs       = metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	registryStatusVerbs = metav1.Verbs{"get", "patch", "update"}
)

// karmadaAPIGroup is the group as /apis and /apis/search.karmada.io list it.
func karmadaAPIGroup() metav1.APIGroup {
	gv := metav1.GroupVersionForDiscovery{GroupVersion: KarmadaGroup + "/" + KarmadaVersion, Version: KarmadaVersion}
	return metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}, Name: KarmadaGroup,
		Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv}
}

// karmadaDiscovery is the group in aggregated discovery (apidiscovery.k8s.io/v2), which the
// aggregation layer reads from /apis to merge into the control plane's own.
func karmadaDiscovery(registries bool) apidiscoveryv2.APIGroupDiscovery {
	vd := apidiscoveryv2.APIVersionDiscovery{Version: KarmadaVersion, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
	for _, r := range karmadaResources(registries).APIResources {
		kind := &metav1.GroupVersionKind{Group: KarmadaGroup, Version: KarmadaVersion, Kind: r.Kind}
		if parent, sub, ok := strings.Cut(r.Name, "/"); ok {
			// Aggregated discovery lists a subresource under its resource.
			i := len(vd.Resources) - 1
			if i < 0 || vd.Resources[i].Resource != parent {
				continue
			}
			vd.Resources[i].Subresources = append(vd.Resources[i].Subresources, apidiscoveryv2.APISubresourceDiscovery{
				Subresource: sub, ResponseKind: kind, Verbs: r.Verbs})
			continue
		}
		vd.Resources = append(vd.Resources, apidiscoveryv2.APIResourceDiscovery{
			Resource: r.Name, SingularResource: r.SingularName, Scope: apidiscoveryv2.ScopeCluster, Verbs: r.Verbs,
			ResponseKind: kind,
		})
	}
	return apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: KarmadaGroup},
		Versions: []apidiscoveryv2.APIVersionDiscovery{vd}}
}
