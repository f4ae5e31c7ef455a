package blevestore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search"
	bq "github.com/blevesearch/bleve/v2/search/query"
	index "github.com/blevesearch/bleve_index_api"

	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/store"
)

// A search reads one snapshot of the index (a bleve index reader). A first page is one pass over
// the matches: it counts them (exact totals) and their facets, and keeps the top Limit in the
// query's order (rank.go). When more follow, the snapshot is held for the continue token until the
// keep-alive passes without a page, the last page is read, or the token is released; a later page
// is the top Limit after the token's last item, in that snapshot, so the pages are one consistent
// snapshot while documents change, as osstore's point-in-time pages are. A query the server reads
// to the end at once (query.Query.Drain) ranks every match once on its second page instead, and
// its snapshot holds that order for the pages after (its first page is the top alone: some such
// queries want the facets of a page of one, and release it).

// noSnapshotWarning is carried by pages read without a snapshot.
const noSnapshotWarning = "pages are not one snapshot: no snapshot could be held for this query; " +
	"objects changing during the walk may be missed or repeated"

// queryMapping serves the searchers of compiled queries; they name every field, so it is never
// asked for anything.
var queryMapping = bleve.NewIndexMapping()

// Search answers one page of q.
//
// Snapshots are counted per subject and for the store, as osstore counts its point-in-times
// (store.Limits): a first page past a bound closes the least recently used idle snapshot of a
// client token, whose token then answers ErrExpired. Searches by fuzzy name past the subject's
// bound are ErrThrottled.
func (s *Store) Search(ctx context.Context, q *query.Query) (*store.Result, error) {
	if q.Limit < 1 || q.Limit > query.MaxLimit {
		return nil, rejected("limit %d: want 1 to %d", q.Limit, query.MaxLimit)
	}
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
	start := time.Now()
	r, err := s.reader()
	if err != nil {
		return nil, err
	}
	res, last, err := s.first(ctx, q, r)
	if err != nil {
		return nil, errors.Join(err, r.Close())
	}
	if res.Total <= int64(q.Limit) || q.Peek {
		res.Took = time.Since(start)
		return res, r.Close()
	}
	tok := token{Query: q.Fingerprint(), Offset: q.Limit, After: last, Now: q.Now.UnixNano(), Total: res.Total,
		Expires: s.now().Add(s.keepAlive).UnixNano()}
	id, evicted, expired, err := s.snaps.Open(q.Subject, q.Drain, s.now())
	for _, sn := range append(evicted, expired...) {
		_ = sn.r.Close() // a reader of a closed index has nothing left to free
	}
	switch {
	case err == nil && s.snaps.Hold(id, &snapshot{r: r}, time.Unix(0, tok.Expires)):
		tok.Snapshot = id
	default:
		res.Warnings = append(res.Warnings, noSnapshotWarning)
		if err := r.Close(); err != nil {
			return nil, err
		}
	}
	if res.Continue, err = s.tokens.encode(tok); err != nil {
		s.free(tok.Snapshot)
		return nil, err
	}
	res.Took = time.Since(start)
	return res, nil
}

// first reads the first page of q in r, with its total, facets and versions, and the place of the
// page's last item.
func (s *Store) first(ctx context.Context, q *query.Query, r index.IndexReader) (res *store.Result, last cursor, err error) {
	cq, err := compile(q, r)
	if err != nil {
		return nil, cursor{}, err
	}
	k, err := newRanker(ctx, q, r, true, false)
	if err != nil {
		return nil, cursor{}, err
	}
	res = &store.Result{}
	page, total, err := k.top(cq, q.Limit, nil)
	if err != nil {
		return nil, cursor{}, err
	}
	res.Total = total
	if k.facets != nil {
		res.Facets = k.facets.results()
	}
	if q.Versions {
		if res.Versions, err = versions(ctx, r, q); err != nil {
			return nil, cursor{}, err
		}
	}
	if last, err = k.place(page); err != nil {
		return nil, cursor{}, err
	}
	if err := s.fill(res, r, ids(page), q); err != nil {
		return nil, cursor{}, err
	}
	return res, last, nil
}

