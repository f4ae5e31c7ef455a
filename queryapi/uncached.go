package queryapi

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/kubesearch/kubesearch/internal/authz"
	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/table"
)

// A LIST of a Kubernetes built-in resource that the view does not cache. Discovery lists only what
// is cached, so kubectl get and informers never ask for one; but tools with typed clients list
// fixed kinds without asking discovery, and stop at the first error: kubectl cluster-info dump
// lists nodes, then events, replicationcontrollers, services, daemonsets, deployments,
// replicasets and pods of every namespace, and a 404 for the first kind a registry does not
// select ended the whole dump. Such a LIST answers an empty list with a Warning saying that
// nothing is collected (kubectl prints it), which is what the index holds; a GET or WATCH of it
// stays a 404, and a kind Kubernetes does not define (a CRD no member of the view caches) too:
// the facade cannot tell that one exists. Namespaces are the exception: a LIST of uncached
// Namespaces answers the namespaces that hold cached objects (as a GET of one does,
// impliedNamespace), which is what cluster-info dump --all-namespaces walks.

// builtinResource is a list resource every Kubernetes cluster serves.
type builtinResource struct {
	group, version, resource, kind string
	namespaced                     bool
}

// builtinResources are the built-in resources an uncached LIST answers empty: the core group's,
// apps', batch's and events.k8s.io's, the kinds cluster-level tools list by fixed names.
var builtinResources = func() map[[3]string]builtinResource {
	out := map[[3]string]builtinResource{}
	add := func(group, version string, namespaced bool, pairs ...string) {
		for i := 0; i < len(pairs); i += 2 {
			out[[3]string{group, version, pairs[i]}] = builtinResource{group, version, pairs[i], pairs[i+1], namespaced}
		}
	}
	add("", "v1", true, "pods", "Pod", "services", "Service", "endpoints", "Endpoints", "configmaps", "ConfigMap",
		"secrets", "Secret", "serviceaccounts", "ServiceAccount", "persistentvolumeclaims", "PersistentVolumeClaim",
		"events", "Event", "replicationcontrollers", "ReplicationController", "limitranges", "LimitRange",
		"resourcequotas", "ResourceQuota", "podtemplates", "PodTemplate")
	add("", "v1", false, "nodes", "Node", "namespaces", "Namespace", "persistentvolumes", "PersistentVolume")
	add("apps", "v1", true, "deployments", "Deployment", "replicasets", "ReplicaSet", "statefulsets", "StatefulSet",
		"daemonsets", "DaemonSet", "controllerrevisions", "ControllerRevision")
	add("batch", "v1", true, "jobs", "Job", "cronjobs", "CronJob")
	add(eventsGroup, "v1", true, "events", "Event")
	return out
}()

// uncachedList answers a LIST of a built-in resource the view does not cache, and reports whether
// the request was one.
func (s *Server) uncachedList(c *gin.Context, r *facadeRequest) bool {
	b, ok := builtinResources[[3]string{r.group, r.version, r.resource}]
	if !ok || r.name != "" || r.sub != "" || (r.namespace != "" && !b.namespaced) || boolParam(c.Query(paramWatch)) ||
		!s.catalog.isSynced() { // before the ledger is read, "not cached" is not known yet
		return false
	}
	res := apiResource{Group: b.group, Version: b.version, Resource: b.resource, Kind: b.kind, Namespaced: b.namespaced}
	out, st := newRenderer(c.GetHeader("Accept"), c.Query(paramIncludeObject), res, r.view)
	if st != nil {
		writeStatusObject(c, st)
		return true
	}
	out.table = table.For(b.group, b.resource)
	sel := url.Values{}
	for _, p := range []string{query.ParamLabelSelector, query.ParamFieldSelector} {
		if x := c.Query(p); x != "" {
			sel.Set(p, x)
		}
	}
	q, err := query.Parse(sel, time.Now())
	if err != nil {
		writeParamErrors(c, err)
		return true
	}
	var items [][]byte
	if b.group == "" && b.resource == "namespaces" {
		names, truncated, ok := s.impliedNamespaces(c, r)
		if !ok {
			return true
		}
		for _, ns := range names {
			obj := fmt.Appendf(nil, `{"kind":"Namespace","apiVersion":"v1","metadata":{"name":%q},"spec":{"finalizers":["kubernetes"]},"status":{"phase":"Active"}}`, ns)
			if matches(q, obj) {
				items = append(items, obj)
			}
		}
		msg := "kubesearch caches no namespaces in this view (no registry selects them): these are the namespaces holding cached objects"
		if truncated {
			msg += fmt.Sprintf(", the first %d", query.MaxFacetSize)
		}
		c.Writer.Header().Add("Warning", warningHeader(msg))
	} else {
		c.Writer.Header().Add("Warning", warningHeader(fmt.Sprintf(
			"kubesearch caches no %s in this view (no registry selects them): this list is empty because nothing is collected, not because the members have none; ask the member clusters",
			groupResource(res))))
	}
	var buf bytes.Buffer
	out.listHead(&buf, rvVector{}.encode(r.view), "", 0)
	now := time.Now()
	for i, it := range items {
		if err := out.row(&buf, it, it, i == 0, now); err != nil {
			s.writeStoreError(c, err)
			return true
		}
	}
	buf.WriteString("]}")
	c.Data(http.StatusOK, "application/json", buf.Bytes())
	return true
}

// impliedNamespaces are the namespaces of the view holding cached objects the subject may list,
// sorted, at most MaxFacetSize (truncated says there were more).
func (s *Server) impliedNamespaces(c *gin.Context, r *facadeRequest) (names []string, truncated, ok bool) {
	q := &query.Query{Limit: 1, MetadataOnly: true, Peek: true, Now: time.Now(),
		Facets: []query.Facet{{Dimension: query.FacetNamespace, Size: query.MaxFacetSize}}}
	if r.cluster != "" {
		q.Clusters = []string{r.cluster}
	}
	subjectOf(c).restrict(q, authz.VerbList)
	found, ok := s.searchOrFail(c, q)
	if !ok {
		return nil, false, false
	}
	for _, f := range found.Facets {
		for _, b := range f.Buckets {
			if b.Value != "" {
				names = append(names, b.Value)
			}
		}
		truncated = truncated || f.Other > 0
	}
	slices.Sort(names)
	return names, truncated, true
}
