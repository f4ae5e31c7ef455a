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
// A first page is read inside a new point-in-time (PIT), in one search that also counts every
// match exactly (track_total_hits), so the pages that follow read the same snapshot: two requests,
// the PIT's open and the search. A first page that holds every match needs no snapshot: its PIT is
// closed after the answer, off the request's path, and never counts against a bound below. (A
// count first, to skip the PIT of a one-page answer, would put a third request on the path of
// every larger one.) A lookup by exact names is expected to fit in one page and skips the PIT.
//
// The PITs of continue tokens are counted per subject and for the process (store.Limits): a first
// page past a bound closes the least recently used idle PIT of a client token, whose token then
// answers ErrExpired. Searches by fuzzy name past the subject's bound are ErrThrottled.
func (s *Store) Search(ctx context.Context, q *query.Query) (*store.Result, error) {
	if q.Costly() {
		done, err := s.fuzzy.Acquire(q.Subject)
		if err != nil {
			return nil, err
		}
		defer done()
	}
	if q.Continue != "" {
		return s.next(ctx, q)
	}
	body := Compile(q)
	if len(q.Names) > 0 || q.Peek {
		res, _, err := s.firstPageLive(ctx, q, body)
		if err != nil || q.Peek || res.Total <= int64(len(res.Items)) {
			if res != nil && q.Peek {
				res.Continue = ""
			}
			return res, err
		}
		// More than a page after all (names used widely): page it like any other.
	}
	tok := token{Now: q.Now.UnixNano()}
	pit, err := s.openPIT(ctx)
	switch {
	case errors.Is(err, errTooManyPITs):
		// Other processes (query API replicas) hold OpenSearch's PITs: paging goes on without a
		// snapshot rather than failing, and says so on every page.
		return s.firstPagePlain(ctx, q, body, tok, noSnapshotWarning, nil)
	case errors.Is(err, store.ErrRejected):
		// OpenSearch 2.19 refuses a PIT over a pattern that matches no index (an installation
		// that has indexed nothing yet): the live search answers it, empty. Whatever else it holds
		// must fit one page: more would need the snapshot that was refused.
		return s.firstPagePlain(ctx, q, body, tok, "", err)
	case err != nil:
		return nil, err
	}
	return s.firstPagePIT(ctx, q, body, pit, tok)
}

// firstPagePlain reads a first page on the live indices, when no PIT could be opened. With
// pitErr set, an answer of more than one page fails with it; without, it is paged without a
// snapshot and carries warning.
func (s *Store) firstPagePlain(ctx context.Context, q *query.Query, body map[string]any, tok token, warning string, pitErr error) (*store.Result, error) {
	res, page, err := s.firstPageLive(ctx, q, body)
	if err != nil {
		return nil, err
	}
	if res.Total <= int64(len(res.Items)) {
		return res, nil // one page: no snapshot needed, nothing to warn about
	}
	if pitErr != nil {
		return nil, pitErr
	}
	res.Warnings = append(res.Warnings, warning)
	tok.Total, tok.Lower = res.Total, res.TotalIsLowerBound
	return s.page(ctx, q, res, page, tok, true)
}

// firstPagePIT reads a first page inside a new PIT. If the page fails, no token carries the PIT
// on, so it is closed: left open, it would hold one of OpenSearch's search.max_open_pit_context
// slots for the whole keep-alive. An answer of one page closes it too and holds nothing; one with
// more pages is admitted to the ledger (s.pits) only then, so that a one-page answer never closes
// another token's PIT to make room.
func (s *Store) firstPagePIT(ctx context.Context, q *query.Query, body map[string]any, pit string, tok token) (*store.Result, error) {
	body["pit"] = map[string]any{"id": pit, "keep_alive": keepAlive(s.keepAlive)}
	body["size"] = q.Limit + 1
	var (
		res  *store.Result
		page hitPage
	)
	resp, err := s.search(ctx, "/_search", nil, body)
	if err == nil {
		res, page, err = s.result(q, resp)
	}
	if err != nil {
		s.closePIT(ctx, pit)
		return nil, err
	}
	tok.Total, tok.Lower = res.Total, res.TotalIsLowerBound
	if len(page.sorts) <= q.Limit {
		return s.page(ctx, q, res, page, tok, false) // the last page: page closes the PIT
	}
	// The PITs whose keep-alive passed in the ledger are left to OpenSearch, which frees them at
	// the same keep-alive — unless another replica read a page in one since (a continue token pages
	// on any replica), which kept it alive for that client: closing it would answer its next page
	// 410. Evicted ones are closed: their tokens answer ErrExpired from now on.
	snap, evicted, _, err := s.pits.Open(q.Subject, q.Drain, s.now())
	for _, p := range evicted {
		s.closePITLater(ctx, p)
	}
	if err != nil {
		// Every PIT the subject (or the process) may hold has a page being read in it, or is a
		// list the server reads to the end: the pages after this one are read without a
		// snapshot (the sort, uid last, is the same), and say so.
		s.closePITLater(ctx, pit)
		page.pit = ""
		res.Warnings = append(res.Warnings, "pages are not one snapshot ("+err.Error()+")"+changingWarning)
		return s.page(ctx, q, res, page, tok, true)
	}
	tok.Snap = snap
	res, err = s.page(ctx, q, res, page, tok, false) // closes the PIT itself when it cannot issue a token
	if err != nil || res.Continue == "" {
		s.pits.Remove(snap)
		return res, err
	}
	s.pits.Hold(snap, page.pit, s.now().Add(s.keepAlive))
	return res, nil
}

