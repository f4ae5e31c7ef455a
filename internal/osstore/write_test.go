package osstore

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubesearch/kubesearch/internal/osstore/osstoretest"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/mappings"
)

const testIndex = "kubernetes-pod"

func testWriter(docs docStore) (*writer, *metrics) {
	m, err := newMetrics(nil)
	if err != nil {
		panic(err) // unregistered metrics cannot collide
	}
	w := newWriter(docs, m, slog.New(slog.NewTextHandler(io.Discard, nil)))
	w.backoff = func() wait.Backoff { return wait.Backoff{Duration: time.Millisecond, Steps: 1 << 30} }
	return w, m
}

// objEvent describes the object event of an op: "index" or "delete", uid, epoch, resourceVersion.
type objEvent struct {
	action    action
	uid       string
	epoch, rv int64
}

func ops(evs ...objEvent) []*op {
	out := make([]*op, len(evs))
	for i, e := range evs {
		o := &op{pos: i, action: e.action, index: testIndex, id: e.uid, epoch: e.epoch, versioned: true, version: e.rv}
		if e.action == actionIndex {
			o.doc = fmt.Appendf(nil, `{"uid":%q,"epoch":%d,"resourceVersion":%d}`, e.uid, e.epoch, e.rv)
		}
		out[i] = o
	}
	return out
}

func idx(uid string, epoch, rv int64) objEvent { return objEvent{actionIndex, uid, epoch, rv} }
func del(uid string, epoch, rv int64) objEvent { return objEvent{actionDelete, uid, epoch, rv} }

