package osstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/store"
)

func TestResponseError(t *testing.T) {
	notFound := []byte(`{"error":{"root_cause":[{"type":"index_not_found_exception","reason":"no such index [kubernetes-pod-v1]"}],"type":"index_not_found_exception"},"status":404}`)
	// What OpenSearch 2.19 answers when the rewritten query has more leaf clauses than
	// indices.query.bool.max_clause_count.
	tooManyClauses := []byte(`{"error":{"root_cause":[{"type":"too_many_nested_clauses","reason":"Query contains too many nested clauses; maxClauseCount is set to 1024"}],` +
		`"type":"search_phase_execution_exception","reason":"all shards failed","phase":"query","grouped":true,"failed_shards":[{"shard":0,"index":"kubernetes-configmap","node":"n1",` +
		`"reason":{"type":"query_phase_execution_exception","reason":"Query Failed [Failed to execute main query]","caused_by":{"type":"too_many_nested_clauses","reason":"Query contains too many nested clauses; maxClauseCount is set to 1024"}}}]},"status":500}`)
	tests := []struct {
		name   string
		path   string
		status int
		body   []byte
		want   error
	}{
		{"expired PIT", "/_search", 404, []byte(`{"error":{"root_cause":[{"type":"search_context_missing_exception","reason":"No search context found for id [1]"}]},"status":404}`), store.ErrExpired},
		{"PIT of a deleted index (an index roll)", "/_search", 404, notFound, store.ErrExpired},
		{"a named index that is missing is no expiry", "/kubernetes-pod/_search", 404, notFound, nil},
		{"too many PITs", "/kubernetes-*/_search/point_in_time", 429, []byte(`{"error":{"type":"rejected_execution_exception","reason":"Trying to create too many Point In Time contexts"}}`), errTooManyPITs},
		{"overloaded", "/_search", 429, []byte(`{"error":{"type":"es_rejected_execution_exception"}}`), store.ErrUnavailable},
		{"refused query", "/_search", 400, []byte(`{"error":{"type":"parsing_exception"}}`), store.ErrRejected},
		{"too many clauses, answered 500", "/kubernetes-*/_count", 500, tooManyClauses, store.ErrRejected},
		{"too many clauses in one bool, answered 500", "/_search", 500, []byte(`{"error":{"root_cause":[{"type":"too_many_clauses","reason":"maxClauseCount is set to 1024"}],"type":"search_phase_execution_exception","reason":"all shards failed"},"status":500}`), store.ErrRejected},
		{"a cause deep in the chain", "/_search", 500, []byte(`{"error":{"type":"search_phase_execution_exception","reason":"all shards failed","caused_by":{"type":"query_shard_exception","reason":"failed to create query","caused_by":{"type":"too_many_clauses"}}},"status":500}`), store.ErrRejected},
		{"illegal argument, answered 500", "/_search", 500, []byte(`{"error":{"root_cause":[{"type":"illegal_argument_exception","reason":"field [x] not searchable"}],"type":"illegal_argument_exception"},"status":500}`), store.ErrRejected},
		{"unparsable body", "/_search", 500, []byte(`{"error":{"root_cause":[{"type":"x_content_parse_exception","reason":"[1:10] unknown field"}],"type":"x_content_parse_exception"},"status":500}`), store.ErrRejected},
		{"all shards failed on a lost node", "/_search", 503, []byte(`{"error":{"root_cause":[{"type":"node_disconnected_exception","reason":"disconnected"}],"type":"search_phase_execution_exception","reason":"all shards failed"},"status":503}`), store.ErrUnavailable},
		{"no shard available", "/_search", 503, []byte(`{"error":{"root_cause":[],"type":"search_phase_execution_exception","reason":"all shards failed","phase":"query","grouped":true,"failed_shards":[]},"status":503}`), store.ErrUnavailable},
		{"a proxy's error page", "/_search", 502, []byte(`<html>Bad Gateway</html>`), store.ErrUnavailable},
	}
	for _, tt := range tests {
		err := responseError("POST", tt.path, tt.status, tt.body)
		for _, sentinel := range []error{store.ErrExpired, errTooManyPITs, store.ErrUnavailable, store.ErrRejected} {
			if got := errors.Is(err, sentinel); got != (sentinel == tt.want) {
				t.Errorf("%s: errors.Is(%v, %v) = %v", tt.name, err, sentinel, got)
			}
		}
	}
}

