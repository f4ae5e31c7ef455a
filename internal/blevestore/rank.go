package blevestore

import (
	"bytes"
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"slices"

	"github.com/blevesearch/bleve/v2/search"
	bq "github.com/blevesearch/bleve/v2/search/query"
	index "github.com/blevesearch/bleve_index_api"

	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/store"
)

// Ranking the matches of a query. A page is the top of the matches in the query's order, after the
// last item served: one pass over the matches keeps the best Limit in a heap, reading of each only
// the doc values its order compares (and its facets count, on a first page), one sort key at a
// time and only as far as they decide (admit). Ranking every match to serve a hundred cost most of
// a broad search's time: every sort key and tiebreaker of every match read and copied, then sorted
// (461 ms of a 100,000-Pod first page, against 42 ms now: BenchmarkSearch). Only the server's own
// reads to the end (query.Query.Drain) and walks past a few pages rank every match once, as their
// pages then cost a slice of that order each (search.go, rankWholeAfter).

// hit is a match and what its order compares: the sort keys read in the pass, the tiebreakers
// when a comparison needs them (tied: two matches of equal keys are rare, and the uid is a column
// as costly to read as the name).
type hit struct {
	iid                                    index.IndexInternalID
	score                                  float64
	cluster, namespace, kind, name, status []byte
	hasNamespace, hasKind, hasStatus       bool
	created, changed                       int64
	hasCreated, hasChanged                 bool
	// cols[i] is sort key i's when it is a column's (query.ColumnSort), read from columns.<id>;
	// nil for a query without one.
	cols    [][]byte
	hasCols []bool

	tied bool   // uid read
	uid  []byte // the tiebreaker after the sort keys, then cluster
	id   string // the document's id: the last tiebreaker, read when uid and cluster tie
}

// copyFrom makes h a copy of o that owns its bytes, reusing h's buffers.
func (h *hit) copyFrom(o *hit) {
	h.iid = append(h.iid[:0], o.iid...)
	h.score = o.score
	h.cluster = append(h.cluster[:0], o.cluster...)
	h.namespace = append(h.namespace[:0], o.namespace...)
	h.kind = append(h.kind[:0], o.kind...)
	h.status = append(h.status[:0], o.status...)
	h.name = append(h.name[:0], o.name...)
	h.hasNamespace, h.hasKind, h.hasStatus = o.hasNamespace, o.hasKind, o.hasStatus
	h.created, h.changed, h.hasCreated, h.hasChanged = o.created, o.changed, o.hasCreated, o.hasChanged
	if len(h.cols) != len(o.cols) {
		h.cols, h.hasCols = make([][]byte, len(o.cols)), make([]bool, len(o.cols))
	}
	for i := range o.cols {
		h.cols[i] = append(h.cols[i][:0], o.cols[i]...)
	}
	copy(h.hasCols, o.hasCols)
	h.tied, h.uid, h.id = o.tied, append(h.uid[:0], o.uid...), o.id
}

// cursor is h's place for a continue token.
func (h *hit) cursor() cursor {
	var cols []string
	for _, c := range h.cols {
		cols = append(cols, string(c))
	}
	return cursor{Score: h.score, Cluster: string(h.cluster), Namespace: string(h.namespace), HasNamespace: h.hasNamespace,
		Kind: string(h.kind), HasKind: h.hasKind, Name: string(h.name), Status: string(h.status), HasStatus: h.hasStatus,
		Created: h.created, HasCreated: h.hasCreated, Changed: h.changed, HasChanged: h.hasChanged,
		UID: string(h.uid), ID: h.id, Cols: cols, HasCols: slices.Clone(h.hasCols)}
}