// firstPageLive runs a first page on the live indices, without a snapshot.
func (s *Store) firstPageLive(ctx context.Context, q *query.Query, body map[string]any) (*store.Result, hitPage, error) {
	resp, err := s.searchLive(ctx, "_search", body)
	if err != nil {
		return nil, hitPage{}, err
	}
	return s.result(q, resp)
}

// searchLive sends a _search to every index of the installation; a missing index (no object of
// that kind yet, or none at all) matches nothing rather than failing.
func (s *Store) searchLive(ctx context.Context, endpoint string, body map[string]any) ([]byte, error) {
	return s.search(ctx, "/"+s.pattern+"/"+endpoint, url.Values{"ignore_unavailable": {"true"}, "allow_no_indices": {"true"}}, body)
}

// noSnapshotWarning is carried by the pages of a query OpenSearch refused a point-in-time;
// changingWarning ends every warning of pages read without one.
const (
	changingWarning   = "; objects changing during the walk may be missed or repeated"
	noSnapshotWarning = "pages are not one snapshot: OpenSearch refused another point-in-time " +
		"(search.max_open_pit_context)" + changingWarning
	plainWarning = "pages are not one snapshot: no point-in-time could be opened for this query" + changingWarning
)

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
	// A PIT this process counts is not closed to make room while the page is read; one it does
	// not know (opened by another replica, or past the ledger's keep-alive) is read all the same.
	var held bool
	if tok.Snap != "" {
		if _, held = s.pits.Acquire(tok.Snap); !held && s.pits.Evicted(tok.Snap) {
			return nil, s.pits.Gone(tok.Snap)
		}
	}
	pit := tok.PIT
	if held {
		defer func() { s.pits.Release(tok.Snap, pit, s.now().Add(s.keepAlive)) }()
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
	res, page, err := s.result(q, resp)
	if err != nil {
		return nil, err
	}
	res.Total, res.TotalIsLowerBound = tok.Total, tok.Lower
	if tok.PIT == "" {
		res.Warnings = append(res.Warnings, plainWarning)
	}
	if page.pit != "" {
		pit = page.pit
	}
	res, err = s.page(ctx, q, res, page, tok, tok.PIT == "")
	if held && (err != nil || res.Continue == "") {
		s.pits.Remove(tok.Snap) // the last page, or no token could follow it: page closed the PIT
	}
	return res, err
}

// page trims a search of Limit+1 hits to Limit and issues the token for the rest, or closes the
// PIT after the last page. Without a snapshot (plain), a first page has only Limit hits: the total
// tells whether more follow.
func (s *Store) page(ctx context.Context, q *query.Query, res *store.Result, hits hitPage, tok token, plain bool) (*store.Result, error) {
	last := len(hits.sorts) <= q.Limit
	if plain && tok.After == nil {
		last = res.Total <= int64(len(hits.sorts))
	}
	if last {
		// The PIT would expire by itself; closing it frees the node's resources now, after the
		// answer rather than before it. A failure changes nothing for this answer, so it is not
		// reported.
		s.closePITLater(ctx, hits.pit)
		return res, nil
	}
	res.Items = res.Items[:min(q.Limit, len(res.Items))]
	res.Epochs = res.Epochs[:len(res.Items)]
	tok.Query = q.Fingerprint()
	tok.PIT = hits.pit
	tok.After = json.RawMessage(hits.sorts[len(res.Items)-1])
	tok.Expires = s.now().Add(s.keepAlive).UnixNano()
	var c string
	err := errors.New("osstore: a hit without sort values: no page can follow it")
	if len(tok.After) > 0 {
		c, err = s.tokens.encode(tok)
	}
	if err != nil {
		s.closePIT(ctx, hits.pit) // nothing can continue in it
		return nil, err
	}
	res.Continue = c
	return res, nil
}

func keepAlive(d time.Duration) string { return fmt.Sprintf("%dms", d.Milliseconds()) }

// hitPage is what paging needs of a search response besides its Result: the PIT it ran in (its id
// may change between pages) and each hit's sort values (nil for a hit without).
type hitPage struct {
	pit   string
	sorts [][]byte
}

