package queryapi

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubesearch/kubesearch/internal/authz"
	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/queryapi/page"
)

// APIVersion and kinds of the REST search's own responses.
const (
	APIVersion       = "kubesearch.io/v1alpha1"
	KindSearchResult = "SearchResult"
	KindFleetStatus  = "FleetStatus"
)

// Route paths.
const (
	PathSearch = "/v1alpha1/search"
	PathFleet  = "/v1alpha1/fleet"
)

//go:embed openapi.json
var openAPI []byte

func (s *Server) routes() *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.HandleMethodNotAllowed = true
	e.Use(s.metrics.middleware, s.recover, s.admit, s.authenticate, s.guardReviews, s.guardBrowsers, s.rateLimit)
	e.GET(PathSearch, s.search)
	e.GET(PathFleet, s.fleetStatus)
	e.GET("/openapi.json", func(c *gin.Context) { c.Data(http.StatusOK, "application/json", openAPI) })
	// /livez as kube-apiserver names its liveness probe since 1.16; /healthz for older probes.
	for _, p := range []string{"/healthz", "/livez"} {
		e.GET(p, func(c *gin.Context) { c.String(http.StatusOK, "ok\n") })
	}
	e.GET("/readyz", func(c *gin.Context) {
		err := s.fleet.ready()
		if err == nil && s.kafka != nil && !s.catalog.isSynced() {
			err = errors.New("the collectors' ledger (what each member has cached) not read yet")
		}
		if err == nil && s.cache != nil && !s.cache.Ready() {
			// A replica behind a load balancer takes no traffic before it can place watches: at a
			// fleet's size the cache takes minutes to seed (README, "Fleet simulator").
			err = errors.New("the watch cache has not read the event stream up to where it ended at start")
		}
		if err != nil {
			c.String(http.StatusServiceUnavailable, "not ready: %v\n", err)
			return
		}
		c.String(http.StatusOK, "ok\n")
	})
	e.GET(PathClusters, s.clusterList)
	// The search page: static assets, served without credentials (they hold no data; the page's
	// requests to the API carry the caller's). / sends a browser there; kube-apiserver's / lists
	// paths, which no client of the facade reads.
	e.GET(page.Prefix+"*asset", gin.WrapH(page.Handler()))
	e.GET("/", func(c *gin.Context) { c.Redirect(http.StatusFound, page.Prefix) })
	e.GET(strings.TrimSuffix(page.Prefix, "/"), func(c *gin.Context) { c.Redirect(http.StatusFound, page.Prefix) })
	s.facadeRoutes(e)
	e.GET("/metrics", authorizeURL, gin.WrapH(promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{})))
	if s.opts.Profiling {
		e.GET("/debug/pprof/*profile", authorizeURL, profile)
	}
	e.NoRoute(func(c *gin.Context) {
		writeStatus(c, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("no route %s; see /openapi.json", c.Request.URL.Path), nil)
	})
	e.NoMethod(func(c *gin.Context) {
		writeStatus(c, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
			fmt.Sprintf("%s is not allowed on %s: the API is read-only", c.Request.Method, c.Request.URL.Path), nil)
	})
	return e
}

// profile serves net/http/pprof's handlers by name: /debug/pprof/ lists the profiles,
// /debug/pprof/profile?seconds=N takes a CPU profile, /debug/pprof/heap and the others a runtime
// profile. (net/http/pprof's own registration is on http.DefaultServeMux, which nothing here
// serves.)
func profile(c *gin.Context) {
	switch c.Param("profile") {
	case "/profile":
		pprof.Profile(c.Writer, c.Request)
	case "/trace":
		pprof.Trace(c.Writer, c.Request)
	case "/symbol":
		pprof.Symbol(c.Writer, c.Request)
	case "/cmdline":
		pprof.Cmdline(c.Writer, c.Request)
	default:
		pprof.Index(c.Writer, c.Request)
	}
}

// recover turns a panic into a 500 Status: a bug, logged with the request, never a dropped
// connection.
func (s *Server) recover(c *gin.Context) {
	defer func() {
		if r := recover(); r != nil {
			if r == http.ErrAbortHandler {
				panic(r) // a stream broken off on purpose: net/http closes the connection
			}
			s.log.Error("panic serving request", "path", c.Request.URL.Path, "query", c.Request.URL.RawQuery, "panic", r)
			writeStatus(c, http.StatusInternalServerError, metav1.StatusReasonInternalError, "internal error", nil)
			c.Abort()
		}
	}()
	c.Next()
}

