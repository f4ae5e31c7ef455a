package queryapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/tidwall/gjson"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubesearch/kubesearch/internal/authz"
	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/lifecycle"
	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/store"
)

// Parameters of Kubernetes list and get requests the facade reads. Others (pretty, timeoutSeconds)
// are accepted and ignored, as kube-apiserver ignores what it does not know.
const (
	paramWatch                = "watch"
	paramResourceVersion      = "resourceVersion"
	paramResourceVersionMatch = "resourceVersionMatch"
	paramIncludeObject        = "includeObject"
)

// serveResource answers a GET or LIST of a cached resource.
func (s *Server) serveResource(c *gin.Context, r *facadeRequest) {
	params := c.Request.URL.Query()
	// Authorized before anything is looked at: the answer must not depend on what exists.
	verb := requestVerb(r, params)
	subj := subjectOf(c)
	res, ok := s.catalog.lookup(r.cluster, r.group, r.version, r.resource, subj.visible())
	if !subj.allowed(verb, r.authzCluster(), r.authzNamespace(!ok || res.Namespaced), r.group, r.resource) {
		forbidden(c, subj, r.resource, verb, resourceWhat(r.cluster, r.namespace, r.group, r.resource))
		return
	}
	if !ok && r.legacy && r.version == "v1" && r.resource == "namespaces" && r.name != "" && r.sub == "" {
		s.impliedNamespace(c, r)
		return
	}
	if !ok && s.uncachedList(c, r) {
		return
	}
	// A namespaced object is named within its namespace: /api/v1/pods/<name> names none, as
	// kube-apiserver answers.
	if !ok || (r.namespace != "" && !res.Namespaced) || (res.Namespaced && r.namespace == "" && r.name != "") {
		writeStatusObject(c, newStatus(http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource"))
		return
	}
	if r.sub != "" {
		writeStatusObject(c, newStatus(http.StatusNotFound, metav1.StatusReasonNotFound,
			fmt.Sprintf("%s %q: subresource %q is not served: kubesearch caches objects, not their subresources; ask the member cluster", res.Resource, r.name, r.sub)))
		return
	}
	out, st := newRenderer(c.GetHeader("Accept"), params.Get(paramIncludeObject), res, r.view)
	if st != nil {
		writeStatusObject(c, st)
		return
	}
	if out.shape == shapeTable {
		ctx, cancel := context.WithTimeout(c.Request.Context(), s.opts.RequestTimeout)
		p, err := s.printerFor(ctx, res, s.viewClusters(subj, verb, r, res))
		cancel()
		if err != nil {
			s.writeStoreError(c, err)
			return
		}
		out.table = p
	}
	switch {
	case boolParam(params.Get(paramWatch)):
		s.watch(c, r, res, out, params)
	case r.name != "":
		s.get(c, r, res, out)
	default:
		s.list(c, r, res, out, params)
	}
}

// requestVerb is the Kubernetes verb of a resource request.
func requestVerb(r *facadeRequest, params url.Values) string {
	switch {
	case boolParam(params.Get(paramWatch)):
		return authz.VerbWatch
	case r.name != "":
		return authz.VerbGet
	}
	return authz.VerbList
}

// impliedNamespace answers a GET of a namespace when namespaces are not cached: it exists in the
// view when cached objects are in it. kubectl asks for the namespace after a namespaced GET found
// nothing, and reports the namespace missing when that GET is a 404 too; answering 404 for every
// uncached namespace would turn each "pods "x" not found" into "namespaces "shop" not found".
func (s *Server) impliedNamespace(c *gin.Context, r *facadeRequest) {
	q := &query.Query{Namespaces: []string{r.name}, Limit: 1, MetadataOnly: true}
	if r.cluster != "" {
		q.Clusters = []string{r.cluster}
	}
	subjectOf(c).restrict(q, authz.VerbGet)
	found, ok := s.searchOrFail(c, q)
	if !ok {
		return
	}
	if len(found.Items) == 0 {
		st := newStatus(http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("namespaces %q not found", r.name))
		st.Details = &metav1.StatusDetails{Name: r.name, Kind: "namespaces"}
		writeStatusObject(c, st)
		return
	}
	c.JSON(http.StatusOK, map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": r.name}, "status": map[string]any{"phase": "Active"}})
}

// baseQuery selects a resource's objects in a request's view and namespace: in clusters, those of
// the view that collect the resource in the requested version (the index holds each member's
// objects in the version it collected) and that the subject may use verb on (viewClusters).
func (s *Server) baseQuery(c *gin.Context, r *facadeRequest, res apiResource, sel url.Values, verb string, clusters []string) (*query.Query, error) {
	v := url.Values{}
	for _, p := range []string{query.ParamLabelSelector, query.ParamFieldSelector} {
		if x := sel.Get(p); x != "" {
			v.Set(p, x)
		}
	}
	q, err := query.Parse(v, time.Now())
	if err != nil {
		return nil, err
	}
	subj := subjectOf(c)
	if err := s.checkFields(res, r.cluster, subj.visible(), q.Fields); err != nil {
		return nil, err
	}
	for i := range q.Fields {
		q.Fields[i].Key = fieldLabelPath(res.Group, res.Resource, q.Fields[i].Key)
	}
	// The subject is authorized for the resource it asked for; storedQuery then reads its
	// documents where they are (Events of the other group, events.go).
	q.Resources = []query.Resource{{Resource: res.Resource, Group: res.Group}}
	if r.namespace != "" {
		q.Namespaces = []string{r.namespace}
	}
	subj.restrictView(q, verb, clusters)
	res.storedQuery(q)
	if r.qualified {
		unqualifyFields(q, referencesOf(res.storeGroup(), res.Resource))
	}
	// kube-apiserver lists in key order, namespace then name; across members the cluster breaks
	// the tie, so one name's copies are listed side by side.
	q.Sort = []query.Sort{{Field: query.SortNamespace}, {Field: query.SortName}, {Field: query.SortCluster}}
	return q, nil
}

// get answers a GET by name: the object if exactly one cluster of the view has it, 409 naming the
// clusters when several do.
func (s *Server) get(c *gin.Context, r *facadeRequest, res apiResource, out *renderer) {
	name := r.name
	clusters := s.viewClusters(subjectOf(c), authz.VerbGet, r, res)
	q, err := s.baseQuery(c, r, res, nil, authz.VerbGet, clusters)
	if err != nil {
		writeParamErrors(c, err)
		return
	}
	notFound := func() {
		st := newStatus(http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("%s %q not found", groupResource(res), name))
		st.Details = &metav1.StatusDetails{Name: name, Group: res.Group, Kind: res.Resource}
		writeStatusObject(c, st)
	}
	if r.qualified {
		base, cluster, ok := splitQualified(name)
		if !ok || !slices.Contains(clusters, cluster) {
			// A cluster the subject may not get the resource in is answered as one that does not
			// exist, without a search: its freshness warnings would name it.
			notFound()
			return
		}
		q.Names, q.Clusters = []string{base}, []string{cluster}
	} else {
		q.Names = []string{name}
	}
	// One object per cluster at most: a name is unique in its namespace (or cluster, for
	// cluster-scoped objects) of one member.
	q.Limit = query.MaxLimit
	found, ok := s.searchOrFail(c, q)
	if !ok {
		return
	}
	s.addWarnings(c, q, found.Warnings)
	switch len(found.Items) {
	case 0:
		notFound()
		return
	case 1:
	default:
		var clusters []string
		for _, it := range found.Items {
			clusters = append(clusters, clusterOf(it))
		}
		slices.Sort(clusters)
		st := newStatus(http.StatusConflict, metav1.StatusReasonConflict, fmt.Sprintf(
			"%s %q exists in %d clusters (%s): get it from one cluster's view (/clusters/<cluster>/..., a kubeconfig context per cluster from `kubesearch kubeconfig`) or from the qualified view (/qualified/..., name %q)",
			groupResource(res), name, len(clusters), strings.Join(clusters, ", "), name+qualifiedSeparator+clusters[0]))
		st.Details = &metav1.StatusDetails{Name: name, Group: res.Group, Kind: res.Resource}
		writeStatusObject(c, st)
		return
	}
	obj, err := out.object(found.Items[0])
	if err != nil {
		s.writeStoreError(c, err)
		return
	}
	var buf bytes.Buffer
	switch out.shape {
	case shapeTable:
		out.tableHead(&buf, "")
		if err := out.row(&buf, found.Items[0], obj, true, time.Now()); err != nil {
			s.writeStoreError(c, err)
			return
		}
		buf.WriteString("]}")
	case shapeMetadata:
		writePartial(&buf, obj)
	default:
		buf.Write(obj)
	}
	c.Data(http.StatusOK, "application/json", buf.Bytes())
}

// list answers a LIST. With a limit, one page (at most query.MaxLimit objects; fewer and a
// continue token is what Kubernetes allows a server). Without one, every object, written to the
// client page by page as they come, all pages from one snapshot of the index: memory holds one
// page, whatever the list's size.
func (s *Server) list(c *gin.Context, r *facadeRequest, res apiResource, out *renderer, params url.Values) {
	clusters := s.viewClusters(subjectOf(c), authz.VerbList, r, res)
	q, err := s.baseQuery(c, r, res, params, authz.VerbList, clusters)
	if err != nil {
		writeParamErrors(c, err)
		return
	}
	limit := 0
	if l := params.Get(query.ParamLimit); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 0 {
			writeParamErrors(c, query.Errors{{Param: query.ParamLimit, Message: fmt.Sprintf("%q is not a non-negative integer", l)}})
			return
		}
		limit = n
	}
	q.Limit = fullListPage
	q.Drain = limit == 0 // every page read here, at once: its snapshot may use the server's reserve
	if limit > 0 {
		q.Limit = min(limit, query.MaxLimit)
	} else {
		done, ok := s.startFullList(c)
		if !ok {
			return
		}
		defer done()
	}
	var rv string
	var vec rvVector
	if token := params.Get(query.ParamContinue); token != "" {
		// A later page: the snapshot and the resourceVersion of the first.
		lc, err := decodeContinue(token)
		if err != nil {
			writeParamErrors(c, query.Errors{{Param: query.ParamContinue, Message: err.Error()}})
			return
		}
		q.Continue, rv = lc.Store, lc.RV
	} else {
		var warnings []string
		var st *metav1.Status
		vec, warnings, st = s.listResourceVersion(c.Request.Context(), r, res, params, clusters)
		if st != nil {
			writeStatusObject(c, st)
			return
		}
		for _, w := range warnings {
			c.Writer.Header().Add("Warning", warningHeader(w))
		}
		q.Versions = s.cache == nil // else cover finds the position
		s.cover(c.Request.Context(), res, vec, s.listingClusters(res, clusters))
	}
	page, ok := s.searchOrFail(c, q)
	if !ok {
		return
	}
	if vec != nil {
		if q.Versions {
			vec.raise(page.Versions, s.listingClusters(res, clusters))
		}
		rv = s.encodeRV(r.view, res, vec)
		q.Versions = false
	}
	s.addWarnings(c, q, page.Warnings)
	warnRepeatedNames(c, r, out, page.Items, "list")
	cont := ""
	if limit > 0 && page.Continue != "" {
		cont = encodeContinue(rv, page.Continue)
	}
	now := time.Now()
	c.Header("Content-Type", "application/json")
	c.Status(http.StatusOK)
	var buf bytes.Buffer
	out.listHead(&buf, rv, cont, page.Total-int64(len(page.Items)))
	first := true
	for {
		for _, it := range page.Items {
			obj, err := out.object(it)
			if err == nil {
				err = out.row(&buf, it, obj, first, now)
			}
			if err != nil {
				s.abortStream(c, r, page.Continue, limit == 0, err)
			}
			first = false
			if buf.Len() >= flushBytes {
				if _, err := c.Writer.Write(buf.Bytes()); err != nil {
					if limit == 0 {
						s.store.Release(c.Request.Context(), page.Continue) // the client went away
					}
					return
				}
				buf.Reset()
			}
		}
		page.Items = nil // the page's objects are written: the next page need not share the heap with them
		if buf.Len() > 0 {
			if _, err := c.Writer.Write(buf.Bytes()); err != nil {
				if limit == 0 {
					s.store.Release(c.Request.Context(), page.Continue) // the client went away
				}
				return
			}
			buf.Reset()
		}
		if limit > 0 || page.Continue == "" {
			break
		}
		q.Continue = page.Continue
		// Each page gets the request timeout anew: a full list of a large fleet takes longer than
		// one search, and the client reads as it goes.
		ctx, cancel := context.WithTimeout(c.Request.Context(), s.opts.RequestTimeout)
		page, err = s.store.Search(ctx, q)
		cancel()
		if err != nil {
			s.abortStream(c, r, q.Continue, true, err)
		}
	}
	buf.WriteString("]}")
	_, _ = c.Writer.Write(buf.Bytes())
}

// A full LIST (no limit) reads pages of fullListPage objects and writes them out in pieces of
// flushBytes, so that each concurrent full list holds about one page (2–3 MB of 10 KB Pods), not
// MaxLimit objects and their rendering at once: ten concurrent full lists of 100,000 Pods grew the
// query API by 791 MiB with pages of 1,000.
const (
	fullListPage = 250
	flushBytes   = 256 << 10
)

// listContinue is the facade's continue token: the store's, with the list's resourceVersion,
// which every page of one list reports (kubectl keeps a chunked list's resourceVersion only when
// its pages agree).
type listContinue struct {
	RV    string `json:"rv"`
	Store string `json:"c"`
}

func encodeContinue(rv, storeToken string) string {
	b, _ := json.Marshal(listContinue{RV: rv, Store: storeToken}) // two strings: cannot fail
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeContinue(s string) (listContinue, error) {
	var lc listContinue
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &lc)
	}
	if err != nil || lc.Store == "" {
		return listContinue{}, errors.New("not a continue token this server issued")
	}
	return lc, nil
}

// searchOrFail runs one search for a request, within the request timeout, records its time
// beside the store's own, and answers the store's error as a Status when it fails.
func (s *Server) searchOrFail(c *gin.Context, q *query.Query) (*store.Result, bool) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.opts.RequestTimeout)
	defer cancel()
	start := time.Now()
	res, err := s.store.Search(ctx, q)
	if err != nil {
		s.writeStoreError(c, err)
		return nil, false
	}
	s.metrics.observeStore(time.Since(start), res.Took)
	return res, true
}

