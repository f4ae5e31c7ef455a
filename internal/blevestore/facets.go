package blevestore

import (
	"fmt"
	"sort"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/blevesearch/bleve/v2/index/scorch"
	index "github.com/blevesearch/bleve_index_api"
	segment "github.com/blevesearch/scorch_segment_api/v2"

	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/store"
)

// A namespace facet of a search whose order does not read the namespace is counted from the
// terms, not per match: a field of a few values (20 namespaces) is counted by intersecting the
// matches of each segment with each of its terms' postings, a few bitmap operations, where
// reading the field's doc values of every match costs about 150 ns a match (BenchmarkStores). A
// field holding more terms than the matches can pay for is read per match after the pass
// instead. When the order reads the field of every match anyway (the cluster always; the
// namespace in the default order), counting it there costs a map lookup a match, less than the
// terms would.

// termsPerMatch bounds the term path: it runs when the segments hold at most one term of the
// field for every termsPerMatch matches (a term's postings cost about as much as reading a few
// matches' doc values).
var termsPerMatch uint64 = 4 // a variable for the tests, which take either path

// termField is the keyword field a facet counts from its terms, or "".
func termField(f query.Facet) string {
	if f.Dimension == query.FacetNamespace {
		return fieldNamespace
	}
	return ""
}

// matchSet is the matches of one pass, a bitmap of document numbers per segment.
type matchSet struct {
	segs    []*scorch.SegmentSnapshot
	offsets []uint64 // of each segment's first document, as scorch numbers them
	bms     []*roaring.Bitmap
	cur     int
	n       uint64
}

// newMatchSet collects matches in r, or is nil when r is not a scorch snapshot.
func newMatchSet(r index.IndexReader) *matchSet {
	is, ok := r.(*scorch.IndexSnapshot)
	if !ok {
		return nil
	}
	m := &matchSet{}
	var off uint64
	for _, seg := range is.Segments() {
		m.segs = append(m.segs, seg)
		m.offsets = append(m.offsets, off)
		m.bms = append(m.bms, roaring.New())
		off += seg.Segment().Count()
	}
	return m
}

// add adds the match iid; matches come in index order, so its segment is the current one or
// one after.
func (m *matchSet) add(iid index.IndexInternalID) {
	num := iid.Value()
	for m.cur+1 < len(m.offsets) && num >= m.offsets[m.cur+1] {
		m.cur++
	}
	if num < m.offsets[m.cur] {
		m.cur = sort.Search(len(m.offsets), func(i int) bool { return m.offsets[i] > num }) - 1
	}
	m.bms[m.cur].Add(uint32(num - m.offsets[m.cur]))
	m.n++
}

// countTerms counts the matches in each of field's values, into counts; false when the segments
// hold too many terms of field for it to pay (nothing counted then).
func (m *matchSet) countTerms(field string, counts map[string]*int64) (bool, error) {
	dicts := make([]segment.TermDictionary, len(m.segs))
	terms := 0
	for i, seg := range m.segs {
		if m.bms[i].IsEmpty() {
			continue
		}
		d, err := seg.Segment().Dictionary(field)
		if err != nil {
			return false, fmt.Errorf("%w: embedded index: %v", store.ErrUnavailable, err)
		}
		dicts[i] = d
		terms += d.Cardinality()
	}
	if uint64(terms)*termsPerMatch > m.n {
		return false, nil
	}
	var pl segment.PostingsList
	for i, d := range dicts {
		if d == nil {
			continue
		}
		it := d.AutomatonIterator(nil, nil, nil)
		for {
			e, err := it.Next()
			if err != nil {
				return false, fmt.Errorf("%w: embedded index: %v", store.ErrUnavailable, err)
			}
			if e == nil {
				break
			}
			if pl, err = d.PostingsList([]byte(e.Term), m.segs[i].Deleted(), pl); err != nil {
				return false, fmt.Errorf("%w: embedded index: %v", store.ErrUnavailable, err)
			}
			n, err := intersect(m.bms[i], pl.Iterator(false, false, false, nil))
			if err != nil {
				return false, err
			}
			if n == 0 {
				continue
			}
			if c, ok := counts[e.Term]; ok {
				*c += int64(n)
			} else {
				v := int64(n)
				counts[e.Term] = &v
			}
		}
	}
	return true, nil
}

// intersect is how many documents of bm a term's postings hold.
func intersect(bm *roaring.Bitmap, it segment.PostingsIterator) (uint64, error) {
	if o, ok := it.(segment.OptimizablePostingsIterator); ok {
		if actual := o.ActualBitmap(); actual != nil {
			return bm.AndCardinality(actual), nil
		}
		if num, ok := o.DocNum1Hit(); ok {
			if bm.Contains(uint32(num)) {
				return 1, nil
			}
			return 0, nil
		}
	}
	var n uint64
	for {
		p, err := it.Next()
		if err != nil {
			return 0, fmt.Errorf("%w: embedded index: %v", store.ErrUnavailable, err)
		}
		if p == nil {
			return n, nil
		}
		if bm.Contains(uint32(p.Number())) {
			n++
		}
	}
}

// visitDocValues calls fn with field's values of every match, for a field counted per match
// after the pass.
func (m *matchSet) visitDocValues(r index.IndexReader, field string, fn func(term []byte)) error {
	dv, err := r.DocValueReader([]string{field})
	if err != nil {
		return fmt.Errorf("%w: embedded index: %v", store.ErrUnavailable, err)
	}
	var buf index.IndexInternalID
	for i, bm := range m.bms {
		it := bm.Iterator()
		for it.HasNext() {
			buf = index.NewIndexInternalID(buf, m.offsets[i]+uint64(it.Next()))
			if err := dv.VisitDocValues(buf, func(f string, term []byte) {
				if f == field {
					fn(term)
				}
			}); err != nil {
				return fmt.Errorf("%w: embedded index: %v", store.ErrUnavailable, err)
			}
		}
	}
	return nil
}
