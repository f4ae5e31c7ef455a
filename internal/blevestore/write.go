package blevestore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/search"
	bq "github.com/blevesearch/bleve/v2/search/query"
	index "github.com/blevesearch/bleve_index_api"
	segment "github.com/blevesearch/scorch_segment_api/v2"
	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/store"
)

// The write rule is osstore's (write.go) as OpenSearch applies it, so replaying the same ops on
// both stores leaves the same documents. Each document has a _version: a versioned op carries its
// resourceVersion and is taken when no document or tombstone has a higher _version (external_gte);
// refused, the epoch rule decides: a newer epoch, or within the epoch a higher resourceVersion than
// the stored document's, overwrites it (the _version then counts on from the stored one, as
// OpenSearch's compare-and-set write does), anything else is a replay and is dropped. A tombstone
// with a higher _version is judged alike by its delete's epoch and resourceVersion (osstore's
// tombstone.go): a newer op (the object back in the list of a member restored from an etcd
// snapshot) is written at the tombstone's _version, anything else is dropped — the object is gone
// and stays gone. Garbage collection's tombstones drop every op they refuse, as osstore's, whose
// epoch OpenSearch does not keep. Unversioned ops always apply, counting the _version on.
//
// Tombstones live gcDeletes, like OpenSearch's index.gc_deletes, and only in memory: a replay older
// than that can resurrect a deleted object, which the following SYNC removes again.
const gcDeletes = 60 * time.Second

// Write applies ops in order and returns those that can never be accepted (a document OpenSearch's
// mapping would refuse), by their position in ops. The batch is committed, searchable and on disk,
// before Write returns; an error means none of it was applied.
func (s *Store) Write(ctx context.Context, ops []store.Op) ([]store.Failure, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("write %d operations: %w", len(ops), err)
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	now := s.now()
	batch := s.idx.NewBatch()
	changed := map[string]*stored{}
	current := func(id string) *stored {
		cur, ok := changed[id]
		if !ok {
			cur = s.docs[id]
		}
		if cur != nil && cur.deleted && now.Sub(cur.deletedAt) > gcDeletes {
			return nil
		}
		return cur
	}
	var failed []store.Failure
	for i, o := range ops {
		if o.UID == "" {
			failed = append(failed, store.Failure{Pos: i, Err: "action_request_validation_exception: if _id is specified it must not be empty"})
			continue
		}
		id := docID(o.Kind, o.ID())
		cur := current(id)
		version, ok := nextVersion(o, cur)
		if !ok {
			continue // a replayed or late event
		}
		if o.Delete {
			batch.Delete(id)
			changed[id] = &stored{version: version, epoch: o.Epoch, rv: o.Version, deleted: true, deletedAt: now, judged: true}
			continue
		}
		d, st, err := build(id, o.Kind, o.Doc, version)
		if err != nil {
			failed = append(failed, store.Failure{Pos: i, Err: err.Error()})
			continue
		}
		if err := batch.IndexAdvanced(d); err != nil {
			failed = append(failed, store.Failure{Pos: i, Err: err.Error()})
			continue
		}
		changed[id] = &st
	}
	if batch.Size() > 0 {
		if err := s.idx.Batch(batch); err != nil {
			return nil, fmt.Errorf("write %d operations: %w", len(ops), err)
		}
	}
	for id, st := range changed {
		s.docs[id] = st
	}
	return failed, nil
}

// nextVersion decides whether op applies over cur (nil: no document, no live tombstone), and
// the _version it leaves.
func nextVersion(o store.Op, cur *stored) (int64, bool) {
	switch {
	case !o.Versioned && cur == nil:
		return 1, true
	case !o.Versioned:
		return cur.version + 1, true
	case cur == nil || cur.version <= o.Version:
		return o.Version, true
	case cur.deleted && cur.judged && newerThan(o, cur.epoch, cur.rv):
		return cur.version, true
	case cur.deleted:
		return 0, false
	case newerThan(o, cur.epoch, cur.rv):
		return cur.version + 1, true
	}
	return 0, false
}

// newerThan is the epoch rule: a newer epoch wins whatever the resourceVersions say; within one
// epoch the higher resourceVersion wins.
func newerThan(o store.Op, epoch, rv int64) bool {
	if o.Epoch != epoch {
		return o.Epoch > epoch
	}
	return o.Version > rv
}