// abortStream ends a list whose answer has begun: the status is sent, so the only honest way to
// say the list is incomplete is to break the response off; clients then retry instead of holding
// a partial list as whole.
// The snapshot is freed when nothing else will page in it (release).
func (s *Server) abortStream(c *gin.Context, r *facadeRequest, token string, release bool, err error) {
	s.log.Warn("list broken off after its first page", "path", r.path, "cluster", r.cluster, "err", err)
	if release {
		s.store.Release(c.Request.Context(), token)
	}
	panic(http.ErrAbortHandler)
}

func (s *Server) addWarnings(c *gin.Context, q *query.Query, extra []string) {
	_, warnings := s.fleet.freshness(q)
	for _, w := range append(warnings, extra...) {
		c.Writer.Header().Add("Warning", warningHeader(w))
	}
}

// listResourceVersion is the resourceVersion of a LIST: in a one-cluster view the member's own,
// the pair's watermark (every event up to it is searchable); in the fleet views a vector of the
// watermarks of exactly the pairs the list covers. It applies the request's resourceVersion:
//   - "" is a consistent read: it waits, bounded by ResourceVersionWait, until the watermarks reach
//     the newest event the stream held at the request (the watch cache knows it); past the bound
//     the answer is the index as it is, with a Warning;
//   - "0" is the index as it is;
//   - NotOlderThan waits until the watermarks reach the asked version (bounded, then 504);
//   - Exact can only be the current version: the index keeps no history (410 otherwise, as
//     kube-apiserver says of a compacted version).
//
// clusters are the view's clusters the subject may see (viewClusters): the vector, the wait and
// its warning depend on those pairs only.
func (s *Server) listResourceVersion(ctx context.Context, r *facadeRequest, res apiResource, params url.Values, clusters []string) (rvVector, []string, *metav1.Status) {
	asked, match := params.Get(paramResourceVersion), metav1.ResourceVersionMatch(params.Get(paramResourceVersionMatch))
	switch match {
	case "", metav1.ResourceVersionMatchNotOlderThan, metav1.ResourceVersionMatchExact:
	default:
		return nil, nil, newStatus(http.StatusBadRequest, metav1.StatusReasonBadRequest,
			fmt.Sprintf("resourceVersionMatch: %q is not one of NotOlderThan, Exact", match))
	}
	var want rvVector
	if asked != "" && asked != "0" {
		dctx, cancel := context.WithTimeout(ctx, s.opts.ResourceVersionWait)
		var st *metav1.Status
		want, st = s.decodeRV(dctx, asked, r.view, res, clusters)
		cancel()
		if st != nil {
			return nil, nil, st
		}
	} else if match != "" && match != metav1.ResourceVersionMatchNotOlderThan {
		return nil, nil, newStatus(http.StatusBadRequest, metav1.StatusReasonBadRequest, "resourceVersionMatch: Exact needs a resourceVersion")
	}
	consistent := asked == "" && match == "" && s.cache != nil
	deadline := time.Now().Add(s.opts.ResourceVersionWait)
	var warnings []string
	if consistent {
		pairs := make([]store.Pair, 0, len(clusters))
		for _, cl := range clusters {
			pairs = append(pairs, res.pair(cl))
		}
		sctx, cancel := context.WithDeadline(ctx, deadline)
		if err := s.cache.Sync(sctx, pairs); err != nil {
			warnings = append(warnings, fmt.Sprintf("not a consistent read: %s: %v", groupResource(res), err))
		}
		cancel()
		want = s.heads(res, clusters)
	}
	have := s.indexedVector(res, clusters)
	for {
		switch {
		case want == nil:
			return have, warnings, nil
		case match == metav1.ResourceVersionMatchExact:
			if have.equal(want) {
				return have, nil, nil
			}
			return nil, nil, newStatus(http.StatusGone, metav1.StatusReasonExpired, fmt.Sprintf(
				"resourceVersion %s: too old resource version: kubesearch serves the index as it is now (%s), not an earlier state", asked, s.encodeRV(r.view, res, have)))
		case have.reaches(want):
			return have, warnings, nil
		case time.Now().After(deadline) && consistent:
			var behind []string
			for c, rv := range want {
				if have[c] < rv {
					behind = append(behind, fmt.Sprintf("%s at %d of %d", c, have[c], rv))
				}
			}
			slices.Sort(behind)
			return have, append(warnings, fmt.Sprintf("not a consistent read: after %s the index is still behind the event stream for %s: %s",
				s.opts.ResourceVersionWait, groupResource(res), strings.Join(behind, ", "))), nil
		case time.Now().After(deadline):
			st := newStatus(http.StatusGatewayTimeout, metav1.StatusReasonTimeout, fmt.Sprintf(
				"Too large resource version: %s, current resource version: %s: the index did not reach it within %s", asked, s.encodeRV(r.view, res, have), s.opts.ResourceVersionWait))
			st.Details = &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}}
			return nil, nil, st
		}
		if err := lifecycle.Sleep(ctx, 200*time.Millisecond); err != nil {
			return nil, nil, newStatus(http.StatusGatewayTimeout, metav1.StatusReasonTimeout, "gave up waiting for the index: "+err.Error())
		}
		// Read afresh: the fleet status polls every PollInterval, too slow to wait on.
		if fresh, err := s.freshWatermarks(ctx, res); err == nil {
			have = rvVector{}
			for _, cl := range clusters {
				have[cl] = fresh[cl] // 0: nothing of it searchable yet
			}
		}
	}
}