// hitAt is the place a continue token names, complete: nothing of it is read again.
func hitAt(c cursor) *hit {
	var cols [][]byte
	for _, v := range c.Cols {
		cols = append(cols, []byte(v))
	}
	return &hit{score: c.Score, cluster: []byte(c.Cluster), namespace: []byte(c.Namespace), hasNamespace: c.HasNamespace,
		kind: []byte(c.Kind), hasKind: c.HasKind, name: []byte(c.Name), status: []byte(c.Status), hasStatus: c.HasStatus,
		created: c.Created, hasCreated: c.HasCreated, changed: c.Changed, hasChanged: c.HasChanged,
		tied: true, uid: []byte(c.UID), id: c.ID, cols: cols, hasCols: c.HasCols}
}

// ranker ranks the matches of one query in one snapshot, and counts them.
type ranker struct {
	ctx       context.Context
	r         index.IndexReader
	sorts     []query.Sort
	relevance bool
	text      string

	dv     index.DocValueReader   // what every match reads: the cluster, the facets' columns
	keys   []index.DocValueReader // per sort key, its column; nil when dv reads it
	ties   index.DocValueReader   // uids, for ties
	facets *facetCounter          // nil: none counted
	err    error                  // of a read during a comparison, which cannot return one

	colSlot map[string]int // a column's doc values field → its sort key's index, for hit.cols

	cur     hit    // the match being read
	loaded  []bool // per sort key, whether cur's is read
	visitor func(field string, term []byte)
}

// sortField is the column a sort key reads.
func sortField(s query.Sort) string {
	switch s.Field {
	case query.SortCluster:
		return fieldCluster
	case query.SortNamespace:
		return fieldNamespace
	case query.SortKind:
		return fieldKind
	case query.SortName:
		return fieldName
	case query.SortStatus:
		return fieldStatus
	case query.SortCreationTimestamp:
		return fieldCreated
	case query.SortLastChangedAt:
		return fieldChanged
	}
	if _, ok := query.ColumnSort(s.Field); ok {
		return s.Field // indexed under its own name (index.go)
	}
	return ""
}

// newRanker ranks q's matches in r; facets says this pass counts q's facets (a first page), whole
// that it ranks every match (all), whose keys are then read in one visit.
func newRanker(ctx context.Context, q *query.Query, r index.IndexReader, facets, whole bool) (*ranker, error) {
	k := &ranker{ctx: ctx, r: r, sorts: q.Sort, relevance: len(q.Sort) == 0 && q.Text != "", text: q.Text}
	if len(k.sorts) == 0 && !k.relevance {
		k.sorts = []query.Sort{{Field: query.SortCluster}, {Field: query.SortNamespace}, {Field: query.SortName}}
	}
	for i, s := range k.sorts {
		if _, ok := query.ColumnSort(s.Field); ok {
			if k.colSlot == nil {
				k.colSlot = map[string]int{}
				k.cur.cols, k.cur.hasCols = make([][]byte, len(k.sorts)), make([]bool, len(k.sorts))
			}
			k.colSlot[s.Field] = i
		}
	}
	// The cluster is read whatever the sort: it is the second tiebreaker, and a column of a few
	// values costs next to nothing.
	fields := []string{fieldCluster}
	if facets && len(q.Facets) > 0 {
		k.facets = newFacetCounter(q.Facets)
		fields = append(fields, k.facets.fields()...)
	}
	if whole {
		for _, s := range k.sorts {
			fields = append(fields, sortField(s))
		}
	}
	slices.Sort(fields)
	fields = slices.Compact(fields)
	var err error
	if k.dv, err = r.DocValueReader(fields); err != nil {
		return nil, fmt.Errorf("%w: embedded index: %v", store.ErrUnavailable, err)
	}
	k.keys, k.loaded = make([]index.DocValueReader, len(k.sorts)), make([]bool, len(k.sorts))
	for i, s := range k.sorts {
		if f := sortField(s); !slices.Contains(fields, f) {
			if k.keys[i], err = r.DocValueReader([]string{f}); err != nil {
				return nil, fmt.Errorf("%w: embedded index: %v", store.ErrUnavailable, err)
			}
		}
	}
	if k.ties, err = r.DocValueReader([]string{fieldUID}); err != nil {
		return nil, fmt.Errorf("%w: embedded index: %v", store.ErrUnavailable, err)
	}
	k.visitor = func(field string, term []byte) {
		h := &k.cur
		switch field {
		case fieldCluster:
			h.cluster = append(h.cluster[:0], term...)
		case fieldNamespace:
			h.namespace, h.hasNamespace = append(h.namespace[:0], term...), true
		case fieldKind:
			h.kind, h.hasKind = append(h.kind[:0], term...), true
		case fieldName:
			h.name = append(h.name[:0], term...)
		case fieldStatus:
			h.status, h.hasStatus = append(h.status[:0], term...), true
		case fieldCreated:
			h.created, h.hasCreated = dec(term)
		case fieldChanged:
			h.changed, h.hasChanged = dec(term)
		default:
			if i, ok := k.colSlot[field]; ok {
				h.cols[i], h.hasCols[i] = append(h.cols[i][:0], term...), true
			}
		}
		if k.facets != nil {
			k.facets.read(field, term)
		}
	}
	return k, nil
}