// loadDocs rebuilds the write rule's view of every document from the index: each one's id from
// the _id terms and its versions from the doc values. Reading the id through ExternalID would
// read it from the document's stored fields, which lie beside its source: it touched every
// stored page of the index, so a process that had just opened the store held its whole folder
// resident (RSS about the folder's size, measured by BenchmarkStoresReopen). The _id dictionary
// is a small part of it.
func (s *Store) loadDocs() error {
	adv, err := s.idx.Advanced()
	if err != nil {
		return fmt.Errorf("blevestore: open index: %w", err)
	}
	r, err := adv.Reader()
	if err != nil {
		return fmt.Errorf("blevestore: read index: %w", err)
	}
	defer r.Close()
	dv, err := r.DocValueReader([]string{fieldVersion, fieldEpoch, fieldRV})
	if err != nil {
		return fmt.Errorf("blevestore: read index: %w", err)
	}
	load := func(id string, iid index.IndexInternalID) error {
		st := &stored{}
		err := dv.VisitDocValues(iid, func(field string, term []byte) {
			n, _ := dec(term)
			switch field {
			case fieldVersion:
				st.version = n
			case fieldEpoch:
				st.epoch = n
			case fieldRV:
				st.rv = n
			}
		})
		if err != nil {
			return fmt.Errorf("blevestore: read index: %w", err)
		}
		s.docs[id] = st
		return nil
	}
	if is, ok := r.(*scorch.IndexSnapshot); ok {
		return loadIDs(is, load)
	}
	ids, err := r.DocIDReaderAll()
	if err != nil {
		return fmt.Errorf("blevestore: read index: %w", err)
	}
	defer ids.Close()
	for {
		iid, err := ids.Next()
		if err != nil {
			return fmt.Errorf("blevestore: read index: %w", err)
		}
		if iid == nil {
			return nil
		}
		id, err := r.ExternalID(iid)
		if err != nil {
			return fmt.Errorf("blevestore: read index: %w", err)
		}
		if err := load(id, iid); err != nil {
			return err
		}
	}
}

// loadIDs calls fn with the id and internal id of every live document of is, read segment by
// segment from the _id terms (a document's id has one posting in its segment, kept in the
// dictionary itself). Internal ids number each segment's documents, deleted ones included, after
// the previous segments', as scorch numbers them.
func loadIDs(is *scorch.IndexSnapshot, fn func(id string, iid index.IndexInternalID) error) error {
	var (
		base uint64
		pl   segment.PostingsList
		it   segment.PostingsIterator
	)
	for _, seg := range is.Segments() {
		dict, err := seg.Segment().Dictionary("_id")
		if err != nil {
			return fmt.Errorf("blevestore: read index: %w", err)
		}
		terms := dict.AutomatonIterator(nil, nil, nil)
		for {
			e, err := terms.Next()
			if err != nil {
				return fmt.Errorf("blevestore: read index: %w", err)
			}
			if e == nil {
				break
			}
			if pl, err = dict.PostingsList([]byte(e.Term), seg.Deleted(), pl); err != nil {
				return fmt.Errorf("blevestore: read index: %w", err)
			}
			it = pl.Iterator(false, false, false, it)
			for {
				p, err := it.Next()
				if err != nil {
					return fmt.Errorf("blevestore: read index: %w", err)
				}
				if p == nil {
					break
				}
				if err := fn(e.Term, index.NewIndexInternalID(nil, base+p.Number())); err != nil {
					return err
				}
			}
		}
		base += seg.Segment().Count()
	}
	return nil
}

func (s *Store) expireTombstones() {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	now := s.now()
	for id, st := range s.docs {
		if st.deleted && now.Sub(st.deletedAt) > gcDeletes {
			delete(s.docs, id)
		}
	}
}

// DeleteOlder applies a SYNC marker: it deletes the documents of scope (in the index of its kind)
// from an epoch older than epoch, and counts them. Their tombstones keep each one's _version, so
// an unchanged object listed again is taken again while an older replay is still dropped.
// report (nil: nobody) is told them before they are deleted.
func (s *Store) DeleteOlder(ctx context.Context, scope store.ListScope, epoch int64, report store.GoneFunc) (int64, error) {
	must := []bq.Query{
		termQ(fieldIndex, indexOf(scope.Kind)), termQ(fieldCluster, scope.Cluster),
		termQ(fieldGroup, scope.Group), termQ(fieldResource, scope.Resource),
	}
	if scope.Namespace != "" {
		must = append(must, termQ(fieldNamespace, scope.Namespace))
	}
	must = append(must, rangeQ(fieldEpoch, nil, &epoch))
	n, err := s.deleteMatching(ctx, bq.NewConjunctionQuery(must), report, 0)
	if err != nil {
		return n, fmt.Errorf("SYNC garbage collection of %s: %w", scope.Pair.ID(), err)
	}
	return n, nil
}