// heads are, per cluster, the newest resourceVersion of a resource the stream has shown (the
// watch cache knows it): what a consistent read waits for the index to reach. Clusters without
// any are left out (nothing to wait for); so is everything while the cache is not ready.
func (s *Server) heads(res apiResource, clusters []string) rvVector {
	pairs := make([]store.Pair, 0, len(clusters))
	for _, cl := range clusters {
		pairs = append(pairs, res.pair(cl))
	}
	out := rvVector{}
	for p, h := range s.cache.Heads(pairs) {
		out[p.Cluster] = h
	}
	return out
}

// indexedVector is, for each of clusters, the resource's watermark there: 0 when nothing of it is
// searchable yet.
func (s *Server) indexedVector(res apiResource, clusters []string) rvVector {
	have := rvVector{}
	for _, cl := range clusters {
		have[cl], _ = s.fleet.watermark(res.pair(cl))
	}
	return have
}

// viewClusters are the clusters of a request's view that cache a resource and of which the subject
// may use verb on the resource in the request's namespace. Everything a request answers beside
// the objects — the resourceVersion vector, the consistent read's wait and its warning, watch
// positions, bookmarks, 410 and 504 messages, freshness warnings, Table columns — is computed
// over these clusters, so it is the same whether or not clusters the subject cannot see exist,
// change or lag. Within a cluster it sees, a subject sees the pair's resourceVersion whatever
// namespaces it may read, as kube-apiserver shows every namespace's reader the cluster's one.
func (s *Server) viewClusters(subj subject, verb string, r *facadeRequest, res apiResource) []string {
	clusters := []string{r.cluster}
	if r.cluster == "" {
		clusters = s.catalog.clustersOf(res.Group, res.Version, res.Resource, nil)
	}
	if subj.unrestricted() {
		return clusters
	}
	ns := r.authzNamespace(res.Namespaced)
	return slices.DeleteFunc(clusters, func(cl string) bool { return !subj.allowed(verb, cl, ns, res.Group, res.Resource) })
}

