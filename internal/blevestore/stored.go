package blevestore

import (
	"fmt"
	"sort"

	"github.com/blevesearch/bleve/v2/index/scorch"
	index "github.com/blevesearch/bleve_index_api"
	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/mappings"
)

// storedDoc is what the index keeps of a document (index.go): its object as items answer it and
// its head, or, as earlier versions kept every document, the whole document (source).
type storedDoc struct {
	obj, head []byte
	source    []byte
}

// object is the document's object: as items answer it, or as the whole document holds it.
func (d *storedDoc) object() ([]byte, error) {
	if d.source != nil {
		return mappings.StoredObject(d.source)
	}
	if d.obj == nil {
		return nil, mappings.ErrNoObject
	}
	return d.obj, nil
}

// field is the value of one of headFields.
func (d *storedDoc) field(name string) gjson.Result {
	if d.source != nil {
		return gjson.GetBytes(d.source, name)
	}
	return gjson.GetBytes(d.head, name)
}

// epoch is the document's epoch as the write rule reads it (index.go); 0 when it has none.
func (d *storedDoc) epoch() int64 {
	if vals, err := longs(fieldEpoch, d.field(document.FieldEpoch)); err == nil && len(vals) > 0 {
		return vals[0]
	}
	return 0
}

// visit keeps the stored field name's value in d, copied: the value lives in a buffer the segment
// reuses.
func (d *storedDoc) visit(name string, value []byte) {
	switch name {
	case fieldObject:
		d.obj = append(d.obj[:0], value...)
	case fieldHead:
		d.head = append(d.head[:0], value...)
	case fieldSource:
		d.source = append(d.source[:0], value...)
	}
}

// sources reads the stored documents of a snapshot by internal id. Scorch's Document looks its
// external id up in every segment's _id terms first, four fifths of a page's reading (measured):
// here the segment is found from the id's document number, as scorch numbers them (each segment's
// documents, deleted ones included, after the previous segments').
type sources struct {
	r       index.IndexReader
	segs    []*scorch.SegmentSnapshot
	offsets []uint64
}

func newSources(r index.IndexReader) *sources {
	s := &sources{r: r}
	if is, ok := r.(*scorch.IndexSnapshot); ok {
		var off uint64
		for _, seg := range is.Segments() {
			s.segs = append(s.segs, seg)
			s.offsets = append(s.offsets, off)
			off += uint64(seg.FullSize())
		}
	}
	return s
}

// read is what the index keeps of iid's document.
func (s *sources) read(iid index.IndexInternalID) (*storedDoc, error) {
	if s.segs == nil {
		id, err := s.r.ExternalID(iid)
		if err != nil {
			return nil, fmt.Errorf("%w: embedded index: %v", store.ErrUnavailable, err)
		}
		return readStored(s.r, id)
	}
	num := iid.Value()
	i := sort.Search(len(s.offsets), func(x int) bool { return s.offsets[x] > num }) - 1
	if i < 0 {
		return nil, fmt.Errorf("%w: embedded index: document number %d in no segment", store.ErrUnavailable, num)
	}
	d := &storedDoc{}
	err := s.segs[i].VisitDocument(num-s.offsets[i], func(name string, _ byte, val []byte, _ []uint64) bool {
		d.visit(name, val)
		return true
	})
	if err != nil || d.obj == nil && d.source == nil {
		id, _ := s.r.ExternalID(iid)
		return nil, fmt.Errorf("%w: embedded index: read document %q: %v", store.ErrUnavailable, id, err)
	}
	return d, nil
}

// readStored is what the index keeps of the document id, read by its id.
func readStored(r index.IndexReader, id string) (*storedDoc, error) {
	doc, err := r.Document(id)
	if err != nil || doc == nil {
		return nil, fmt.Errorf("%w: embedded index: read document %q: %v", store.ErrUnavailable, id, err)
	}
	d := &storedDoc{}
	doc.VisitFields(func(f index.Field) { d.visit(f.Name(), f.Value()) })
	if d.obj == nil && d.source == nil {
		return nil, fmt.Errorf("%w: embedded index: read document %q: nothing stored", store.ErrUnavailable, id)
	}
	return d, nil
}