// DeleteOlderEach applies several SYNC markers, one after the other: nothing here waits on a
// refresh that batching would share.
func (s *Store) DeleteOlderEach(ctx context.Context, syncs []store.Sync, report store.GoneFunc) (deleted []int64, errs []error) {
	deleted, errs = make([]int64, len(syncs)), make([]error, len(syncs))
	for i, sy := range syncs {
		var r store.GoneFunc
		if report != nil {
			r = func(ctx context.Context, _ int, gone []store.Gone) error { return report(ctx, i, gone) }
		}
		deleted[i], errs[i] = s.DeleteOlder(ctx, sy.Scope, sy.Epoch, r)
	}
	return deleted, errs
}

// DeleteAll applies a PURGE marker: it deletes every document of sel, whatever its epoch.
func (s *Store) DeleteAll(ctx context.Context, sel store.Selection, report store.GoneFunc) (int64, error) {
	must := []bq.Query{
		termQ(fieldIndex, indexOf(sel.Kind)), termQ(fieldCluster, sel.Cluster),
		termQ(fieldGroup, sel.Group), termQ(fieldKind, sel.Kind),
	}
	if sel.Namespace != "" {
		must = append(must, termQ(fieldNamespace, sel.Namespace))
	}
	n, err := s.deleteMatching(ctx, bq.NewConjunctionQuery(must), report, 0)
	if err != nil {
		return n, fmt.Errorf("PURGE garbage collection of %s/%s/%s: %w", sel.Cluster, sel.Group, sel.Kind, err)
	}
	return n, nil
}

func (s *Store) deleteMatching(ctx context.Context, q bq.Query, report store.GoneFunc, marker int) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	adv, err := s.idx.Advanced()
	if err != nil {
		return 0, err
	}
	r, err := adv.Reader()
	if err != nil {
		return 0, err
	}
	var ids []string
	err = visit(ctx, r, q, false, func(dm *search.DocumentMatch) error {
		id, err := r.ExternalID(dm.IndexInternalID)
		ids = append(ids, id)
		return err
	})
	var gone []store.Gone
	if err == nil && report != nil && len(ids) > 0 {
		gone, err = s.goneOf(r, ids)
	}
	r.Close()
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	if report != nil {
		if err := report(ctx, marker, gone); err != nil {
			return 0, err
		}
	}
	batch := s.idx.NewBatch()
	for _, id := range ids {
		batch.Delete(id)
	}
	if err := s.idx.Batch(batch); err != nil {
		return 0, err
	}
	now := s.now()
	for _, id := range ids {
		var version int64
		if cur := s.docs[id]; cur != nil {
			version = cur.version
		}
		s.docs[id] = &stored{version: version, deleted: true, deletedAt: now}
	}
	return int64(len(ids)), nil
}

// goneOf reads what store.Gone holds of the documents ids, as they are stored.
func (s *Store) goneOf(r index.IndexReader, ids []string) ([]store.Gone, error) {
	out := make([]store.Gone, 0, len(ids))
	for _, id := range ids {
		d, obj, err := storedObject(r, id)
		if err != nil {
			return nil, err
		}
		st := s.docs[id]
		g := store.Gone{Cluster: d.field(document.FieldCluster).Str, Resource: d.field(document.FieldResource).Str,
			UID: gjson.GetBytes(obj, "metadata.uid").Str, Object: document.Identity(obj)}
		if st != nil {
			g.Epoch, g.ResourceVersion = st.epoch, st.rv
		}
		out = append(out, g)
	}
	return out, nil
}

// Priors reads what the index holds of each op's document before the op (store.Prior): the
// change feed's view of what an op changes. The ops are not written.
func (s *Store) Priors(ctx context.Context, ops []store.Op) ([]store.Prior, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	r, err := s.reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	out := make([]store.Prior, len(ops))
	for i, o := range ops {
		id := docID(o.Kind, o.ID())
		st := s.docs[id]
		if st == nil || st.deleted {
			continue
		}
		p := store.Prior{Found: true, Epoch: st.epoch, ResourceVersion: st.rv}
		_, obj, err := storedObject(r, id)
		if err != nil {
			return nil, err
		}
		if l := gjson.GetBytes(obj, "metadata.labels"); l.IsObject() {
			p.Labels = json.RawMessage(l.Raw)
		}
		out[i] = p
	}
	return out, nil
}

// storedObject reads what the index keeps of the document id, and its object.
func storedObject(r index.IndexReader, id string) (*storedDoc, []byte, error) {
	d, err := readStored(r, id)
	if err != nil {
		return nil, nil, err
	}
	obj, err := d.object()
	if err != nil {
		return nil, nil, fmt.Errorf("document %s: %w", strings.ReplaceAll(id, "\x00", "/"), err)
	}
	return d, obj, nil
}
