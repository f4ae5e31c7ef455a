package osstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/mappings"
)

// Search answers one page of q.
//
// A first page starts with a count (no documents fetched), unless it looks up exact names. When every
// match fits in one page, one plain search answers it: single-page answers never pay for a
// point-in-time. Otherwise the page is read inside a new PIT, so the pages that follow read the same
// snapshot; the count costs far less than fetching the page twice would.
func (s *Store) Search(ctx context.Context, q *query.Query) (*store.Result, error) {
	if q.Continue != "" {
		return s.next(ctx, q)
	}
	body := Compile(q)
	// A lookup by exact names is expected to fit in one page: it skips the count.
	onePage := len(q.Names) > 0
	if !onePage {
		resp, err := s.searchLive(ctx, "_count", map[string]any{"query": body["query"]})
		if err != nil {
			return nil, err
		}
		onePage = gjson.GetBytes(resp, "count").Int() <= int64(q.Limit)
	}
	var (
		res  *store.Result
		resp []byte
		err  error
	)
	if onePage {
		if res, resp, err = s.firstPageLive(ctx, q, body); err != nil || res.Total <= int64(len(res.Items)) {
			return res, err
		}
		// More than a page after all (names used widely, or matches that arrived after the count):
		// page it like any other.
	}
	tok := token{Now: q.Now.UnixNano()}
	pit, err := s.openPIT(ctx)
	switch {
	case errors.Is(err, errTooManyPITs):
		// Every paged query holds a PIT until its keep-alive runs out; when OpenSearch allows no more,
		// paging goes on without a snapshot rather than failing, and says so on every page.
		if res == nil {
			if res, resp, err = s.firstPageLive(ctx, q, body); err != nil {
				return nil, err
			}
		}
		res.Warnings = append(res.Warnings, noSnapshotWarning)
		tok.Total, tok.Lower = res.Total, res.TotalIsLowerBound
		return s.page(ctx, q, res, resp, tok, true)
	case err != nil:
		return nil, err
	}
	return s.firstPagePIT(ctx, q, body, pit, tok)
}

// firstPagePIT reads a first page inside a new PIT. If the page fails, no token carries the PIT on,
// so it is closed: left open, it would hold one of OpenSearch's search.max_open_pit_context slots for
// the whole keep-alive.
func (s *Store) firstPagePIT(ctx context.Context, q *query.Query, body map[string]any, pit string, tok token) (*store.Result, error) {
	body["pit"] = map[string]any{"id": pit, "keep_alive": keepAlive(s.keepAlive)}
	body["size"] = q.Limit + 1
	var res *store.Result
	resp, err := s.search(ctx, "/_search", nil, body)
	if err == nil {
		res, err = s.result(q, resp)
	}
	if err != nil {
		s.closePIT(ctx, pit)
		return nil, err
	}
	tok.Total, tok.Lower = res.Total, res.TotalIsLowerBound
	return s.page(ctx, q, res, resp, tok, false) // closes the PIT itself when it cannot issue a token
}

// firstPageLive runs a first page on the live indices, without a snapshot.
func (s *Store) firstPageLive(ctx context.Context, q *query.Query, body map[string]any) (*store.Result, []byte, error) {
	resp, err := s.searchLive(ctx, "_search", body)
	if err != nil {
		return nil, nil, err
	}
	res, err := s.result(q, resp)
	return res, resp, err
}

// searchLive sends a _search or _count to every index of the installation; a missing index (no
// object of that kind yet, or none at all) matches nothing rather than failing.
func (s *Store) searchLive(ctx context.Context, endpoint string, body map[string]any) ([]byte, error) {
	return s.search(ctx, "/"+s.pattern+"/"+endpoint, url.Values{"ignore_unavailable": {"true"}, "allow_no_indices": {"true"}}, body)
}

// noSnapshotWarning is carried by pages read without a point-in-time.
const noSnapshotWarning = "pages are not one snapshot: OpenSearch refused another point-in-time " +
	"(search.max_open_pit_context); objects changing during the walk may be missed or repeated"

// next answers a page after the first, inside the token's snapshot.
func (s *Store) next(ctx context.Context, q *query.Query) (*store.Result, error) {
	tok, err := s.tokens.decode(q.Continue)
	if err != nil {
		return nil, err
	}
	if tok.Query != q.Fingerprint() {
		return nil, fmt.Errorf("%w: it belongs to another query (selectors, filters and sort must not change between pages)", store.ErrBadToken)
	}
	if s.now().After(time.Unix(0, tok.Expires)) {
		return nil, fmt.Errorf("%w: the snapshot of this query expired; start again without continue", store.ErrExpired)
	}
	q.Now = time.Unix(0, tok.Now).UTC()
	body := Compile(q)
	delete(body, "aggs")
	body["track_total_hits"] = false
	body["size"] = q.Limit + 1
	body["search_after"] = tok.After
	var resp []byte
	if tok.PIT == "" {
		resp, err = s.searchLive(ctx, "_search", body)
	} else {
		body["pit"] = map[string]any{"id": tok.PIT, "keep_alive": keepAlive(s.keepAlive)}
		resp, err = s.search(ctx, "/_search", nil, body)
	}
	if err != nil {
		return nil, err
	}
	res, err := s.result(q, resp)
	if err != nil {
		return nil, err
	}
	res.Total, res.TotalIsLowerBound = tok.Total, tok.Lower
	if tok.PIT == "" {
		res.Warnings = append(res.Warnings, noSnapshotWarning)
	}
	return s.page(ctx, q, res, resp, tok, tok.PIT == "")
}

