package indexer

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/tidwall/gjson"
)

// fakeEngine keeps documents as OpenSearch's engine does for what the indexer relies on: external_gte
// versions compared with live documents and with delete tombstones alike (tombstones never expire
// here, as within index.gc_deletes), internal versioning, and compare-and-set on _seq_no.
type fakeEngine struct {
	mu    sync.Mutex
	docs  map[docKey]*fakeDoc
	seqNo int64
	// fail, when set, may answer for an op instead of the engine (to inject 429s, mapping errors).
	fail    func(o *op) (itemResult, bool)
	bulks   int
	indices map[string]bool // ensured
}

type fakeDoc struct {
	version     int64
	deleted     bool
	seqNo       int64
	primaryTerm int64
	source      []byte
}

func newFakeEngine() *fakeEngine {
	return &fakeEngine{docs: map[docKey]*fakeDoc{}, indices: map[string]bool{}}
}

func (f *fakeEngine) bulk(_ context.Context, ops []*op) ([]itemResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bulks++
	out := make([]itemResult, len(ops))
	for i, o := range ops {
		if f.fail != nil {
			if r, ok := f.fail(o); ok {
				out[i] = r
				continue
			}
		}
		out[i] = f.apply(o)
	}
	return out, nil
}

func (f *fakeEngine) apply(o *op) itemResult {
	k := o.key()
	cur := f.docs[k]
	var next int64
	switch {
	case o.cas:
		if cur == nil || cur.deleted || cur.seqNo != o.seqNo || cur.primaryTerm != o.primaryTerm {
			return itemResult{status: 409, errType: "version_conflict_engine_exception", reason: "seq_no mismatch"}
		}
		next = cur.version + 1
	case o.versioned:
		if cur != nil && cur.version > o.version {
			return itemResult{status: 409, errType: "version_conflict_engine_exception",
				reason: fmt.Sprintf("current version [%d] is higher than the one provided [%d]", cur.version, o.version)}
		}
		next = o.version
	default:
		next = 1
		if cur != nil {
			next = cur.version + 1
		}
	}
	f.seqNo++
	if o.action == actionDelete {
		missing := cur == nil || cur.deleted
		f.docs[k] = &fakeDoc{version: next, deleted: true, seqNo: f.seqNo, primaryTerm: 1}
		if missing {
			return itemResult{status: 404}
		}
		return itemResult{status: 200}
	}
	f.docs[k] = &fakeDoc{version: next, seqNo: f.seqNo, primaryTerm: 1, source: o.doc}
	if cur == nil || cur.deleted {
		return itemResult{status: 201}
	}
	return itemResult{status: 200}
}

func (f *fakeEngine) storedVersions(_ context.Context, keys []docKey) (map[docKey]storedDoc, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[docKey]storedDoc{}
	for _, k := range keys {
		d := f.docs[k]
		if d == nil || d.deleted {
			out[k] = storedDoc{}
			continue
		}
		out[k] = storedDoc{found: true, epoch: gjson.GetBytes(d.source, "epoch").Int(), rv: gjson.GetBytes(d.source, "resourceVersion").Int(),
			seqNo: d.seqNo, primaryTerm: d.primaryTerm, hasSeqNo: true}
	}
	return out, nil
}

func (f *fakeEngine) ensureIndex(_ context.Context, alias string) (indexState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.indices[alias] = true
	return indexState{alias: true, behind: []string{VersionedIndexName(alias)}}, nil
}

// version is the _version of a live document.
func (f *fakeEngine) version(k docKey) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d := f.docs[k]; d != nil {
		return d.version
	}
	return 0
}

// state is "absent", "deleted" or "epoch/resourceVersion" of a live document.
func (f *fakeEngine) state(index, id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.docs[docKey{index, id}]
	switch {
	case d == nil:
		return "absent"
	case d.deleted:
		return "deleted"
	}
	return strconv.FormatInt(gjson.GetBytes(d.source, "epoch").Int(), 10) + "/" +
		strconv.FormatInt(gjson.GetBytes(d.source, "resourceVersion").Int(), 10)
}