// TestEpochRule: a member rebuilt under the same name (etcd restored, cluster recreated) counts
// resourceVersions from low numbers again. Its newer epoch must win, and keep winning for the later
// events of the same objects, while replays of either epoch stay refused and are counted, not failed.
func TestEpochRule(t *testing.T) {
	const old, rebuilt = 1000, 2000 // epochs
	tests := []struct {
		name       string
		before     []objEvent // applied first (the stored state)
		events     []objEvent // the batch under test
		want       map[string]string
		replays    float64
		overwrites float64
	}{
		{
			name:   "replay within an epoch is refused and counted",
			before: []objEvent{idx("a", old, 10)},
			events: []objEvent{idx("a", old, 9)},
			want:   map[string]string{"a": "1000/10"}, replays: 1,
		},
		{
			name:   "same event again is idempotent, no conflict",
			before: []objEvent{idx("a", old, 10)},
			events: []objEvent{idx("a", old, 10)},
			want:   map[string]string{"a": "1000/10"},
		},
		{
			name:   "rebuilt member: a newer epoch with a lower resourceVersion wins",
			before: []objEvent{idx("a", old, 5000)},
			events: []objEvent{idx("a", rebuilt, 100)},
			want:   map[string]string{"a": "2000/100"}, overwrites: 1,
		},
		{
			name:   "rebuilt member does not freeze: later events of the new epoch keep applying",
			before: []objEvent{idx("a", old, 5000), idx("a", rebuilt, 100)},
			events: []objEvent{idx("a", rebuilt, 101)},
			want:   map[string]string{"a": "2000/101"}, overwrites: 1,
		},
		{
			name:   "late event of the old epoch after the rebuild is a replay",
			before: []objEvent{idx("a", old, 5000), idx("a", rebuilt, 100)},
			events: []objEvent{idx("a", old, 4000)},
			want:   map[string]string{"a": "2000/100"}, replays: 1,
		},
		{
			name:   "a replayed older event of the new epoch is refused too",
			before: []objEvent{idx("a", old, 5000), idx("a", rebuilt, 100), idx("a", rebuilt, 101)},
			events: []objEvent{idx("a", rebuilt, 100)},
			want:   map[string]string{"a": "2000/101"}, replays: 1,
		},
		{
			name:   "rebuilt member deletes an object with a lower resourceVersion",
			before: []objEvent{idx("a", old, 5000)},
			events: []objEvent{del("a", rebuilt, 150)},
			want:   map[string]string{"a": "deleted"}, overwrites: 1,
		},
		{
			name:   "a replay after the delete does not resurrect the object",
			before: []objEvent{idx("a", old, 10), del("a", old, 11)},
			events: []objEvent{idx("a", old, 10)},
			want:   map[string]string{"a": "deleted"}, replays: 1,
		},
		// A member restored from an etcd snapshot: the object deleted at 5000 comes back in the new
		// epoch's list at 150 while the delete's tombstone (version 5000) still lives.
		{
			name:   "restored object: a newer epoch passes the tombstone of an older epoch's delete",
			before: []objEvent{idx("a", old, 4000), del("a", old, 5000)},
			events: []objEvent{idx("a", rebuilt, 150)},
			want:   map[string]string{"a": "2000/150"}, overwrites: 1,
		},
		{
			name:   "restored object: the delete and the new epoch's ADDED in one batch",
			before: []objEvent{idx("a", old, 4000)},
			events: []objEvent{del("a", old, 5000), idx("a", rebuilt, 150)},
			want:   map[string]string{"a": "2000/150"}, overwrites: 1,
		},
		{
			name:   "a replay of the deleting epoch stays deleted",
			before: []objEvent{idx("a", old, 4000), del("a", old, 5000)},
			events: []objEvent{idx("a", old, 4000)},
			want:   map[string]string{"a": "deleted"}, replays: 1,
		},
		{
			name:   "restored object: later events of the new epoch keep applying",
			before: []objEvent{idx("a", old, 4000), del("a", old, 5000), idx("a", rebuilt, 150)},
			events: []objEvent{idx("a", rebuilt, 160)},
			want:   map[string]string{"a": "2000/160"}, overwrites: 1,
		},
		{
			name:   "restored object: a replay of the old epoch is refused",
			before: []objEvent{idx("a", old, 4000), del("a", old, 5000), idx("a", rebuilt, 150)},
			events: []objEvent{idx("a", old, 4000)},
			want:   map[string]string{"a": "2000/150"}, replays: 1,
		},
		{
			name:   "a tombstone of the new epoch refuses that epoch's replay",
			before: []objEvent{idx("a", old, 4000), del("a", old, 5000), idx("a", rebuilt, 150), del("a", rebuilt, 200)},
			events: []objEvent{idx("a", rebuilt, 150)},
			want:   map[string]string{"a": "deleted"}, replays: 1,
		},
		{
			name:   "a delete of the new epoch passes an older tombstone and keeps its own epoch",
			before: []objEvent{idx("a", old, 4000), del("a", old, 5000), del("a", rebuilt, 150)},
			events: []objEvent{idx("a", rebuilt, 100)},
			want:   map[string]string{"a": "deleted"}, replays: 1,
		},
		{
			name:   "several events of one object in a batch: the newest wins, once",
			before: []objEvent{idx("a", old, 5000), idx("b", old, 7)},
			events: []objEvent{idx("a", rebuilt, 100), idx("b", old, 8), idx("a", rebuilt, 102), idx("b", old, 6)},
			want:   map[string]string{"a": "2000/102", "b": "1000/8"}, overwrites: 1, replays: 2,
		},
		{
			name:   "a conflicting op superseded by a later written one in the same batch is a replay",
			before: []objEvent{idx("a", old, 50)},
			events: []objEvent{idx("a", old, 40), idx("a", old, 60)},
			want:   map[string]string{"a": "1000/60"}, replays: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeEngine()
			w, m := testWriter(f)
			for _, e := range tt.before {
				if _, err := w.write(t.Context(), ops(e)); err != nil {
					t.Fatal(err)
				}
			}
			before := testutil.ToFloat64(m.conflicts.WithLabelValues(testIndex, "overwritten"))
			failed, err := w.write(t.Context(), ops(tt.events...))
			if err != nil || len(failed) > 0 {
				t.Fatalf("write: failed %v, err %v", failed, err)
			}
			for uid, want := range tt.want {
				if got := f.state(testIndex, uid); got != want {
					t.Errorf("document %s: got %s, want %s", uid, got, want)
				}
			}
			if got := testutil.ToFloat64(m.conflicts.WithLabelValues(testIndex, "replay")); got != tt.replays {
				t.Errorf("replays counted: got %v, want %v", got, tt.replays)
			}
			if got := testutil.ToFloat64(m.conflicts.WithLabelValues(testIndex, "overwritten")) - before; got != tt.overwrites {
				t.Errorf("overwrites counted: got %v, want %v", got, tt.overwrites)
			}
		})
	}
}

