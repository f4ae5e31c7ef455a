package blevestore

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search"
	bq "github.com/blevesearch/bleve/v2/search/query"
	index "github.com/blevesearch/bleve_index_api"

	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/mappings"
)

// A search reads one snapshot of the index (a bleve index reader): the first page finds every
// match, sorts them all, counts the facets and the versions, and answers the first Limit. When more
// follow, the snapshot and its sorted matches are held for the continue token until the keep-alive
// passes without a page, the last page is read, or the token is released, so the pages are one
// consistent snapshot while documents change, as osstore's point-in-time pages are.

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
	m, err := s.collect(ctx, q, r, true)
	if err != nil {
		r.Close()
		return nil, err
	}
	res := &store.Result{Total: int64(len(m.hits)), Facets: m.facets, Versions: m.versions}
	page := compact(m.hits)
	m = nil // the sort keys are not needed past the sort: a snapshot holds the order only
	if err := s.fill(res, r, page, 0, q); err != nil {
		r.Close()
		return nil, err
	}
	if len(page) <= q.Limit || q.Peek {
		res.Took = time.Since(start)
		return res, r.Close()
	}
	tok := token{Query: q.Fingerprint(), Offset: q.Limit, Now: q.Now.UnixNano(), Total: res.Total,
		Expires: s.now().Add(s.keepAlive).UnixNano()}
	id, evicted, expired, err := s.snaps.Open(q.Subject, q.Drain, s.now())
	for _, sn := range append(evicted, expired...) {
		_ = sn.r.Close() // a reader of a closed index has nothing left to free
	}
	switch {
	case err == nil && s.snaps.Hold(id, &snapshot{r: r, hits: page}, time.Unix(0, tok.Expires)):
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
		r    index.IndexReader
		hits []heldHit
	)
	if tok.Snapshot != "" {
		snap, ok := s.snaps.Acquire(tok.Snapshot)
		if !ok {
			return nil, s.snaps.Gone(tok.Snapshot)
		}
		defer func() {
			if s.snaps.Release(tok.Snapshot, snap, time.Unix(0, tok.Expires)) {
				_ = snap.r.Close()
			}
		}()
		r, hits = snap.r, snap.hits
	} else {
		if r, err = s.reader(); err != nil {
			return nil, err
		}
		defer r.Close()
		m, err := s.collect(ctx, q, r, false)
		if err != nil {
			return nil, err
		}
		hits = compact(m.hits)
		res.Warnings = append(res.Warnings, noSnapshotWarning)
	}
	if err := s.fill(res, r, hits, tok.Offset, q); err != nil {
		return nil, err
	}
	if tok.Offset+q.Limit >= len(hits) {
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

// heldHit is what a page needs of a sorted match: which document, and its epoch.
type heldHit struct {
	iid   index.IndexInternalID
	epoch int64
}

// compact keeps of sorted matches what the pages read, the ids in one buffer: a snapshot of a query
// matching 100,000 objects then holds about 4 MB, not the sort keys' strings (a poller asking for
// limit=1 every second would otherwise hold hundreds of megabytes in snapshots).
func compact(hits []hit) []heldHit {
	size := 0
	for i := range hits {
		size += len(hits[i].iid)
	}
	buf := make([]byte, 0, size)
	out := make([]heldHit, len(hits))
	for i := range hits {
		start := len(buf)
		buf = append(buf, hits[i].iid...)
		out[i] = heldHit{iid: buf[start:len(buf):len(buf)], epoch: hits[i].epoch}
	}
	return out
}

// fill adds the items of the page starting at off.
func (s *Store) fill(res *store.Result, r index.IndexReader, hits []heldHit, off int, q *query.Query) error {
	end := min(off+q.Limit, len(hits))
	for _, h := range hits[min(off, end):end] {
		id, err := r.ExternalID(h.iid)
		if err != nil {
			return fmt.Errorf("%w: embedded index: %v", store.ErrUnavailable, err)
		}
		d, err := r.Document(id)
		if err != nil || d == nil {
			return fmt.Errorf("%w: embedded index: read document %q: %v", store.ErrUnavailable, id, err)
		}
		var source []byte
		d.VisitFields(func(f index.Field) {
			if f.Name() == fieldSource {
				source = f.Value()
			}
		})
		obj, err := mappings.StoredObject(source)
		if err != nil {
			return fmt.Errorf("document %s: %w", strings.ReplaceAll(id, "\x00", "/"), err)
		}
		res.Items = append(res.Items, json.RawMessage(item(obj, q.MetadataOnly)))
		res.Epochs = append(res.Epochs, h.epoch)
	}
	return nil
}

// hit is one match and what its sort needs.
type hit struct {
	iid                      index.IndexInternalID
	cluster, namespace, name string
	uid                      string
	hasNamespace             bool
	created, changed         int64
	hasCreated, hasChanged   bool
	epoch                    int64
	score                    float64
}

// matches are every match of a query in one snapshot, sorted, with its facets and versions.
type matches struct {
	hits     []hit
	facets   []store.FacetResult
	versions map[string]int64
}

// collect finds, reads and sorts every match of q in r; first says this is a first page, which
// counts facets and versions.
func (s *Store) collect(ctx context.Context, q *query.Query, r index.IndexReader, first bool) (*matches, error) {
	cq, err := compile(q, r)
	if err != nil {
		return nil, err
	}
	dvFields := []string{fieldCluster, fieldNamespace, fieldName, fieldUID, fieldEpoch, fieldCreated, fieldChanged}
	facets := first && len(q.Facets) > 0
	if facets {
		dvFields = append(dvFields, fieldResource, fieldGroup, fieldLabels)
	}
	dv, err := r.DocValueReader(dvFields)
	if err != nil {
		return nil, fmt.Errorf("%w: embedded index: %v", store.ErrUnavailable, err)
	}
	counts := make([]map[string]int64, len(q.Facets))
	for i := range counts {
		counts[i] = map[string]int64{}
	}
	m := &matches{}
	var resource, group string
	var labels []string
	err = visit(ctx, r, cq, false, func(dm *search.DocumentMatch) error {
		h := hit{iid: slices.Clone(dm.IndexInternalID)}
		resource, group, labels = "", "", labels[:0]
		err := dv.VisitDocValues(dm.IndexInternalID, func(field string, term []byte) {
			switch field {
			case fieldCluster:
				h.cluster = string(term)
			case fieldNamespace:
				h.namespace, h.hasNamespace = string(term), true
			case fieldName:
				h.name = string(term)
			case fieldUID:
				h.uid = string(term)
			case fieldEpoch:
				h.epoch, _ = dec(term)
			case fieldCreated:
				h.created, h.hasCreated = dec(term)
			case fieldChanged:
				h.changed, h.hasChanged = dec(term)
			case fieldResource:
				resource = string(term)
			case fieldGroup:
				group = string(term)
			case fieldLabels:
				if !slices.Contains(labels, string(term)) {
					labels = append(labels, string(term))
				}
			}
		})
		if err != nil {
			return err
		}
		if facets {
			for i, f := range q.Facets {
				countFacet(counts[i], f, &h, resource, group, labels)
			}
		}
		m.hits = append(m.hits, h)
		return nil
	})
	if err != nil {
		return nil, err
	}
	relevance := len(q.Sort) == 0 && q.Text != ""
	if relevance {
		if err := score(ctx, r, q.Text, m.hits); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(m.hits, compareHits(q.Sort, relevance))
	if facets {
		for i, f := range q.Facets {
			m.facets = append(m.facets, facetResult(f, counts[i]))
		}
	}
	if first && q.Versions {
		if m.versions, err = versions(ctx, r, q); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// score sets the relevance of hits: bleve's score of the text query alone, as OpenSearch scores
// the match clause alone (every other clause is a filter).
func score(ctx context.Context, r index.IndexReader, text string, hits []hit) error {
	scores := map[string]float64{}
	err := visit(ctx, r, compileText(text), true, func(dm *search.DocumentMatch) error {
		scores[string(dm.IndexInternalID)] = dm.Score
		return nil
	})
	for i := range hits {
		hits[i].score = scores[string(hits[i].iid)]
	}
	return err
}

// compareHits orders by the sort keys, missing values last in either direction, then by uid and
// cluster as osstore's tiebreaker (and by the index's own id for the same uid in two kinds); relevance sorts
// by score first, highest first.
func compareHits(sorts []query.Sort, relevance bool) func(a, b hit) int {
	if len(sorts) == 0 && !relevance {
		sorts = []query.Sort{{Field: query.SortCluster}, {Field: query.SortNamespace}, {Field: query.SortName}}
	}
	return func(a, b hit) int {
		if relevance {
			if c := cmp.Compare(b.score, a.score); c != 0 {
				return c
			}
		}
		for _, s := range sorts {
			var c int
			var hasA, hasB bool
			switch s.Field {
			case query.SortCluster:
				c, hasA, hasB = strings.Compare(a.cluster, b.cluster), true, true
			case query.SortNamespace:
				c, hasA, hasB = strings.Compare(a.namespace, b.namespace), a.hasNamespace, b.hasNamespace
			case query.SortName:
				c, hasA, hasB = strings.Compare(a.name, b.name), true, true
			case query.SortCreationTimestamp:
				c, hasA, hasB = cmp.Compare(a.created, b.created), a.hasCreated, b.hasCreated
			case query.SortLastChangedAt:
				c, hasA, hasB = cmp.Compare(a.changed, b.changed), a.hasChanged, b.hasChanged
			}
			switch {
			case !hasA && !hasB:
				continue
			case !hasA:
				return 1
			case !hasB:
				return -1
			}
			if s.Desc {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		if c := strings.Compare(a.uid, b.uid); c != 0 {
			return c
		}
		if c := strings.Compare(a.cluster, b.cluster); c != 0 {
			return c
		}
		return bytes.Compare(a.iid, b.iid)
	}
}

// countFacet counts one document in one facet's buckets; a resource's key is resource and group
// apart, so buckets order as OpenSearch's multi_terms.
func countFacet(c map[string]int64, f query.Facet, h *hit, resource, group string, labels []string) {
	switch f.Dimension {
	case query.FacetCluster:
		c[h.cluster]++
	case query.FacetNamespace:
		if h.hasNamespace {
			c[h.namespace]++
		}
	case query.FacetResource:
		c[resource+"\x00"+group]++
	case query.FacetLabels:
		for _, l := range labels {
			c[l]++
		}
	case query.FacetLabel:
		for _, l := range labels {
			if strings.HasPrefix(l, f.Key+"=") {
				c[l]++
			}
		}
	}
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
	err = visit(ctx, r, compileVersions(q), false, func(dm *search.DocumentMatch) error {
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
		q = compileScope(scope)
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

// snapshot is an index reader held for a continue token, with the sorted matches of its query;
// the store's ledger (store.Snapshots) says whose it is and how long it lives.
type snapshot struct {
	r    index.IndexReader
	hits []heldHit
}