// authzCluster is the request's cluster as authorization asks about it: Any in the fleet views.
func (r *facadeRequest) authzCluster() string {
	if r.cluster == "" {
		return authz.Any
	}
	return r.cluster
}

// authzNamespace is the request's namespace as authorization asks about it: "" for a
// cluster-scoped resource, Any for a namespaced one across namespaces.
func (r *facadeRequest) authzNamespace(namespaced bool) string {
	switch {
	case !namespaced:
		return ""
	case r.namespace == "":
		return authz.Any
	}
	return r.namespace
}

// rvVector is a multi-cluster resourceVersion: per member, a resourceVersion of that member.
type rvVector map[string]int64

// encode writes a vector for a view: the member's resourceVersion itself in a one-cluster view;
// elsewhere, as Karmada encodes its multi-cluster resourceVersion, base64url of the JSON map
// cluster → resourceVersion (keys sorted, which encoding/json does).
func (v rvVector) encode(vw view) string {
	if !vw.vector() {
		return strconv.FormatInt(v[vw.cluster], 10)
	}
	m := make(map[string]string, len(v))
	for k, rv := range v {
		m[k] = strconv.FormatInt(rv, 10)
	}
	b, _ := json.Marshal(m) // a map of strings: cannot fail
	return base64.RawURLEncoding.EncodeToString(b)
}