// rankWholeAfter is how many pages a query reads, each ranking the top of what follows its
// token, before its next page ranks its whole order once in the snapshot (and the pages after that
// are slices of it). Ranking every match costs a few passes' worth (sort keys kept, then sorted):
// a client looking at a few pages pays a pass each, and one reading every page no more than about
// twice what ranking once up front would have cost.
const rankWholeAfter = 3

// next answers a page after the first, inside the token's snapshot.
func (s *Store) next(ctx context.Context, q *query.Query) (*store.Result, error) {
	start := time.Now()
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
	res := &store.Result{Total: tok.Total}
	var (
		r  index.IndexReader
		sn *snapshot
	)
	if tok.Snapshot != "" {
		held, ok := s.snaps.Acquire(tok.Snapshot)
		if !ok {
			return nil, s.snaps.Gone(tok.Snapshot)
		}
		defer func() {
			if s.snaps.Release(tok.Snapshot, held, time.Unix(0, tok.Expires)) {
				_ = held.r.Close()
			}
		}()
		r, sn = held.r, held
	} else {
		if r, err = s.reader(); err != nil {
			return nil, err
		}
		defer r.Close()
		res.Warnings = append(res.Warnings, noSnapshotWarning)
	}
	var (
		page []index.IndexInternalID
		more bool
	)
	if sn != nil && (q.Drain || sn.isRanked() || tok.Offset >= rankWholeAfter*q.Limit) {
		order, err := sn.wholeOrder(func() ([]index.IndexInternalID, error) {
			cq, k, err := s.ranker(ctx, q, r, true)
			if err != nil {
				return nil, err
			}
			all, err := k.all(cq)
			return compact(all), err
		})
		if err != nil {
			return nil, err
		}
		page = order[min(tok.Offset, len(order)):min(tok.Offset+q.Limit, len(order))]
		more = tok.Offset+q.Limit < len(order)
	} else {
		cq, k, err := s.ranker(ctx, q, r, false)
		if err != nil {
			return nil, err
		}
		// One more than the page says whether another follows: in the live index (no snapshot)
		// the total counted on the first page may no longer be the number of matches.
		hits, _, err := k.top(cq, q.Limit+1, hitAt(tok.After))
		if err != nil {
			return nil, err
		}
		more = len(hits) > q.Limit
		hits = hits[:min(len(hits), q.Limit)]
		if tok.After, err = k.place(hits); err != nil {
			return nil, err
		}
		page = ids(hits)
	}
	if err := s.fill(res, r, page, q); err != nil {
		return nil, err
	}
	if !more {
		s.free(tok.Snapshot) // closed once this page is read
		res.Took = time.Since(start)
		return res, nil
	}
	tok.Offset += q.Limit
	tok.Expires = s.now().Add(s.keepAlive).UnixNano() // the deferred Release keeps it till then
	if res.Continue, err = s.tokens.encode(tok); err != nil {
		return nil, err
	}
	res.Took = time.Since(start)
	return res, nil
}

// ranker compiles q in r and makes the ranker of a later page's pass (no facets); whole says it
// ranks every match.
func (s *Store) ranker(ctx context.Context, q *query.Query, r index.IndexReader, whole bool) (bq.Query, *ranker, error) {
	cq, err := compile(q, r)
	if err != nil {
		return nil, nil, err
	}
	k, err := newRanker(ctx, q, r, false, whole)
	return cq, k, err
}

// Release frees the snapshot a continue token pages in, for a client that stops before the last
// page. A token that does not decode has nothing to free.
func (s *Store) Release(ctx context.Context, continueToken string) {
	if continueToken == "" {
		return
	}
	if tok, err := s.tokens.decode(continueToken); err == nil {
		s.free(tok.Snapshot)
	}
}

// free forgets a snapshot and closes its reader, now or when the last page read in it is done.
func (s *Store) free(id string) {
	if id == "" {
		return
	}
	if sn, ok := s.snaps.Remove(id); ok {
		_ = sn.r.Close() // a reader of a closed index has nothing left to free
	}
}