// read reads the current match's cluster (and counts its facets) from the doc values; its sort
// keys are read by admit or loadAll.
func (k *ranker) read(dm *search.DocumentMatch) error {
	h := &k.cur
	h.iid = dm.IndexInternalID
	h.cluster, h.namespace, h.kind, h.name, h.status = h.cluster[:0], h.namespace[:0], h.kind[:0], h.name[:0], h.status[:0]
	h.hasNamespace, h.hasKind, h.hasStatus, h.hasCreated, h.hasChanged, h.created, h.changed = false, false, false, false, false, 0, 0
	h.tied, h.uid, h.id = false, h.uid[:0], ""
	for i := range h.cols {
		h.cols[i], h.hasCols[i] = h.cols[i][:0], false
	}
	if k.facets != nil {
		k.facets.reset()
	}
	if err := k.dv.VisitDocValues(dm.IndexInternalID, k.visitor); err != nil {
		return fmt.Errorf("%w: embedded index: %v", store.ErrUnavailable, err)
	}
	for i := range k.loaded {
		k.loaded[i] = k.keys[i] == nil
	}
	if k.facets != nil {
		k.facets.count(h)
	}
	return nil
}

// load reads the current match's sort key i.
func (k *ranker) load(i int) {
	if k.loaded[i] {
		return
	}
	k.loaded[i] = true
	if err := k.keys[i].VisitDocValues(k.cur.iid, k.visitor); err != nil && k.err == nil {
		k.err = fmt.Errorf("%w: embedded index: %v", store.ErrUnavailable, err)
	}
}

func (k *ranker) loadAll() {
	for i := range k.keys {
		k.load(i)
	}
}

// admit says whether the current match follows after (nil: every match does) and precedes worst
// (nil: there is room), reading its sort keys one at a time, only as far as they decide: in the
// default order, a match of a later cluster and namespace than the worst one kept never has its
// name read. An admitted match has every key read, for the comparisons to come.
func (k *ranker) admit(after, worst *hit) bool {
	h := &k.cur
	afterOpen, worstOpen := after != nil, worst != nil
	// settle narrows what is still open by one key's comparisons with after and worst; false: h
	// is out.
	settle := func(withAfter, withWorst func() int) bool {
		if afterOpen {
			switch c := withAfter(); {
			case c < 0:
				return false
			case c > 0:
				afterOpen = false
			}
		}
		if worstOpen {
			switch c := withWorst(); {
			case c > 0:
				return false
			case c < 0:
				worstOpen = false
			}
		}
		return true
	}
	if k.relevance && !settle(func() int { return compareScore(h, after) }, func() int { return compareScore(h, worst) }) {
		return false
	}
	for i, s := range k.sorts {
		if !afterOpen && !worstOpen {
			break
		}
		k.load(i)
		if !settle(func() int { return compareKey(s, i, h, after) }, func() int { return compareKey(s, i, h, worst) }) {
			return false
		}
	}
	// Still open: every key ties, and the tiebreakers tell.
	if afterOpen && k.compare(h, after) <= 0 || worstOpen && k.compare(h, worst) >= 0 {
		return false
	}
	k.loadAll()
	return true
}