func parseRV(s string, vw view) (rvVector, error) {
	if !vw.vector() {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a resourceVersion of cluster %s", s, vw.cluster)
		}
		return rvVector{vw.cluster: n}, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	var m map[string]string
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		return nil, fmt.Errorf("%q is not a fleet resourceVersion (base64url of a JSON map cluster → resourceVersion, as this server issues)", s)
	}
	v := rvVector{}
	for k, x := range m {
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("cluster %s: %q is not a resourceVersion", k, x)
		}
		v[k] = n
	}
	return v, nil
}

// raise lifts the vector's members to the newest resourceVersions a snapshot shows of them (a
// page's Versions), for a query API without a watch cache: no watch can then resume from the
// position, and a LIST's resourceVersion is no older than what it showed. With one, cover finds
// a position a watch can resume from (the newest resourceVersion shown may be above an event not
// yet searchable). Members re-listing are left out: a re-list writes objects in key order, not
// resourceVersion order, so the newest shown says nothing of the older ones still to come.
func (v rvVector) raise(shown map[string]int64, listing map[string]bool) {
	for c, rv := range shown {
		if cur, ok := v[c]; ok && rv > cur && !listing[c] {
			v[c] = rv
		}
	}
}

// listingClusters are those of clusters re-listing a resource, by the watermarks.
func (s *Server) listingClusters(res apiResource, clusters []string) map[string]bool {
	out := map[string]bool{}
	for _, cl := range clusters {
		if s.fleet.listing(res.pair(cl)) {
			out[cl] = true
		}
	}
	return out
}