// fakeOpenSearch answers what the first page of a query asks: a new PIT ("pit-1", "pit-2", ...,
// or the error pitRefused holds), then the search in it, answered by search; a search on the live
// indices (when no PIT could be opened) is answered by live. It records the PITs opened and
// closed. A _count, which a first page no longer needs, is unexpected.
type fakeOpenSearch struct {
	t            *testing.T
	search, live http.HandlerFunc
	pitRefused   string
	mu           sync.Mutex
	opened       int
	closed       []string
}

func (f *fakeOpenSearch) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body)) // for the handlers
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/_search/point_in_time") && f.pitRefused != "":
		w.WriteHeader(int(gjson.Get(f.pitRefused, "status").Int()))
		fmt.Fprint(w, f.pitRefused)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/_search/point_in_time"):
		f.mu.Lock()
		f.opened++
		fmt.Fprintf(w, `{"pit_id":"pit-%d"}`, f.opened)
		f.mu.Unlock()
	case r.Method == http.MethodDelete && r.URL.Path == "/_search/point_in_time":
		f.mu.Lock()
		for _, id := range gjson.GetBytes(body, "pit_id").Array() {
			f.closed = append(f.closed, id.Str)
		}
		f.mu.Unlock()
		fmt.Fprint(w, `{"pits":[{"successful":true}]}`)
	case r.Method == http.MethodPost && r.URL.Path == "/_search" && strings.HasPrefix(gjson.GetBytes(body, "pit.id").Str, "pit-"):
		f.search(w, r)
	case r.Method == http.MethodPost && r.URL.Path == "/kubernetes-*/_search" && f.live != nil:
		f.live(w, r)
	default:
		f.t.Errorf("unexpected %s %s", r.Method, r.URL)
		w.WriteHeader(http.StatusNotFound)
	}
}

func (f *fakeOpenSearch) closedPITs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.closed...)
}

func (f *fakeOpenSearch) openedPITs() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.opened
}

func newFakeStore(t *testing.T, f *fakeOpenSearch) *Store {
	t.Helper()
	return newLimitedFakeStore(t, f, store.Limits{})
}

func newLimitedFakeStore(t *testing.T, f *fakeOpenSearch, l store.Limits) *Store {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	s, err := New(Options{Addresses: []string{srv.URL}, TokenKey: []byte("0123456789abcdef"), Limits: l})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// hitsOf answers a search with n hits of total matches, each with its sort values.
func hitsOf(n, total int, source string) string {
	return strings.Replace(hits(n, source, true), `"value":500`, fmt.Sprintf(`"value":%d`, total), 1)
}

// hits answers a search with n hits; withSort gives each its sort values, as OpenSearch does for a
// sorted search.
func hits(n int, source string, withSort bool) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"_index":"kubernetes-pod","_id":"u%d","_source":%s`, i, source)
		if withSort {
			fmt.Fprintf(&b, `,"sort":["member1","ns","p%d","u%d"]`, i, i)
		}
		b.WriteByte('}')
	}
	return `{"took":1,"pit_id":"pit-1","_shards":{"total":1,"successful":1,"failed":0},"hits":{"total":{"value":500,"relation":"eq"},"hits":[` + b.String() + `]}}`
}

// TestSearchClosesPITWhenFirstPageFails: a PIT opened for a first page that then fails is closed at
// once; left open, it would hold one of OpenSearch's 300 PIT slots for the whole keep-alive.
func TestSearchClosesPITWhenFirstPageFails(t *testing.T) {
	const pod = `{"object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}}`
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for _, tc := range []struct {
		name   string
		search http.HandlerFunc
		ctx    context.Context
		want   error
	}{
		{"the search is refused", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"error":{"root_cause":[{"type":"too_many_nested_clauses","reason":"maxClauseCount is set to 1024"}],"type":"search_phase_execution_exception"},"status":500}`)
		}, t.Context(), store.ErrRejected},
		{"OpenSearch is overloaded", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"error":{"type":"es_rejected_execution_exception"},"status":429}`)
		}, t.Context(), store.ErrUnavailable},
		{"some shards failed", func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, `{"_shards":{"total":2,"successful":1,"failed":1,"failures":[{"reason":{"type":"node_disconnected_exception"}}]},"hits":{"hits":[]}}`)
		}, t.Context(), store.ErrUnavailable},
		{"a document cannot be read", func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, hits(query.DefaultLimit+1, `{"name":"no object"}`, true))
		}, t.Context(), nil},
		{"the continue token cannot be issued", func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, hits(query.DefaultLimit+1, pod, false))
		}, t.Context(), nil},
		{"the client goes away during the search", func(w http.ResponseWriter, r *http.Request) {
			cancel()
			<-r.Context().Done()
		}, ctx, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeOpenSearch{t: t, search: tc.search}
			s := newFakeStore(t, f)
			q, err := query.Parse(url.Values{}, now)
			if err != nil {
				t.Fatal(err)
			}
			res, err := s.Search(tc.ctx, q)
			if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Search = %+v, %v; want an error that is %v", res, err, tc.want)
			}
			if got := f.closedPITs(); len(got) != 1 || got[0] != "pit-1" {
				t.Errorf("PITs closed: %q; want [pit-1]", got)
			}
		})
	}

	t.Run("a page that succeeds keeps its PIT for the next", func(t *testing.T) {
		f := &fakeOpenSearch{t: t, search: func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, hits(query.DefaultLimit+1, pod, true))
		}}
		s := newFakeStore(t, f)
		q, _ := query.Parse(url.Values{}, now)
		res, err := s.Search(t.Context(), q)
		if err != nil || res.Continue == "" || len(res.Items) != query.DefaultLimit {
			t.Fatalf("Search = %d items, continue %q, %v", len(res.Items), res.Continue, err)
		}
		if got := f.closedPITs(); len(got) != 0 {
			t.Errorf("PITs closed: %q; want none", got)
		}
	})
}