// result reads hits, total and facets of a search response, in one pass over it (scan.go): items
// and sort values are slices of resp, not copies.
func (s *Store) result(q *query.Query, resp []byte) (*store.Result, hitPage, error) {
	res := &store.Result{}
	var (
		page hitPage
		aggs []byte
		err  error
	)
	end := eachMember(resp, skipSpace(resp, 0), func(key []byte, v int) int {
		if string(key) == "hits" {
			return eachMember(resp, v, func(key []byte, v int) int {
				if string(key) == "hits" {
					var end int
					end, err = readHits(resp, v, res, &page)
					return end
				}
				end := skipValue(resp, v)
				if end > 0 && string(key) == "total" {
					total := gjson.ParseBytes(resp[v:end])
					res.Total, res.TotalIsLowerBound = total.Get("value").Int(), total.Get("relation").Str == "gte"
				}
				return end
			})
		}
		end := skipValue(resp, v)
		if end < 0 {
			return end
		}
		switch string(key) {
		case "took":
			res.Took = time.Duration(gjson.ParseBytes(resp[v:end]).Int()) * time.Millisecond
		case "pit_id":
			page.pit = gjson.ParseBytes(resp[v:end]).Str
		case "aggregations":
			aggs = resp[v:end]
		}
		return end
	})
	switch {
	case err != nil:
		return nil, hitPage{}, err
	case end < 0:
		return nil, hitPage{}, fmt.Errorf("read search response: %w", errBadJSON)
	}
	if aggs == nil {
		return res, page, nil
	}
	r := gjson.ParseBytes(aggs)
	if v := r.Get(versionsAgg + ".pair.cluster.buckets"); v.Exists() {
		res.Versions = map[string]int64{}
		for _, b := range v.Array() {
			res.Versions[b.Get("key").Str] = b.Get("rv.value").Int()
		}
	}
	// Facets come with the first page only: later pages do not ask for the aggregations.
	if q.Continue != "" {
		return res, page, nil
	}
	for i, f := range q.Facets {
		agg := r.Get(facetAggName(i))
		fr := store.FacetResult{Name: f.Name(), Buckets: []store.Bucket{}, Other: agg.Get("sum_other_doc_count").Int(),
			ErrorBound: agg.Get("doc_count_error_upper_bound").Int()}
		for _, b := range agg.Get("buckets").Array() {
			fr.Buckets = append(fr.Buckets, store.Bucket{Value: bucketValue(f, b), Count: b.Get("doc_count").Int()})
		}
		res.Facets = append(res.Facets, fr)
	}
	return res, page, nil
}

// readHits reads the hits.hits array that starts at resp[i]: the stored object and epoch of every
// hit go to res, its sort values to page. The object is the source's fullObject when it has one,
// else its object, as mappings.StoredObject reads it. It returns the index past the array.
func readHits(resp []byte, i int, res *store.Result, page *hitPage) (int, error) {
	var err error
	end := eachElement(resp, i, func(v int) int {
		var (
			obj, full, sort, id, index []byte
			epoch                      int64
		)
		end := eachMember(resp, v, func(key []byte, v int) int {
			if string(key) == "_source" {
				return eachMember(resp, v, func(key []byte, v int) int {
					end := skipValue(resp, v)
					if end < 0 {
						return end
					}
					switch string(key) {
					case mappings.FieldFullObject:
						full = resp[v:end:end]
					case mappings.FieldObject:
						obj = resp[v:end:end]
					case document.FieldEpoch:
						epoch = gjson.ParseBytes(resp[v:end]).Int()
					}
					return end
				})
			}
			end := skipValue(resp, v)
			if end < 0 {
				return end
			}
			switch string(key) {
			case "sort":
				sort = resp[v:end:end]
			case "_id":
				id = resp[v:end]
			case "_index":
				index = resp[v:end]
			}
			return end
		})
		if end < 0 {
			return end
		}
		if len(full) > 0 && full[0] == '{' {
			obj = full
		}
		if len(obj) == 0 || obj[0] != '{' {
			err = fmt.Errorf("document %s in %s: %w", gjson.ParseBytes(id).Str, gjson.ParseBytes(index).Str, mappings.ErrNoObject)
			return -1
		}
		res.Items = append(res.Items, obj)
		res.Epochs = append(res.Epochs, epoch)
		page.sorts = append(page.sorts, sort)
		return end
	})
	if err != nil {
		return -1, err
	}
	if end < 0 {
		return -1, fmt.Errorf("read search hits: %w", errBadJSON)
	}
	return end, nil
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

// closePITLater closes a PIT in the background, so the answer that no longer needs it does not
// wait; Close waits for it.
func (s *Store) closePITLater(ctx context.Context, pit string) {
	if pit == "" {
		return
	}
	ctx = context.WithoutCancel(ctx)
	s.closing.Go(func() { s.closePIT(ctx, pit) })
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
		s.pits.Remove(tok.Snap)
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