// place is where the last of page is in the order, for the token of the page after it.
func (k *ranker) place(page []*hit) (cursor, error) {
	if len(page) == 0 {
		return cursor{}, nil
	}
	last := page[len(page)-1]
	k.tie(last)
	k.docID(last)
	return last.cursor(), k.err
}

// tie reads what breaks ties of h's sort keys.
func (k *ranker) tie(h *hit) {
	if h.tied {
		return
	}
	h.tied, h.uid = true, h.uid[:0]
	err := k.ties.VisitDocValues(h.iid, func(field string, term []byte) {
		if field == fieldUID {
			h.uid = append(h.uid[:0], term...)
		}
	})
	if err != nil && k.err == nil {
		k.err = fmt.Errorf("%w: embedded index: %v", store.ErrUnavailable, err)
	}
}

// docID reads h's document id, the last tiebreaker.
func (k *ranker) docID(h *hit) {
	if h.id != "" {
		return
	}
	id, err := k.r.ExternalID(h.iid)
	if err != nil && k.err == nil {
		k.err = fmt.Errorf("%w: embedded index: %v", store.ErrUnavailable, err)
	}
	h.id = id
}

// compareScore orders by relevance, highest first.
func compareScore(a, b *hit) int { return cmp.Compare(b.score, a.score) }

// compareKey orders by one sort key, the i-th, missing values last in either direction.
func compareKey(s query.Sort, i int, a, b *hit) int {
	var c int
	var hasA, hasB bool
	switch s.Field {
	case query.SortCluster:
		c, hasA, hasB = bytes.Compare(a.cluster, b.cluster), true, true
	case query.SortNamespace:
		c, hasA, hasB = bytes.Compare(a.namespace, b.namespace), a.hasNamespace, b.hasNamespace
	case query.SortKind:
		// Every document has a kind (the builder refuses an object without one); hasKind keeps
		// the rule of the other keys, missing last, rather than assume it.
		c, hasA, hasB = bytes.Compare(a.kind, b.kind), a.hasKind, b.hasKind
	case query.SortName:
		c, hasA, hasB = bytes.Compare(a.name, b.name), true, true
	case query.SortStatus:
		// Kinds without a Status column, and documents written before the field, have none.
		c, hasA, hasB = bytes.Compare(a.status, b.status), a.hasStatus, b.hasStatus
	case query.SortCreationTimestamp:
		c, hasA, hasB = cmp.Compare(a.created, b.created), a.hasCreated, b.hasCreated
	case query.SortLastChangedAt:
		c, hasA, hasB = cmp.Compare(a.changed, b.changed), a.hasChanged, b.hasChanged
	default:
		// A column's key: kinds and custom resources without the column, objects whose cell is
		// empty or a placeholder, and documents written before mapping version 4 have none.
		col := func(h *hit) ([]byte, bool) {
			if i < len(h.cols) && i < len(h.hasCols) && h.hasCols[i] {
				return h.cols[i], true
			}
			return nil, false
		}
		var ca, cb []byte
		ca, hasA = col(a)
		cb, hasB = col(b)
		c = bytes.Compare(ca, cb)
	}
	switch {
	case !hasA && !hasB:
		return 0
	case !hasA:
		return 1
	case !hasB:
		return -1
	}
	if s.Desc {
		return -c
	}
	return c
}

// compare orders by relevance (highest first) when the query ranks by it, then by the sort keys,
// then by uid and cluster as osstore's tiebreaker, and by the document's id for the same uid in
// two kinds. Both must have every sort key read.
func (k *ranker) compare(a, b *hit) int {
	if k.relevance {
		if c := compareScore(a, b); c != 0 {
			return c
		}
	}
	for i, s := range k.sorts {
		if c := compareKey(s, i, a, b); c != 0 {
			return c
		}
	}
	k.tie(a)
	k.tie(b)
	if c := bytes.Compare(a.uid, b.uid); c != 0 {
		return c
	}
	if c := bytes.Compare(a.cluster, b.cluster); c != 0 {
		return c
	}
	k.docID(a)
	k.docID(b)
	return cmp.Compare(a.id, b.id)
}