// TestSearchRejectsWhatShardsRefuse: a search some shards answer and others refuse as too large is
// a rejected query (400), not an unavailable backend (503) a client would retry.
func TestSearchRejectsWhatShardsRefuse(t *testing.T) {
	f := &fakeOpenSearch{t: t, search: func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"_shards":{"total":2,"successful":1,"failed":1,"failures":[{"shard":1,"index":"kubernetes-pod","reason":`+
			`{"type":"query_shard_exception","reason":"failed to create query","caused_by":{"type":"too_many_clauses","reason":"maxClauseCount is set to 1024"}}}]},"hits":{"hits":[]}}`)
	}}
	s := newFakeStore(t, f)
	q, _ := query.Parse(url.Values{}, now)
	if _, err := s.Search(t.Context(), q); !errors.Is(err, store.ErrRejected) || errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Search error %v; want store.ErrRejected only", err)
	}
}

// TestSearchFirstPage: a first page costs a PIT and one search that counts every match (no count
// before it); one that holds every match frees its PIT, and one that cannot have a PIT is read on
// the live indices.
func TestSearchFirstPage(t *testing.T) {
	const pod = `{"object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}},"epoch":3}`
	tooManyPITs := `{"error":{"root_cause":[{"type":"rejected_execution_exception","reason":"Trying to create too many Point In Time contexts"}],` +
		`"type":"rejected_execution_exception","reason":"Trying to create too many Point In Time contexts"},"status":429}`
	// What OpenSearch 2.19 answers for a PIT over a pattern that matches no index.
	noIndex := `{"error":{"root_cause":[{"type":"illegal_argument_exception","reason":"invalid id: [null]"}],"type":"illegal_argument_exception","reason":"invalid id: [null]"},"status":400}`
	for _, tc := range []struct {
		name         string
		search, live http.HandlerFunc
		pitRefused   string
		wantItems    int
		wantTotal    int64
		wantContinue bool
		wantClosed   []string
		wantWarning  bool
		wantErr      error
	}{
		{name: "more than a page: the PIT stays for the next",
			search:    respond(hitsOf(query.DefaultLimit+1, 500, pod)),
			wantItems: query.DefaultLimit, wantTotal: 500, wantContinue: true},
		{name: "every match in one page: the PIT is closed",
			search:    respond(hitsOf(3, 3, pod)),
			wantItems: 3, wantTotal: 3, wantClosed: []string{"pit-1"}},
		{name: "no PIT allowed, one page: no warning",
			pitRefused: tooManyPITs, live: respond(hitsOf(3, 3, pod)),
			wantItems: 3, wantTotal: 3},
		{name: "no PIT allowed, more than a page: paged without a snapshot, and says so",
			pitRefused: tooManyPITs, live: respond(hitsOf(query.DefaultLimit, 500, pod)),
			wantItems: query.DefaultLimit, wantTotal: 500, wantContinue: true, wantWarning: true},
		{name: "no index yet: an empty answer",
			pitRefused: noIndex, live: respond(`{"took":0,"hits":{"total":{"value":0,"relation":"eq"},"hits":[]}}`),
			wantItems: 0, wantTotal: 0},
		{name: "a refused PIT and more than a page: the refusal",
			pitRefused: noIndex, live: respond(hitsOf(query.DefaultLimit, 500, pod)),
			wantErr: store.ErrRejected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeOpenSearch{t: t, search: tc.search, live: tc.live, pitRefused: tc.pitRefused}
			s := newFakeStore(t, f)
			q, err := query.Parse(url.Values{}, now)
			if err != nil {
				t.Fatal(err)
			}
			res, err := s.Search(t.Context(), q)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Search error %v; want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Items) != tc.wantItems || res.Total != tc.wantTotal || (res.Continue != "") != tc.wantContinue {
				t.Errorf("Search = %d items, total %d, continue %q; want %d items, total %d, continue %v",
					len(res.Items), res.Total, res.Continue, tc.wantItems, tc.wantTotal, tc.wantContinue)
			}
			if (len(res.Warnings) > 0) != tc.wantWarning {
				t.Errorf("warnings %q; want some: %v", res.Warnings, tc.wantWarning)
			}
			for i, it := range res.Items {
				if string(it) != gjson.Get(pod, "object").Raw || res.Epochs[i] != 3 {
					t.Fatalf("item %d = %s, epoch %d; want the stored object, epoch 3", i, it, res.Epochs[i])
				}
			}
			if err := s.Close(); err != nil { // waits for the PITs being closed
				t.Fatal(err)
			}
			if got := f.closedPITs(); !slices.Equal(got, tc.wantClosed) {
				t.Errorf("PITs closed: %q; want %q", got, tc.wantClosed)
			}
		})
	}
}