// SearchResult is the answer of a search.
type SearchResult struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		// Continue fetches the next page; absent on the last.
		Continue string `json:"continue,omitempty"`
	} `json:"metadata"`
	// Total counts every match (all pages); TotalIsLowerBound says it is only a lower bound.
	Total             int64               `json:"total"`
	TotalIsLowerBound bool                `json:"totalIsLowerBound,omitempty"`
	Items             []json.RawMessage   `json:"items"`
	Facets            []store.FacetResult `json:"facets,omitempty"`
	// Clusters says, for each cluster the query covers, how complete and fresh its part is.
	Clusters []ClusterFreshness `json:"clusters"`
	// Columns and Rows are there when the request's Accept header asked for a Table
	// (application/json;as=Table;v=v1;g=meta.k8s.io): Rows[i] is Items[i] as its resource's Table
	// row, Columns that resource's column definitions (searchtable.go).
	Columns map[string][]metav1.TableColumnDefinition `json:"columns,omitempty"`
	Rows    []SearchRow                               `json:"rows,omitempty"`
	// ColumnSorts, with the Table, gives per resource of Columns the sort field of each column
	// (same order), "" for one that does not sort: "columns.restarts" for a Pod's RESTARTS,
	// "status" for STATUS. A custom resource's columns have none (its CRD's, not indexed).
	ColumnSorts map[string][]string `json:"columnSorts,omitempty"`
}

func (s *Server) search(c *gin.Context) {
	q, err := query.Parse(c.Request.URL.Query(), time.Now())
	if err != nil {
		writeParamErrors(c, err)
		return
	}
	subj := subjectOf(c)
	if what := subj.searchForbidden(q); what != "" {
		forbidden(c, subj, "search", "list", what)
		return
	}
	if err := s.checkSearchFields(q, subj.visible()); err != nil {
		writeParamErrors(c, err)
		return
	}
	subj.restrict(q, authz.VerbList)
	res, ok := s.searchOrFail(c, q)
	if !ok {
		return
	}
	clusters, warnings := s.fleet.freshness(q)
	warnings = append(warnings, res.Warnings...)
	out := SearchResult{APIVersion: APIVersion, Kind: KindSearchResult, Total: res.Total,
		TotalIsLowerBound: res.TotalIsLowerBound, Items: res.Items, Facets: res.Facets, Clusters: clusters}
	if out.Clusters == nil {
		out.Clusters = []ClusterFreshness{}
	}
	out.Metadata.Continue = res.Continue
	if wantsTable(c.GetHeader("Accept")) {
		if out.Columns, out.Rows, err = s.tableRows(c.Request.Context(), res.Items, time.Now()); err != nil {
			s.writeStoreError(c, err)
			return
		}
		out.ColumnSorts = columnSorts(out.Columns)
		if out.Rows == nil {
			out.Rows = []SearchRow{}
		}
	}
	if res.TotalIsLowerBound {
		warnings = append(warnings, "total is a lower bound: the search backend stopped counting")
	}
	for _, w := range warnings {
		c.Writer.Header().Add("Warning", warningHeader(w))
	}
	body, err := encodeSearchResult(out)
	if err != nil {
		s.writeStoreError(c, err)
		return
	}
	c.Header("Content-Length", strconv.Itoa(len(body)))
	c.Data(http.StatusOK, "application/json", body)
}

// encodeSearchResult writes the items as stored, byte for byte. encoding/json would re-validate and
// compact every object (a page of 100 Pods is about 1 MB), and they are valid JSON already: the
// store read them out of OpenSearch's answer.
func encodeSearchResult(out SearchResult) ([]byte, error) {
	items := out.Items
	out.Items = nil
	head, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode search result: %w", err)
	}
	// The first `"items":null` is the field itself: fields before it hold no unescaped quote.
	at := bytes.Index(head, []byte(`"items":null`))
	if at < 0 {
		return nil, errors.New("encode search result: no items field")
	}
	rest := head[at+len(`"items":null`):]
	size := at + len(`"items":[]`) + len(rest)
	for _, it := range items {
		size += len(it) + 1
	}
	// One buffer of the exact size: the page is copied once, from the store's answer.
	buf := make([]byte, 0, size)
	buf = append(buf, head[:at]...)
	buf = append(buf, `"items":[`...)
	for i, it := range items {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, it...)
	}
	buf = append(buf, ']')
	return append(buf, rest...), nil
}