// page trims a search of Limit+1 hits to Limit and issues the token for the rest, or closes the
// PIT after the last page. Without a snapshot (plain), a first page has only Limit hits: the total
// tells whether more follow.
func (s *Store) page(ctx context.Context, q *query.Query, res *store.Result, resp []byte, tok token, plain bool) (*store.Result, error) {
	hits := gjson.GetBytes(resp, "hits.hits").Array()
	pit := gjson.GetBytes(resp, "pit_id").Str
	last := len(hits) <= q.Limit
	if plain && tok.After == nil {
		last = res.Total <= int64(len(hits))
	}
	if last {
		// The PIT would expire by itself; closing it frees the node's resources now. A failure
		// changes nothing for this answer, so it is not reported.
		s.closePIT(ctx, pit)
		return res, nil
	}
	res.Items = res.Items[:min(q.Limit, len(res.Items))]
	res.Epochs = res.Epochs[:len(res.Items)]
	tok.Query = q.Fingerprint()
	tok.PIT = pit
	tok.After = json.RawMessage(hits[len(res.Items)-1].Get("sort").Raw)
	tok.Expires = s.now().Add(s.keepAlive).UnixNano()
	c, err := s.tokens.encode(tok)
	if err != nil {
		s.closePIT(ctx, pit) // nothing can continue in it
		return nil, err
	}
	res.Continue = c
	return res, nil
}

func keepAlive(d time.Duration) string { return fmt.Sprintf("%dms", d.Milliseconds()) }

// result reads hits, total and facets of a search response.
func (s *Store) result(q *query.Query, resp []byte) (*store.Result, error) {
	r := gjson.ParseBytes(resp)
	res := &store.Result{
		Total:             r.Get("hits.total.value").Int(),
		TotalIsLowerBound: r.Get("hits.total.relation").Str == "gte",
		Took:              time.Duration(r.Get("took").Int()) * time.Millisecond,
	}
	for _, h := range r.Get("hits.hits").Array() {
		obj, err := mappings.StoredObject([]byte(h.Get("_source").Raw))
		if err != nil {
			return nil, fmt.Errorf("document %s in %s: %w", h.Get("_id").Str, h.Get("_index").Str, err)
		}
		res.Items = append(res.Items, obj)
		res.Epochs = append(res.Epochs, h.Get("_source."+document.FieldEpoch).Int())
	}
	if v := r.Get("aggregations." + versionsAgg + ".pair.cluster.buckets"); v.Exists() {
		res.Versions = map[string]int64{}
		for _, b := range v.Array() {
			res.Versions[b.Get("key").Str] = b.Get("rv.value").Int()
		}
	}
	// Facets come with the first page only: later pages do not ask for the aggregations.
	if q.Continue != "" {
		return res, nil
	}
	for i, f := range q.Facets {
		agg := r.Get("aggregations." + facetAggName(i))
		fr := store.FacetResult{Name: f.Name(), Buckets: []store.Bucket{}, Other: agg.Get("sum_other_doc_count").Int(),
			ErrorBound: agg.Get("doc_count_error_upper_bound").Int()}
		for _, b := range agg.Get("buckets").Array() {
			fr.Buckets = append(fr.Buckets, store.Bucket{Value: bucketValue(f, b), Count: b.Get("doc_count").Int()})
		}
		res.Facets = append(res.Facets, fr)
	}
	return res, nil
}

// bucketValue names a bucket as a user would write it: deployments.apps, or a label's value.
func bucketValue(f query.Facet, b gjson.Result) string {
	switch f.Dimension {
	case query.FacetResource:
		key := b.Get("key").Array()
		if len(key) == 2 && key[1].String() != "" {
			return key[0].String() + "." + key[1].String()
		}
		if len(key) > 0 {
			return key[0].String()
		}
	case query.FacetLabel:
		return strings.TrimPrefix(b.Get("key").String(), f.Key+"=")
	}
	return b.Get("key").String()
}

func (s *Store) openPIT(ctx context.Context) (string, error) {
	path := "/" + s.pattern + "/_search/point_in_time"
	status, resp, err := s.do(ctx, http.MethodPost, request{path: path, query: url.Values{"keep_alive": {keepAlive(s.keepAlive)}}})
	if err != nil {
		return "", err
	}
	if status != http.StatusOK {
		return "", responseError("POST", path, status, resp)
	}
	return gjson.GetBytes(resp, "pit_id").Str, nil
}