func (s *Store) reader() (index.IndexReader, error) {
	adv, err := s.idx.Advanced()
	if err != nil {
		return nil, fmt.Errorf("%w: embedded index: %v", store.ErrUnavailable, err)
	}
	r, err := adv.Reader()
	if err != nil {
		return nil, fmt.Errorf("%w: embedded index: %v", store.ErrUnavailable, err)
	}
	return r, nil
}

func ids(hits []*hit) []index.IndexInternalID {
	out := make([]index.IndexInternalID, len(hits))
	for i, h := range hits {
		out[i] = h.iid
	}
	return out
}

// compact keeps of ranked matches what the pages read, the ids in one buffer: a snapshot of a
// query matching 100,000 objects then holds about 3 MB, not the sort keys (a poller asking for
// limit=1 every second would otherwise hold hundreds of megabytes in snapshots).
func compact(hits []*hit) []index.IndexInternalID {
	size := 0
	for _, h := range hits {
		size += len(h.iid)
	}
	buf := make([]byte, 0, size)
	out := make([]index.IndexInternalID, len(hits))
	for i, h := range hits {
		start := len(buf)
		buf = append(buf, h.iid...)
		out[i] = buf[start:len(buf):len(buf)]
	}
	return out
}

// fill adds the items of the page: the documents iids name, in order, and their epochs.
func (s *Store) fill(res *store.Result, r index.IndexReader, page []index.IndexInternalID, q *query.Query) error {
	src := newSources(r)
	for _, iid := range page {
		d, err := src.read(iid)
		if err != nil {
			return err
		}
		obj, err := d.object()
		if err != nil {
			id, _ := r.ExternalID(iid)
			return fmt.Errorf("document %s: %w", strings.ReplaceAll(id, "\x00", "/"), err)
		}
		it := obj // written as items answer it when it was stored (read into its own buffer)
		if q.MetadataOnly || d.source != nil {
			it = item(obj, q.MetadataOnly)
		}
		res.Items = append(res.Items, json.RawMessage(it))
		res.Epochs = append(res.Epochs, d.epoch())
	}
	return nil
}