// warningHeader formats an RFC 7234 warning as Kubernetes does: code 299, no agent.
func warningHeader(text string) string { return "299 - " + strconv.Quote(text) }

// FleetStatus is the answer of the fleet endpoint.
type FleetStatus struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Items      []PairStatus `json:"items"`
}

func (s *Server) fleetStatus(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.opts.RequestTimeout)
	defer cancel()
	subj := subjectOf(c)
	counts, err := s.store.Counts(ctx, subj.scope(authz.VerbList, &query.Query{}))
	if err != nil {
		s.writeStoreError(c, err)
		return
	}
	docs := map[store.Pair]int64{}
	for _, n := range counts {
		docs[n.Pair()] = n.Documents
	}
	pairs := slices.DeleteFunc(s.fleet.pairs(subj.scope(authz.VerbList, &query.Query{})), func(p PairStatus) bool {
		return !subj.allowed(authz.VerbList, p.Cluster, authz.Any, p.Group, p.Resource)
	})
	seen := map[store.Pair]bool{}
	for i := range pairs {
		k := store.Pair{Cluster: pairs[i].Cluster, Group: pairs[i].Group, Resource: pairs[i].Resource}
		n := docs[k]
		pairs[i].Documents, seen[k] = &n, true
	}
	// Documents of pairs nobody reports any more (a cluster removed without PURGE) are shown too.
	for _, n := range counts {
		if k := (n.Pair()); !seen[k] {
			d := n.Documents
			pairs = append(pairs, PairStatus{Cluster: n.Cluster, Group: n.Group, Resource: n.Resource, State: "Unknown", Documents: &d})
		}
	}
	if pairs == nil {
		pairs = []PairStatus{}
	}
	c.JSON(http.StatusOK, FleetStatus{APIVersion: APIVersion, Kind: KindFleetStatus, Items: pairs})
}

// writeParamErrors answers 400 with one cause per bad parameter, the parameter as its field.
func writeParamErrors(c *gin.Context, err error) {
	var errs query.Errors
	if !errors.As(err, &errs) {
		writeStatus(c, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error(), nil)
		return
	}
	causes := make([]metav1.StatusCause, len(errs))
	for i, e := range errs {
		causes[i] = metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Field: e.Param, Message: e.Message}
	}
	writeStatus(c, http.StatusBadRequest, metav1.StatusReasonBadRequest, "invalid parameters: "+errs.Error(), causes)
}

func (s *Server) writeStoreError(c *gin.Context, err error) {
	switch {
	case errors.Is(err, store.ErrBadToken):
		writeStatus(c, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error(),
			[]metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Field: query.ParamContinue, Message: err.Error()}})
	case errors.Is(err, store.ErrExpired):
		writeStatus(c, http.StatusGone, metav1.StatusReasonExpired, err.Error(), nil)
	case errors.Is(err, store.ErrRejected):
		writeStatus(c, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error(), nil)
	case errors.Is(err, store.ErrUnavailable):
		writeStatus(c, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, err.Error(), nil)
	case errors.Is(err, store.ErrThrottled):
		tooManyRequests(c, time.Second, err.Error()) // a subject's costly searches (store.Limits)
	case errors.Is(err, context.DeadlineExceeded):
		writeStatus(c, http.StatusGatewayTimeout, metav1.StatusReasonTimeout,
			fmt.Sprintf("the search took longer than %s: %v", s.opts.RequestTimeout, err), nil)
	case errors.Is(err, context.Canceled):
		writeStatus(c, 499, metav1.StatusReasonTimeout, "client went away", nil)
	default:
		s.log.Error("search failed", "path", c.Request.URL.Path, "query", c.Request.URL.RawQuery, "err", err)
		writeStatus(c, http.StatusInternalServerError, metav1.StatusReasonInternalError, err.Error(), nil)
	}
}

// writeStatus answers a Kubernetes Status, as kubectl and client-go read errors.
func writeStatus(c *gin.Context, code int, reason metav1.StatusReason, msg string, causes []metav1.StatusCause) {
	st := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Message: msg, Reason: reason, Code: int32(code),
	}
	if len(causes) > 0 {
		st.Details = &metav1.StatusDetails{Causes: causes}
	}
	c.JSON(code, st)
}