func (v rvVector) equal(o rvVector) bool { return maps.Equal(v, o) }

// reaches says every member of o is at or below v. A member v does not know is not reached.
func (v rvVector) reaches(o rvVector) bool {
	for k, rv := range o {
		if have, ok := v[k]; !ok || have < rv {
			return false
		}
	}
	return true
}

// warnRepeatedNames adds a Warning to a fleet view's answer whose first page (of a LIST, or of a
// watch's initial events: what a streaming list sends instead of a LIST) holds one namespace/name
// from two clusters: a client keying objects by namespace and name keeps one of them. Only the
// first page can be told of, before the headers are sent. A Table (kubectl get) shows the CLUSTER
// column and gets none.
func warnRepeatedNames(c *gin.Context, r *facadeRequest, out *renderer, items []json.RawMessage, what string) {
	if r.cluster != "" || r.qualified || out.shape == shapeTable {
		return
	}
	if dup := repeatedName(items); dup != "" {
		c.Writer.Header().Add("Warning", warningHeader(fmt.Sprintf(
			"names repeat across clusters in this %s (%s): a client keying objects by namespace and name (informers, controller-runtime, k9s) keeps one of each; use the qualified view (/qualified/, context %s) or one cluster's view",
			what, dup, ContextQualified)))
	}
}