func respond(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, body) }
}

// TestResult reads a search answer as OpenSearch may write it (spaced out, escapes in strings, a
// trimmed object with its whole copy beside it): every hit's stored object as written, its epoch
// and sort values, the total, took and PIT, the facets after the hits.
func TestResult(t *testing.T) {
	resp := []byte(`{ "pit_id" : "pit-\"2\"", "took" : 7, "_shards" : {"total":1,"successful":1,"failed":0},
	  "hits" : { "total" : { "value" : 12, "relation" : "gte" }, "max_score" : null, "hits" : [
	    { "_index" : "kubernetes-pod-v1", "_id" : "u1", "_score" : null,
	      "_source" : { "epoch" : 4, "object" : {"kind":"Pod","metadata":{"name":"a\\\"}"}} },
	      "sort" : [ "member1", "ns", "a", "u1" ] },
	    { "_index" : "kubernetes-pod-v1", "_id" : "u2", "_source" : { "object" : {"kind":"Pod"}, "fullObject" : {"kind":"Pod","data":{"k":"[{"}} },
	      "sort" : [ "member1", "ns", "b", "u2" ] }
	  ] },
	  "aggregations" : { "facet0" : { "doc_count_error_upper_bound" : 0, "sum_other_doc_count" : 1, "buckets" : [ { "key" : "member1", "doc_count" : 11 } ] } } }`)
	q, err := query.Parse(url.Values{query.ParamFacets: {"cluster"}}, now)
	if err != nil {
		t.Fatal(err)
	}
	res, page, err := (&Store{}).result(q, resp)
	if err != nil {
		t.Fatal(err)
	}
	wantItems := []string{`{"kind":"Pod","metadata":{"name":"a\\\"}"}}`, `{"kind":"Pod","data":{"k":"[{"}}`}
	if len(res.Items) != 2 || string(res.Items[0]) != wantItems[0] || string(res.Items[1]) != wantItems[1] {
		t.Errorf("items %q; want %q", res.Items, wantItems)
	}
	if !slices.Equal(res.Epochs, []int64{4, 0}) || res.Total != 12 || !res.TotalIsLowerBound || res.Took != 7*time.Millisecond {
		t.Errorf("epochs %v, total %d (lower bound %v), took %s; want [4 0], 12 (true), 7ms", res.Epochs, res.Total, res.TotalIsLowerBound, res.Took)
	}
	if page.pit != `pit-"2"` || len(page.sorts) != 2 || string(page.sorts[1]) != `[ "member1", "ns", "b", "u2" ]` {
		t.Errorf("pit %q, sorts %q", page.pit, page.sorts)
	}
	if len(res.Facets) != 1 || res.Facets[0].Other != 1 || len(res.Facets[0].Buckets) != 1 || res.Facets[0].Buckets[0] != (store.Bucket{Value: "member1", Count: 11}) {
		t.Errorf("facets %+v", res.Facets)
	}
	for _, bad := range []string{`{"hits":{"hits":[{"_source":{"object":{"kind":"Pod"}}`, `{"hits":{"hits":[{"_source":{"name":"no object"}}]}}`, `not json`} {
		if _, _, err := (&Store{}).result(q, []byte(bad)); err == nil {
			t.Errorf("result(%s) reads; want an error", bad)
		}
	}
}