// pass visits every match of cq in the ranker's snapshot, reads each, and gives it to keep; it
// returns how many matched. Relevance is the score of the text query alone, as OpenSearch scores
// the match clause alone (every other clause is a filter): every match is one of the text's, so
// its searcher is advanced beside the query's.
func (k *ranker) pass(cq bq.Query, keep func()) (int64, error) {
	var sc *scorer
	if k.relevance {
		var err error
		if sc, err = newScorer(k.ctx, k.r, k.text); err != nil {
			return 0, err
		}
		defer sc.close()
	}
	var n int64
	err := visit(k.ctx, k.r, cq, false, func(dm *search.DocumentMatch) error {
		n++
		if err := k.read(dm); err != nil {
			return err
		}
		if sc != nil {
			s, err := sc.score(dm.IndexInternalID)
			if err != nil {
				return err
			}
			k.cur.score = s
		}
		keep()
		return k.err
	})
	if err == nil {
		err = k.err
	}
	return n, err
}

// top is the best n matches after (nil: from the first) in order, and how many matched.
func (k *ranker) top(cq bq.Query, n int, after *hit) ([]*hit, int64, error) {
	t := &topN{k: k}
	total, err := k.pass(cq, func() {
		var worst *hit
		if len(t.hits) >= n {
			worst = t.hits[0]
		}
		if !k.admit(after, worst) {
			return
		}
		if worst == nil {
			kept := &hit{}
			kept.copyFrom(&k.cur)
			heap.Push(t, kept)
			return
		}
		worst.copyFrom(&k.cur) // the worst kept makes room, its buffers reused
		heap.Fix(t, 0)
	})
	if err != nil {
		return nil, 0, err
	}
	out := t.hits
	slices.SortFunc(out, k.compare)
	return out, total, k.err
}

// all is every match in order, for a query read to the end.
func (k *ranker) all(cq bq.Query) ([]*hit, error) {
	var hits []*hit
	if _, err := k.pass(cq, func() {
		k.loadAll()
		kept := &hit{}
		kept.copyFrom(&k.cur)
		hits = append(hits, kept)
	}); err != nil {
		return nil, err
	}
	slices.SortFunc(hits, k.compare)
	return hits, k.err
}

// topN is a heap of the best matches so far, the worst on top.
type topN struct {
	k    *ranker
	hits []*hit
}

func (t *topN) Len() int           { return len(t.hits) }
func (t *topN) Less(i, j int) bool { return t.k.compare(t.hits[i], t.hits[j]) > 0 }
func (t *topN) Swap(i, j int)      { t.hits[i], t.hits[j] = t.hits[j], t.hits[i] }
func (t *topN) Push(x any)         { t.hits = append(t.hits, x.(*hit)) }
func (t *topN) Pop() any {
	h := t.hits[len(t.hits)-1]
	t.hits = t.hits[:len(t.hits)-1]
	return h
}

// scorer is the text query's searcher, advanced to each match in index order for its score.
type scorer struct {
	sr  search.Searcher
	sc  *search.SearchContext
	cur *search.DocumentMatch
}

func newScorer(ctx context.Context, r index.IndexReader, text string) (*scorer, error) {
	sr, err := compileText(text).Searcher(ctx, r, queryMapping, search.SearcherOptions{})
	if err != nil {
		return nil, fmt.Errorf("%w: embedded index: %v", store.ErrUnavailable, err)
	}
	return &scorer{sr: sr, sc: &search.SearchContext{DocumentMatchPool: search.NewDocumentMatchPool(sr.DocumentMatchPoolSize(), 0), IndexReader: r}}, nil
}

