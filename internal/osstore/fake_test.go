package osstore

import (
	"context"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/osstore/osstoretest"
)

// fakeEngine is a docStore over osstoretest's engine, for the writer's tests: what OpenSearch does
// with versions, tombstones and compare-and-set, without HTTP.
type fakeEngine struct {
	*osstoretest.Engine
	// fail, when set, may answer for an op instead of the engine (to inject 429s, mapping errors).
	fail    func(o *op) (itemResult, bool)
	indices map[string]bool // ensured
}

func newFakeEngine() *fakeEngine {
	return &fakeEngine{Engine: osstoretest.NewEngine(), indices: map[string]bool{}}
}

func (f *fakeEngine) bulk(_ context.Context, ops []*op) ([]itemResult, error) {
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
	r := f.Apply(osstoretest.Write{Delete: o.action == actionDelete, Index: o.index, ID: o.id, Doc: o.doc,
		Versioned: o.versioned, Version: o.version, CAS: o.cas, SeqNo: o.seqNo, PrimaryTerm: o.primaryTerm})
	return itemResult{status: r.Status, errType: r.ErrType, reason: r.Reason, version: r.Version}
}

func (f *fakeEngine) storedVersions(_ context.Context, keys []docKey) (map[docKey]storedDoc, error) {
	out := map[docKey]storedDoc{}
	for _, k := range keys {
		d, ok := f.Get(k.index, k.id)
		if !ok {
			out[k] = storedDoc{}
			continue
		}
		out[k] = storedDoc{found: true, epoch: gjson.GetBytes(d.Source, "epoch").Int(), rv: gjson.GetBytes(d.Source, "resourceVersion").Int(),
			seqNo: d.SeqNo, primaryTerm: d.PrimaryTerm, hasSeqNo: true}
	}
	return out, nil
}

func (f *fakeEngine) ensureIndex(_ context.Context, alias string) (indexState, error) {
	f.indices[alias] = true
	return indexState{alias: true, behind: []string{VersionedIndexName(alias)}}, nil
}

// state is "absent", "deleted" or "epoch/resourceVersion" of a live document.
func (f *fakeEngine) state(index, id string) string { return f.State(index, id) }