// closePIT frees a PIT, also when ctx is done: a search that timed out or whose client went away is
// the likeliest to leave one behind.
func (s *Store) closePIT(ctx context.Context, pit string) {
	if pit == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closePITTimeout)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"pit_id": []string{pit}}) // a map of strings: cannot fail
	_, _, _ = s.do(ctx, http.MethodDelete, request{path: "/_search/point_in_time", body: body})
}

// Release frees the snapshot a continue token pages in, for a client that stops before the last
// page (a broken-off list, a watch's initial events ended early); left alone, it holds one of
// OpenSearch's search.max_open_pit_context slots until the keep-alive passes. A token that does
// not decode has nothing to free.
func (s *Store) Release(ctx context.Context, continueToken string) {
	if continueToken == "" {
		return
	}
	if tok, err := s.tokens.decode(continueToken); err == nil {
		s.closePIT(ctx, tok.PIT)
	}
}

// closePITTimeout bounds closing a PIT; past it, the keep-alive frees it.
const closePITTimeout = 5 * time.Second

func (s *Store) search(ctx context.Context, path string, params url.Values, body map[string]any) ([]byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode search: %w", err)
	}
	status, resp, err := s.do(ctx, http.MethodPost, request{path: path, query: params, body: b})
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, responseError("POST", path, status, resp)
	}
	if err := shardFailure(path, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// Counts returns the number of indexed documents per cluster and resource, exact (a composite
// aggregation, paged).
//
// scope limits the counts to what a subject may see (nil: everything), inside the aggregation's
// query like every search's.
func (s *Store) Counts(ctx context.Context, scope *query.Scope) ([]store.Count, error) {
	var (
		out   []store.Count
		after map[string]any
	)
	for {
		comp := map[string]any{"size": 1000, "sources": []any{
			map[string]any{"cluster": map[string]any{"terms": map[string]any{"field": document.FieldCluster}}},
			map[string]any{"group": map[string]any{"terms": map[string]any{"field": document.FieldGroup, "missing_bucket": true}}},
			map[string]any{"resource": map[string]any{"terms": map[string]any{"field": document.FieldResource}}},
		}}
		if after != nil {
			comp["after"] = after
		}
		body := map[string]any{"size": 0, "aggs": map[string]any{"pairs": map[string]any{"composite": comp}}}
		if scope != nil {
			body["query"] = compileScope(scope)
		}
		resp, err := s.searchLive(ctx, "_search", body)
		if err != nil {
			return nil, fmt.Errorf("count documents: %w", err)
		}
		agg := gjson.GetBytes(resp, "aggregations.pairs")
		buckets := agg.Get("buckets").Array()
		for _, b := range buckets {
			out = append(out, store.Count{Cluster: b.Get("key.cluster").String(), Group: b.Get("key.group").String(),
				Resource: b.Get("key.resource").String(), Documents: b.Get("doc_count").Int()})
		}
		ak := agg.Get("after_key")
		if len(buckets) == 0 || !ak.Exists() {
			return out, nil
		}
		after = map[string]any{}
		if err := json.Unmarshal([]byte(ak.Raw), &after); err != nil {
			return nil, fmt.Errorf("count documents: after_key: %w", err)
		}
	}
}

// Watermarks reads every stored watermark, ordered by their pair's ID ("cluster/group/resource" as
// one string, so cluster "prod-eu" comes before "prod"). They trail the
// indexers' progress by about their watermark interval. A missing state index means none yet.
func (s *Store) Watermarks(ctx context.Context) ([]store.Watermark, error) {
	var (
		out   []store.Watermark
		after []string
	)
	for {
		q := map[string]any{
			"size": 1000, "sort": []any{map[string]any{"key": "asc"}},
			// Watermarks only: the state index also holds the indexers' roll leases, which have no key.
			"query": map[string]any{"exists": map[string]any{"field": "key"}},
		}
		if after != nil {
			q["search_after"] = after
		}
		resp, err := s.search(ctx, "/"+s.stateIndex+"/_search", url.Values{"ignore_unavailable": {"true"}, "allow_no_indices": {"true"}}, q)
		if err != nil {
			return nil, fmt.Errorf("read watermarks: %w", err)
		}
		hits := gjson.GetBytes(resp, "hits.hits").Array()
		for _, h := range hits {
			var w store.Watermark
			if err := json.Unmarshal([]byte(h.Get("_source").Raw), &w); err != nil {
				return nil, fmt.Errorf("read watermarks: document %s: %w", h.Get("_id").Str, err)
			}
			out = append(out, w)
		}
		if len(hits) < 1000 {
			return out, nil
		}
		after = []string{hits[len(hits)-1].Get("sort.0").String()}
	}
}