// score is the text's score of the document iid; matches are asked for in index order.
func (s *scorer) score(iid index.IndexInternalID) (float64, error) {
	if s.cur != nil {
		switch c := bytes.Compare(s.cur.IndexInternalID, iid); {
		case c == 0:
			return s.cur.Score, nil
		case c > 0:
			return 0, nil
		}
		s.sc.DocumentMatchPool.Put(s.cur)
	}
	dm, err := s.sr.Advance(s.sc, iid)
	if err != nil {
		return 0, fmt.Errorf("%w: embedded index: %v", store.ErrUnavailable, err)
	}
	s.cur = dm
	if dm == nil || !bytes.Equal(dm.IndexInternalID, iid) {
		return 0, nil
	}
	return dm.Score, nil
}

func (s *scorer) close() { _ = s.sr.Close() }

// facetCounter counts one pass's matches in the buckets of a first page's facets. Keys are looked
// up as bytes, so a match of a known bucket allocates nothing.
type facetCounter struct {
	facets []query.Facet
	counts []map[string]*int64

	// of the current match
	resource, group, key []byte
	labels               [][]byte
	nLabels              int
}

func newFacetCounter(facets []query.Facet) *facetCounter {
	c := &facetCounter{facets: facets, counts: make([]map[string]*int64, len(facets))}
	for i := range c.counts {
		c.counts[i] = map[string]*int64{}
	}
	return c
}

// fields are the doc values the facets read, besides the cluster every pass reads.
func (c *facetCounter) fields() []string {
	var out []string
	for _, f := range c.facets {
		switch f.Dimension {
		case query.FacetNamespace:
			out = append(out, fieldNamespace)
		case query.FacetResource:
			out = append(out, fieldResource, fieldGroup)
		case query.FacetLabels, query.FacetLabel:
			out = append(out, fieldLabels)
		}
	}
	return out
}

func (c *facetCounter) reset() {
	c.resource, c.group, c.nLabels = c.resource[:0], c.group[:0], 0
}

func (c *facetCounter) read(field string, term []byte) {
	switch field {
	case fieldResource:
		c.resource = append(c.resource[:0], term...)
	case fieldGroup:
		c.group = append(c.group[:0], term...)
	case fieldLabels:
		for _, l := range c.labels[:c.nLabels] {
			if bytes.Equal(l, term) {
				return
			}
		}
		if c.nLabels == len(c.labels) {
			c.labels = append(c.labels, nil)
		}
		c.labels[c.nLabels] = append(c.labels[c.nLabels][:0], term...)
		c.nLabels++
	}
}

// count counts the current match, h, in each facet's buckets; a resource's key is resource and
// group apart, so buckets order as OpenSearch's multi_terms.
func (c *facetCounter) count(h *hit) {
	for i, f := range c.facets {
		m := c.counts[i]
		switch f.Dimension {
		case query.FacetCluster:
			add(m, h.cluster)
		case query.FacetNamespace:
			if h.hasNamespace {
				add(m, h.namespace)
			}
		case query.FacetResource:
			c.key = append(append(append(c.key[:0], c.resource...), 0), c.group...)
			add(m, c.key)
		case query.FacetLabels:
			for _, l := range c.labels[:c.nLabels] {
				add(m, l)
			}
		case query.FacetLabel:
			for _, l := range c.labels[:c.nLabels] {
				if len(l) > len(f.Key) && l[len(f.Key)] == '=' && string(l[:len(f.Key)]) == f.Key {
					add(m, l)
				}
			}
		}
	}
}

func add(m map[string]*int64, key []byte) {
	if n, ok := m[string(key)]; ok {
		*n++
		return
	}
	n := int64(1)
	m[string(key)] = &n
}

// results are the facets' top buckets.
func (c *facetCounter) results() []store.FacetResult {
	out := make([]store.FacetResult, len(c.facets))
	for i, f := range c.facets {
		counts := make(map[string]int64, len(c.counts[i]))
		for k, n := range c.counts[i] {
			counts[k] = *n
		}
		out[i] = facetResult(f, counts)
	}
	return out
}