// TestEpochRuleCompareAndSet: a document that changes between the read of its epoch and the
// overwrite is not overwritten blindly; the rule is applied again to what is stored then.
func TestEpochRuleCompareAndSet(t *testing.T) {
	f := newFakeEngine()
	w, _ := testWriter(f)
	if _, err := w.write(t.Context(), ops(idx("a", 1, 5000))); err != nil {
		t.Fatal(err)
	}
	raced := false
	f.fail = func(o *op) (itemResult, bool) {
		if o.cas && !raced {
			// Another writer got there first, with an even newer epoch.
			raced = true
			f.apply(&op{action: actionIndex, index: o.index, id: o.id, doc: []byte(`{"epoch":3,"resourceVersion":1}`)})
			return f.apply(o), true
		}
		return itemResult{}, false
	}
	if _, err := w.write(t.Context(), ops(idx("a", 2, 100))); err != nil {
		t.Fatal(err)
	}
	if got := f.state(testIndex, "a"); got != "3/1" {
		t.Errorf("got %s, want the newer concurrent write 3/1 kept", got)
	}
}

// TestWriteRetriesOnlyFailedItems: items refused with 429 or 5xx are retried, alone and in order;
// items refused for good come back as failures; nothing else is sent twice.
func TestWriteRetriesOnlyFailedItems(t *testing.T) {
	f := newFakeEngine()
	w, m := testWriter(f)
	attempts := map[string]int{}
	f.fail = func(o *op) (itemResult, bool) {
		attempts[o.id]++
		switch {
		case o.id == "busy" && attempts[o.id] <= 2:
			return itemResult{status: 429, errType: "es_rejected_execution_exception"}, true
		case o.id == "flaky" && attempts[o.id] == 1:
			return itemResult{status: 503, errType: "unavailable_shards_exception"}, true
		case o.id == "bad":
			return itemResult{status: 400, errType: "mapper_parsing_exception", reason: "failed to parse field [podIP]"}, true
		}
		return itemResult{}, false
	}
	failed, err := w.write(t.Context(), ops(idx("ok", 1, 1), idx("busy", 1, 1), idx("bad", 1, 1), idx("flaky", 1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) != 1 || failed[0].op.id != "bad" || !strings.Contains(failed[0].err, "mapper_parsing_exception") {
		t.Fatalf("failed: got %+v, want only bad", failed)
	}
	want := map[string]int{"ok": 1, "busy": 3, "bad": 1, "flaky": 2}
	for id, n := range want {
		if attempts[id] != n {
			t.Errorf("%s sent %d times, want %d", id, attempts[id], n)
		}
	}
	for _, id := range []string{"ok", "busy", "flaky"} {
		if got := f.state(testIndex, id); got != "1/1" {
			t.Errorf("%s: got %s", id, got)
		}
	}
	if got := testutil.ToFloat64(m.retriedItems); got != 3 {
		t.Errorf("retried items: got %v, want 3", got)
	}
}

// TestWriteSupersededRetry: an op that must be retried is dropped when a later event of the same
// object was written: retrying it would apply an older state over a newer one.
func TestWriteSupersededRetry(t *testing.T) {
	f := newFakeEngine()
	w, m := testWriter(f)
	first := true
	f.fail = func(o *op) (itemResult, bool) {
		if o.pos == 0 && first {
			first = false
			return itemResult{status: 503}, true
		}
		return itemResult{}, false
	}
	batch := ops(idx("a", 1, 1), idx("a", 1, 2))
	for _, o := range batch {
		o.versioned = false // as for an aggregated API: nothing else would refuse the older write
	}
	if _, err := w.write(t.Context(), batch); err != nil {
		t.Fatal(err)
	}
	if got := f.state(testIndex, "a"); got != "1/2" {
		t.Errorf("got %s, want 1/2", got)
	}
	if got := testutil.ToFloat64(m.superseded); got != 1 {
		t.Errorf("superseded: got %v, want 1", got)
	}
}

// splittingStore refuses any _bulk request holding the poisoned op as a whole (as OpenSearch does
// with a body it cannot parse), so the writer must isolate it.
type splittingStore struct {
	*fakeEngine
	requests int
}

func (s *splittingStore) bulk(ctx context.Context, ops []*op) ([]itemResult, error) {
	s.requests++
	for _, o := range ops {
		if o.id == "poison" {
			return nil, &requestError{status: 400, err: fmt.Errorf("x_content_parse_exception")}
		}
	}
	return s.fakeEngine.bulk(ctx, ops)
}

func TestWriteSplitsRefusedRequest(t *testing.T) {
	s := &splittingStore{fakeEngine: newFakeEngine()}
	w, _ := testWriter(s)
	batch := ops(idx("a", 1, 1), idx("b", 1, 1), idx("poison", 1, 1), idx("c", 1, 1), idx("d", 1, 1))
	failed, err := w.write(t.Context(), batch)
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) != 1 || failed[0].op.id != "poison" {
		t.Fatalf("failed: got %+v, want only poison", failed)
	}
	for _, id := range []string{"a", "b", "c", "d"} {
		if got := s.state(testIndex, id); got != "1/1" {
			t.Errorf("%s: got %s", id, got)
		}
	}
}

// downStore fails every request until told otherwise, as an unreachable OpenSearch does.
type downStore struct {
	*fakeEngine
	down  int // requests still to fail
	calls int
}

func (s *downStore) bulk(ctx context.Context, ops []*op) ([]itemResult, error) {
	s.calls++
	if s.down > 0 {
		s.down--
		return nil, &requestError{err: fmt.Errorf("dial tcp 127.0.0.1:9200: connect: connection refused")}
	}
	return s.fakeEngine.bulk(ctx, ops)
}

func TestWriteWaitsForOpenSearch(t *testing.T) {
	s := &downStore{fakeEngine: newFakeEngine(), down: 3}
	w, _ := testWriter(s)
	var health []bool
	w.healthy = func(ok bool) { health = append(health, ok) }
	if _, err := w.write(t.Context(), ops(idx("a", 1, 1))); err != nil {
		t.Fatal(err)
	}
	if s.calls != 4 || s.state(testIndex, "a") != "1/1" {
		t.Errorf("calls %d, state %s", s.calls, s.state(testIndex, "a"))
	}
	if fmt.Sprint(health) != "[false false false true]" {
		t.Errorf("health reports: %v", health)
	}

	// Down for good: the write gives up only when its context ends, and says so.
	s.down = 1 << 30
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := w.write(ctx, ops(idx("b", 1, 1))); err == nil {
		t.Fatal("write returned without error while OpenSearch was down")
	}
}

// TestWriteReportsFailuresByPosition: Write names each op OpenSearch will never accept by its
// position in the slice written, in order, and writes the index of each op's kind.
func TestWriteReportsFailuresByPosition(t *testing.T) {
	s, err := New(Options{Addresses: []string{"http://127.0.0.1:1"}, Index: mappings.Options{Prefix: "team1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	f := newFakeEngine()
	s.writer.docs = f
	f.fail = func(o *op) (itemResult, bool) {
		if o.id == store.DocID("", "bad1") || o.id == store.DocID("", "bad2") {
			return itemResult{status: 400, errType: "mapper_parsing_exception", reason: "failed to parse field [podIP]"}, true
		}
		return itemResult{}, false
	}
	doc := []byte(`{"epoch":1,"resourceVersion":1}`)
	failed, err := s.Write(t.Context(), []store.Op{
		{Kind: "Pod", UID: "ok", Doc: doc, Epoch: 1, Version: 1, Versioned: true},
		{Kind: "Pod", UID: "bad1", Doc: doc, Epoch: 1, Version: 1, Versioned: true},
		{Kind: "ConfigMap", UID: "ok2", Doc: doc, Epoch: 1},
		{Kind: "Pod", UID: "bad2", Doc: doc, Epoch: 1, Version: 1, Versioned: true},
		{Delete: true, Kind: "Pod", UID: "gone", Epoch: 1, Version: 2, Versioned: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) != 2 || failed[0].Pos != 1 || failed[1].Pos != 3 || !strings.Contains(failed[0].Err, "mapper_parsing_exception") {
		t.Fatalf("failures: %+v, want positions 1 and 3", failed)
	}
	if got := f.state("team1-kubernetes-pod", store.DocID("", "ok")); got != "1/1" {
		t.Errorf("ok: %s", got)
	}
	if got := f.state("team1-kubernetes-configmap", store.DocID("", "ok2")); got != "1/1" {
		t.Errorf("ok2: %s", got)
	}
	if got := f.state("team1-kubernetes-pod", store.DocID("", "gone")); got != "deleted" {
		t.Errorf("gone: %s", got)
	}
}

// TestEpochRuleTombstoneMemory: the epoch of a delete is the writer's memory, not OpenSearch's. A
// tombstone the writer does not remember (written before a restart, or by another indexer) or no
// longer remembers is judged as a newer delete: the op is a replay, as before the memory existed.
func TestEpochRuleTombstoneMemory(t *testing.T) {
	f := newFakeEngine()
	w, m := testWriter(f)
	now := time.Now()
	w.tombs.now = func() time.Time { return now }
	// A delete from before this writer: OpenSearch has the tombstone, the writer no memory of it.
	f.apply(ops(del("before", 1, 5000))[0])
	if _, err := w.write(t.Context(), ops(idx("a", 1, 4000), del("a", 1, 5000))); err != nil {
		t.Fatal(err)
	}
	now = now.Add(tombstoneMemory + time.Second)
	if _, err := w.write(t.Context(), ops(idx("before", 2, 150), idx("a", 2, 150))); err != nil {
		t.Fatal(err)
	}
	for _, uid := range []string{"before", "a"} {
		if got := f.state(testIndex, uid); got != "deleted" {
			t.Errorf("%s: got %s, want deleted", uid, got)
		}
	}
	if got := testutil.ToFloat64(m.conflicts.WithLabelValues(testIndex, "replay")); got != 2 {
		t.Errorf("replays counted: got %v, want 2", got)
	}
	if len(w.tombs.byKey) != 0 || len(w.tombs.order) != 0 {
		t.Errorf("expired tombstones still remembered: %v", w.tombs.byKey)
	}
}

// TestEpochRuleTombstoneReplaced: a tombstone that is not the one remembered (another writer
// deleted the object again, higher) refuses the write over it; the op is then a replay, not
// retried for ever.
func TestEpochRuleTombstoneReplaced(t *testing.T) {
	f := newFakeEngine()
	w, m := testWriter(f)
	if _, err := w.write(t.Context(), ops(idx("a", 1, 4000), del("a", 1, 5000))); err != nil {
		t.Fatal(err)
	}
	f.apply(ops(del("a", 1, 6000))[0])
	if _, err := w.write(t.Context(), ops(idx("a", 2, 150))); err != nil {
		t.Fatal(err)
	}
	if got := f.state(testIndex, "a"); got != "deleted" {
		t.Errorf("got %s, want deleted", got)
	}
	if got := testutil.ToFloat64(m.conflicts.WithLabelValues(testIndex, "replay")); got != 1 {
		t.Errorf("replays counted: got %v, want 1", got)
	}
}

// TestStoreWriteRestoredObject is the restore through the store's HTTP calls, against the fake
// OpenSearch: a _bulk item's _version is the tombstone's the writer remembers.
func TestStoreWriteRestoredObject(t *testing.T) {
	f, s := newEngineStore(t)
	write := func(o store.Op) {
		t.Helper()
		if failed, err := s.Write(t.Context(), []store.Op{o}); err != nil || len(failed) > 0 {
			t.Fatalf("write: failed %v, err %v", failed, err)
		}
	}
	doc := func(epoch, rv int64) []byte { return fmt.Appendf(nil, `{"epoch":%d,"resourceVersion":%d}`, epoch, rv) }
	write(store.Op{Kind: "Pod", UID: "u", Doc: doc(1, 4000), Epoch: 1, Version: 4000, Versioned: true})
	write(store.Op{Delete: true, Kind: "Pod", UID: "u", Epoch: 1, Version: 5000, Versioned: true})
	write(store.Op{Kind: "Pod", UID: "u", Doc: doc(1, 4000), Epoch: 1, Version: 4000, Versioned: true})
	if got := f.Engine.State(testIndex, store.DocID("", "u")); got != "deleted" {
		t.Fatalf("replay of the deleting epoch: got %s, want deleted", got)
	}
	write(store.Op{Kind: "Pod", UID: "u", Doc: doc(2, 150), Epoch: 2, Version: 150, Versioned: true})
	if got := f.Engine.State(testIndex, store.DocID("", "u")); got != "2/150" {
		t.Errorf("restored object: got %s, want 2/150", got)
	}
	write(store.Op{Kind: "Pod", UID: "u", Doc: doc(2, 160), Epoch: 2, Version: 160, Versioned: true})
	if got := f.Engine.State(testIndex, store.DocID("", "u")); got != "2/160" {
		t.Errorf("its next change: got %s, want 2/160", got)
	}
}

// TestStoreWriteSameUIDTwoClusters: one member registered under two names (or members cloned from
// one etcd snapshot) publishes objects of the same uid under two cluster names. Each keeps its
// document: a write of one never replaces the other's, a delete of one leaves the other, and a
// SYNC of one cluster's scope never deletes the other's (issue 23 item 5).
func TestStoreWriteSameUIDTwoClusters(t *testing.T) {
	f, s := newEngineStore(t)
	doc := func(cluster string, epoch, rv int64) []byte {
		return fmt.Appendf(nil, `{"cluster":%q,"group":"","resource":"pods","kind":"Pod","namespace":"shop","uid":"u","epoch":%d,"resourceVersion":%d}`,
			cluster, epoch, rv)
	}
	op := func(cluster string, epoch, rv int64) store.Op {
		return store.Op{Kind: "Pod", Cluster: cluster, UID: "u", Doc: doc(cluster, epoch, rv), Epoch: epoch, Version: rv, Versioned: true}
	}
	write := func(ops ...store.Op) {
		t.Helper()
		if failed, err := s.Write(t.Context(), ops); err != nil || len(failed) > 0 {
			t.Fatalf("write: failed %v, err %v", failed, err)
		}
	}
	states := func() string {
		return f.Engine.State(testIndex, store.DocID("member1", "u")) + " " + f.Engine.State(testIndex, store.DocID("member1-copy", "u"))
	}
	// The copy's resourceVersions are the same member's: equal, then ahead of the first name's.
	write(op("member1", 1, 100), op("member1-copy", 2, 100))
	if got := states(); got != "1/100 2/100" {
		t.Fatalf("after both lists: %s, want 1/100 2/100", got)
	}
	write(op("member1-copy", 2, 120))
	if got := states(); got != "1/100 2/120" {
		t.Errorf("after a change seen by the copy first: %s, want 1/100 2/120", got)
	}
	write(store.Op{Delete: true, Kind: "Pod", Cluster: "member1-copy", UID: "u", Epoch: 2, Version: 130, Versioned: true})
	if got := states(); got != "1/100 deleted" {
		t.Errorf("after the copy's delete: %s, want 1/100 deleted", got)
	}
	write(op("member1-copy", 3, 140))
	scope := func(cluster string) store.ListScope {
		return store.ListScope{Pair: store.Pair{Cluster: cluster, Resource: "pods"}, Kind: "Pod"}
	}
	if n, err := s.DeleteOlder(t.Context(), scope("member1-copy"), 3, nil); err != nil || n != 0 {
		t.Errorf("SYNC of the copy's list: deleted %d, %v; want 0", n, err)
	}
	if got := states(); got != "1/100 3/140" {
		t.Errorf("after the copy's SYNC: %s, want 1/100 3/140", got)
	}
	if n, err := s.DeleteOlder(t.Context(), scope("member1"), 4, nil); err != nil || n != 1 {
		t.Errorf("SYNC of member1's next list, which did not see u: deleted %d, %v; want 1", n, err)
	}
	if got := states(); got != "deleted 3/140" {
		t.Errorf("after member1's SYNC: %s, want deleted 3/140", got)
	}
}

// Several SYNC markers applied together delete what each would alone — a scope's documents of older
// epochs, not those its list rewrote at an unchanged version, nothing of another scope — behind one
// refresh before and one after, where one by one they cost two each.
func TestStoreDeleteOlderEach(t *testing.T) {
	f, s := newEngineStore(t)
	op := func(cluster, uid string, epoch, rv int64) store.Op {
		doc := fmt.Appendf(nil, `{"cluster":%q,"group":"","resource":"pods","kind":"Pod","namespace":"shop","uid":%q,"epoch":%d,"resourceVersion":%d}`,
			cluster, uid, epoch, rv)
		return store.Op{Kind: "Pod", Cluster: cluster, UID: uid, Doc: doc, Epoch: epoch, Version: rv, Versioned: true}
	}
	var ops []store.Op
	var syncs []store.Sync
	for i := range 5 {
		cluster := fmt.Sprintf("member%d", i)
		// The first list saw a, b and c; the second sees a unchanged and b changed: c vanished.
		ops = append(ops, op(cluster, "a", 1, 10), op(cluster, "b", 1, 11), op(cluster, "c", 1, 12))
		syncs = append(syncs, store.Sync{Scope: store.ListScope{Pair: store.Pair{Cluster: cluster, Resource: "pods"}, Kind: "Pod"}, Epoch: 2})
	}
	if failed, err := s.Write(t.Context(), ops); err != nil || len(failed) > 0 {
		t.Fatalf("write: failed %v, err %v", failed, err)
	}
	ops = ops[:0]
	for i := range 4 { // member4 is not listed again: its SYNC is not in the batch
		cluster := fmt.Sprintf("member%d", i)
		ops = append(ops, op(cluster, "a", 2, 10), op(cluster, "b", 2, 13))
	}
	if failed, err := s.Write(t.Context(), ops); err != nil || len(failed) > 0 {
		t.Fatalf("write: failed %v, err %v", failed, err)
	}
	before := f.Refreshes.Load()
	deleted, errs := s.DeleteOlderEach(t.Context(), syncs[:4], nil)
	if got := f.Refreshes.Load() - before; got != 2 {
		t.Errorf("%d refreshes for 4 markers, want 2", got)
	}
	for i := range 4 {
		cluster := fmt.Sprintf("member%d", i)
		if errs[i] != nil || deleted[i] != 1 {
			t.Errorf("SYNC of %s: deleted %d, %v; want 1", cluster, deleted[i], errs[i])
		}
		for uid, want := range map[string]string{"a": "2/10", "b": "2/13", "c": "deleted"} {
			if got := f.Engine.State(testIndex, store.DocID(cluster, uid)); got != want {
				t.Errorf("%s/%s: %s, want %s", cluster, uid, got, want)
			}
		}
	}
	if got := f.Engine.State(testIndex, store.DocID("member4", "c")); got != "1/12" {
		t.Errorf("member4/c, of no marker in the batch: %s, want 1/12", got)
	}
}

// newEngineStore is a Store over an osstoretest server (an engine that versions documents as
// OpenSearch does), closed with the test.
func newEngineStore(t *testing.T) (*osstoretest.Server, *Store) {
	t.Helper()
	f := osstoretest.New()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	s, err := New(Options{Addresses: []string{srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return f, s
}