// repeatedName names the first namespace/name that two clusters' objects of a page share, "" if
// none. Facade lists sort by namespace, name, cluster, so such objects are neighbours.
func repeatedName(items []json.RawMessage) string {
	var prevKey, prevCluster string
	for _, it := range items {
		m := gjson.GetManyBytes(it, "metadata.namespace", "metadata.name")
		key, cl := m[0].Str+"/"+m[1].Str, clusterOf(it)
		if key == prevKey && cl != prevCluster {
			return fmt.Sprintf("%s in %s and %s", strings.TrimPrefix(key, "/"), prevCluster, cl)
		}
		prevKey, prevCluster = key, cl
	}
	return ""
}

func splitQualified(name string) (base, cluster string, ok bool) {
	i := strings.LastIndex(name, qualifiedSeparator)
	if i <= 0 || i == len(name)-1 {
		return "", "", false
	}
	return name[:i], name[i+1:], true
}

// clusterOf reads the member a stored object came from.
func clusterOf(obj []byte) string {
	return gjson.GetBytes(obj, "metadata.annotations."+gjson.Escape(document.CachedFromClusterAnnotation)).Str
}

func groupResource(r apiResource) string {
	if r.Group == "" {
		return r.Resource
	}
	return r.Resource + "." + r.Group
}

// errNoStore is a stored object without what the facade needs to show it.
var errNoStore = errors.New("stored object lacks metadata")