// facetResult is the top buckets of a terms aggregation: by count, highest first, ties by key;
// Other counts the rest. Counts are exact.
func facetResult(f query.Facet, counts map[string]int64) store.FacetResult {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if c := cmp.Compare(counts[b], counts[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	fr := store.FacetResult{Name: f.Name(), Buckets: []store.Bucket{}}
	for i, k := range keys {
		if i >= f.Size {
			fr.Other += counts[k]
			continue
		}
		fr.Buckets = append(fr.Buckets, store.Bucket{Value: bucketValue(f, k), Count: counts[k]})
	}
	return fr
}

func bucketValue(f query.Facet, key string) string {
	switch f.Dimension {
	case query.FacetResource:
		res, group, _ := strings.Cut(key, "\x00")
		if group != "" {
			return res + "." + group
		}
		return res
	case query.FacetLabel:
		return strings.TrimPrefix(key, f.Key+"=")
	}
	return key
}

// versions is the newest resourceVersion per cluster among the objects of q's resources, clusters
// and scope, of the query.MaxListValues clusters with the most of them (OpenSearch's terms
// aggregation of osstore's compileVersions).
func versions(ctx context.Context, r index.IndexReader, q *query.Query) (map[string]int64, error) {
	dv, err := r.DocValueReader([]string{fieldCluster, fieldRV})
	if err != nil {
		return nil, fmt.Errorf("%w: embedded index: %v", store.ErrUnavailable, err)
	}
	type agg struct {
		docs int64
		rv   int64
	}
	per := map[string]*agg{}
	cq, err := prune(compileVersions(q), r)
	if err != nil {
		return nil, err
	}
	err = visit(ctx, r, cq, false, func(dm *search.DocumentMatch) error {
		var cluster string
		var rv int64
		hasRV := false
		err := dv.VisitDocValues(dm.IndexInternalID, func(field string, term []byte) {
			switch field {
			case fieldCluster:
				cluster = string(term)
			case fieldRV:
				rv, hasRV = dec(term)
			}
		})
		a := per[cluster]
		if a == nil {
			a = &agg{rv: rv}
			per[cluster] = a
		}
		a.docs++
		if hasRV {
			a.rv = max(a.rv, rv)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	clusters := make([]string, 0, len(per))
	for c := range per {
		clusters = append(clusters, c)
	}
	slices.SortFunc(clusters, func(a, b string) int {
		return cmp.Or(cmp.Compare(per[b].docs, per[a].docs), strings.Compare(a, b))
	})
	out := map[string]int64{}
	for i, c := range clusters {
		if i < query.MaxListValues {
			out[c] = per[c].rv
		}
	}
	return out, nil
}

// Counts returns the number of documents per cluster and resource, exact, ordered by cluster,
// group and resource. scope limits the counts to what a subject may see (nil: everything).
func (s *Store) Counts(ctx context.Context, scope *query.Scope) ([]store.Count, error) {
	r, err := s.reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	q := all()
	if scope != nil {
		if q, err = prune(compileScope(scope), r); err != nil {
			return nil, fmt.Errorf("count documents: %w", err)
		}
	}
	dv, err := r.DocValueReader([]string{fieldCluster, fieldGroup, fieldResource})
	if err != nil {
		return nil, fmt.Errorf("count documents: %w: %v", store.ErrUnavailable, err)
	}
	per := map[store.Pair]int64{}
	err = visit(ctx, r, q, false, func(dm *search.DocumentMatch) error {
		var p store.Pair
		err := dv.VisitDocValues(dm.IndexInternalID, func(field string, term []byte) {
			switch field {
			case fieldCluster:
				p.Cluster = string(term)
			case fieldGroup:
				p.Group = string(term)
			case fieldResource:
				p.Resource = string(term)
			}
		})
		per[p]++
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("count documents: %w", err)
	}
	out := make([]store.Count, 0, len(per))
	for p, n := range per {
		out = append(out, store.Count{Cluster: p.Cluster, Group: p.Group, Resource: p.Resource, Documents: n})
	}
	slices.SortFunc(out, func(a, b store.Count) int {
		return cmp.Or(strings.Compare(a.Cluster, b.Cluster), strings.Compare(a.Group, b.Group), strings.Compare(a.Resource, b.Resource))
	})
	return out, nil
}

// visit calls fn with every match of q in r, in the index's order; score says whether matches
// need their relevance. fn must not keep the match, which is reused.
func visit(ctx context.Context, r index.IndexReader, q bq.Query, score bool, fn func(*search.DocumentMatch) error) error {
	opts := search.SearcherOptions{Score: "none"}
	if score {
		opts.Score = ""
	}
	sr, err := q.Searcher(ctx, r, queryMapping, opts)
	if err != nil {
		return fmt.Errorf("%w: embedded index: %v", store.ErrUnavailable, err)
	}
	defer sr.Close()
	sc := &search.SearchContext{DocumentMatchPool: search.NewDocumentMatchPool(sr.DocumentMatchPoolSize(), 0), IndexReader: r}
	for n := 0; ; n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		dm, err := sr.Next(sc)
		if err != nil {
			return fmt.Errorf("%w: embedded index: %v", store.ErrUnavailable, err)
		}
		if dm == nil {
			return nil
		}
		if err := fn(dm); err != nil {
			return err
		}
		sc.DocumentMatchPool.Put(dm)
	}
}

// snapshot is an index reader held for a continue token; the store's ledger (store.Snapshots) says
// whose it is and how long it lives. A query read to the end keeps its whole order in it, ranked
// once; the pages of any other query each rank the top of what follows their token.
type snapshot struct {
	r index.IndexReader

	mu     sync.Mutex // pages read in one snapshot at once rank its order once
	order  []index.IndexInternalID
	ranked bool
}

func (sn *snapshot) isRanked() bool {
	sn.mu.Lock()
	defer sn.mu.Unlock()
	return sn.ranked
}

// wholeOrder is every match in order, ranked by rank the first time it is asked.
func (sn *snapshot) wholeOrder(rank func() ([]index.IndexInternalID, error)) ([]index.IndexInternalID, error) {
	sn.mu.Lock()
	defer sn.mu.Unlock()
	if !sn.ranked {
		order, err := rank()
		if err != nil {
			return nil, err
		}
		sn.order, sn.ranked = order, true
	}
	return sn.order, nil
}
