package indexer

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/store"
)

func ev(typ envelope.Type, ns string, epoch int64, rv string) *envelope.Event {
	e := &envelope.Event{Type: typ, Cluster: "m1", Version: "v1", Resource: "pods", Kind: "Pod", Namespace: ns, Epoch: epoch}
	if typ == envelope.Sync {
		e.ListResourceVersion = rv
	} else {
		e.ResourceVersion, e.Name, e.UID = rv, "p", "u"
	}
	return e
}

// wmOf is the pair's watermark as it would be stored now.
func wmOf(w *watermarks) store.Watermark {
	return w.pairs[store.Pair{Cluster: "m1", Group: "", Resource: "pods"}].watermark()
}

// TestWatermarkLifecycle follows one pair through its first list, watch events, refreshes, a re-list
// and a rebuilt member: the watermark claims only what is written and refreshed, and holds still
// while a list is in progress.
func TestWatermarkLifecycle(t *testing.T) {
	w := newWatermarks()
	w.load(store.Pair{Cluster: "m1", Group: "", Resource: "pods"}, nil)
	step := func(name string, wantRV int64, wantListing bool) {
		t.Helper()
		got := wmOf(w)
		if got.ResourceVersion != wantRV || got.Listing != wantListing {
			t.Errorf("%s: got rv %d listing %v, want rv %d listing %v", name, got.ResourceVersion, got.Listing, wantRV, wantListing)
		}
	}
	step("never listed", 0, true)

	w.written(ev(envelope.Added, "", 100, "5"), 0)
	w.written(ev(envelope.Added, "", 100, "3"), 0)
	step("first list in progress", 0, true)

	w.synced(ev(envelope.Sync, "", 100, "10"), 0)
	step("list done: its resourceVersion is written and searchable", 10, false)
	if !w.pairs[store.Pair{Cluster: "m1", Group: "", Resource: "pods"}].urgent {
		t.Error("a SYNC must be stored before its offset is committed")
	}

	w.written(ev(envelope.Modified, "", 100, "12"), 0)
	w.written(ev(envelope.Deleted, "", 100, "14"), 0)
	step("written, not refreshed", 10, false)
	if got := w.unrefreshed(); len(got) != 1 || got[0] != "Pod" {
		t.Errorf("unrefreshed: got %v, want [Pod]", got)
	}
	refreshAll(w, "Pod")
	step("refreshed", 14, false)
	if got := w.unrefreshed(); len(got) != 0 {
		t.Errorf("unrefreshed after refresh: %v", got)
	}

	w.written(ev(envelope.Modified, "", 90, "99"), 0)
	step("an older epoch's event is a replay", 14, false)

	w.written(ev(envelope.Added, "", 200, "20"), 0)
	w.written(ev(envelope.Added, "", 200, "16"), 0)
	refreshAll(w, "Pod")
	step("re-list in progress: the watermark does not move", 14, true)

	w.synced(ev(envelope.Sync, "", 100, "11"), 0)
	step("a replayed older SYNC changes nothing", 14, true)

	w.synced(ev(envelope.Sync, "", 200, "25"), 0)
	step("re-list done", 25, false)

	w.written(ev(envelope.Added, "", 300, "4"), 0)
	w.synced(ev(envelope.Sync, "", 300, "6"), 0)
	step("rebuilt member: its own, lower resourceVersions", 6, false)
	ceiling := func(name string, want int64) {
		t.Helper()
		if got := wmOf(w).Scopes[0].Ceiling; got != want {
			t.Errorf("%s: ceiling %d, want %d", name, got, want)
		}
	}
	ceiling("the old numbering's highest position is kept", 25)
	w.written(ev(envelope.Modified, "", 300, "24"), 0)
	refreshAll(w, "Pod")
	ceiling("below the old numbering's highest", 25)
	w.written(ev(envelope.Modified, "", 300, "26"), 0)
	refreshAll(w, "Pod")
	ceiling("the new numbering passed the old", 0)
	step("past the old numbering", 26, false)

	w.written(ev(envelope.Added, "", 400, "x"), 0)
	w.synced(ev(envelope.Sync, "", 400, "not-a-number"), 0)
	step("resourceVersions that are not integers say nothing", 0, false)
}

// TestWatermarkScopes: a pair collected per namespace has a scope per namespace, each with its own
// list and watch; the pair's watermark is their minimum, and listing while any lists.
func TestWatermarkScopes(t *testing.T) {
	w := newWatermarks()
	w.load(store.Pair{Cluster: "m1", Group: "", Resource: "pods"}, nil)
	w.written(ev(envelope.Added, "a", 100, "5"), 0)
	w.written(ev(envelope.Added, "b", 101, "6"), 0)
	w.synced(ev(envelope.Sync, "a", 100, "50"), 0)
	if got := wmOf(w); !got.Listing || got.ResourceVersion != 0 {
		t.Errorf("scope b never listed, so nothing of the pair is complete: got %+v", got)
	}
	w.synced(ev(envelope.Sync, "b", 101, "40"), 0)
	w.written(ev(envelope.Modified, "a", 100, "70"), 0)
	refreshAll(w, "Pod")
	if got := wmOf(w); got.Listing || got.ResourceVersion != 40 || got.Epoch != 101 || len(got.Scopes) != 2 {
		t.Errorf("got %+v, want rv 40 (b's), epoch 101", got)
	}
	w.written(ev(envelope.Modified, "b", 101, "80"), 0)
	refreshAll(w, "Pod")
	if got := wmOf(w); got.ResourceVersion != 70 {
		t.Errorf("got rv %d, want 70 (a's)", got.ResourceVersion)
	}

	// A PURGE of one namespace leaves the other scope.
	gone := w.purged(&envelope.Event{Type: envelope.Purge, Cluster: "m1", Kind: "Pod", Namespace: "a"})
	if len(gone) != 0 || wmOf(w).ResourceVersion != 80 {
		t.Errorf("after purging a: gone %v, watermark %+v", gone, wmOf(w))
	}
	gone = w.purged(&envelope.Event{Type: envelope.Purge, Cluster: "m1", Kind: "Pod"})
	if len(gone) != 1 || gone[0] != (store.Pair{Cluster: "m1", Group: "", Resource: "pods"}) || len(w.pairs) != 0 {
		t.Errorf("after purging all: gone %v, pairs %v", gone, w.pairs)
	}
}

// TestWatermarkProvisionalScopes: before the first SYNC, the scopes are guessed from the events'
// namespaces; a cluster-wide SYNC replaces the guesses.
func TestWatermarkProvisionalScopes(t *testing.T) {
	w := newWatermarks()
	w.load(store.Pair{Cluster: "m1", Group: "", Resource: "pods"}, nil)
	w.written(ev(envelope.Added, "a", 100, "5"), 0)
	w.written(ev(envelope.Added, "b", 100, "6"), 0)
	w.synced(ev(envelope.Sync, "", 100, "9"), 0)
	got := wmOf(w)
	if len(got.Scopes) != 1 || got.Scopes[0].Namespace != "" || got.Listing || got.ResourceVersion != 9 {
		t.Errorf("got %+v, want the one cluster-wide scope at 9", got)
	}
	w.written(ev(envelope.Modified, "c", 100, "12"), 0)
	refreshAll(w, "Pod")
	if got := wmOf(w); got.ResourceVersion != 12 || len(got.Scopes) != 1 {
		t.Errorf("events of any namespace belong to the cluster-wide scope: got %+v", got)
	}
}

// TestWatermarkStoredRoundTrip: what is stored loads back to the same state.
func TestWatermarkStoredRoundTrip(t *testing.T) {
	w := newWatermarks()
	w.now = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	w.load(store.Pair{Cluster: "m1", Group: "", Resource: "pods"}, nil)
	w.synced(ev(envelope.Sync, "a", 100, "50"), 0)
	w.written(ev(envelope.Added, "b", 101, "6"), 0)
	ws := w.toStore(true)
	if len(ws) != 1 {
		t.Fatalf("toStore: %v", ws)
	}
	w.stored(ws)
	if got := w.toStore(false); len(got) != 0 {
		t.Errorf("stored watermarks are stored again: %v", got)
	}

	// Through JSON, as a backend stores and loads it (osstore pins its document).
	doc, err := json.Marshal(ws[0])
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"cluster":"m1","group":"","resource":"pods","kind":"Pod","resourceVersion":0,"epoch":100,"listing":true,"updatedAt":"2026-01-02T03:04:05Z",` +
		`"scopes":[{"namespace":"a","resourceVersion":50,"epoch":100,"listing":false,"synced":true},{"namespace":"b","resourceVersion":0,"epoch":0,"listing":true,"synced":false}]}`
	if string(doc) != want {
		t.Errorf("watermark to store:\ngot  %s\nwant %s", doc, want)
	}
	var stored store.Watermark
	if err := json.Unmarshal(doc, &stored); err != nil {
		t.Fatal(err)
	}
	w2 := newWatermarks()
	w2.load(store.Pair{Cluster: "m1", Group: "", Resource: "pods"}, &stored)
	w2.written(ev(envelope.Modified, "a", 100, "60"), 0)
	refreshAll(w2, "Pod")
	got := w2.pairs[store.Pair{Cluster: "m1", Group: "", Resource: "pods"}].watermark()
	if got.ResourceVersion != 0 || !got.Listing {
		t.Errorf("after reload: %+v, want 0 and listing while b never listed", got)
	}
	a, _ := json.Marshal(got.Scopes[0])
	if string(a) != `{"namespace":"a","resourceVersion":60,"epoch":100,"listing":false,"synced":true}` {
		t.Errorf("scope a after reload and a watch event: %s", a)
	}
}

func TestWatermarkForgetPartition(t *testing.T) {
	w := newWatermarks()
	w.written(ev(envelope.Added, "", 1, "1"), 3)
	other := ev(envelope.Added, "", 1, "1")
	other.Resource = "services"
	w.written(other, 4)
	w.forgetPartition(3)
	if missing := w.missing([]store.Pair{{Cluster: "m1", Group: "", Resource: "pods"}, {Cluster: "m1", Group: "", Resource: "services"}}); len(missing) != 1 || missing[0].Resource != "pods" {
		t.Errorf("missing after forgetting partition 3: %v", missing)
	}
}

// TestWatermarkRefreshedUpTo: a refresh that ran beside the writes moves a scope only as far as what
// was written when it started; a scope a SYNC moved meanwhile stays as the SYNC left it, and one
// that began to list moves by the writes before its list only.
func TestWatermarkRefreshedUpTo(t *testing.T) {
	w := newWatermarks()
	w.load(store.Pair{Cluster: "m1", Group: "", Resource: "pods"}, nil)
	w.synced(ev(envelope.Sync, "", 100, "10"), 0)
	w.written(ev(envelope.Modified, "", 100, "12"), 0)
	marks := w.writtenOf(w.unrefreshed())
	w.written(ev(envelope.Modified, "", 100, "15"), 0) // while the refresh runs
	w.refreshedUpTo(marks)
	if got := wmOf(w).ResourceVersion; got != 12 {
		t.Errorf("after a refresh started at 12 with 15 written meanwhile: rv %d, want 12", got)
	}
	if got := w.unrefreshed(); len(got) != 1 {
		t.Errorf("the write made during the refresh is not searchable yet: unrefreshed %v, want [Pod]", got)
	}
	w.refreshedUpTo(w.writtenOf(w.unrefreshed()))
	if got := wmOf(w).ResourceVersion; got != 15 {
		t.Errorf("after the next refresh: rv %d, want 15", got)
	}

	// A re-list of a member that went back (its numbering restarted) while a refresh ran.
	w.written(ev(envelope.Modified, "", 100, "20"), 0)
	marks = w.writtenOf(w.unrefreshed())
	w.synced(ev(envelope.Sync, "", 200, "3"), 0)
	w.refreshedUpTo(marks)
	if got := wmOf(w).ResourceVersion; got != 3 {
		t.Errorf("a SYNC during the refresh: rv %d, want the SYNC's 3, not the earlier epoch's 20", got)
	}

	// A list started while a refresh ran: the write before it is searchable, the list's own objects
	// wait for its SYNC, also through the next refresh.
	w.written(ev(envelope.Modified, "", 200, "4"), 0)
	marks = w.writtenOf(w.unrefreshed())
	w.written(ev(envelope.Added, "", 300, "9"), 0)
	w.refreshedUpTo(marks)
	if got := wmOf(w); got.ResourceVersion != 4 || !got.Listing {
		t.Errorf("a list begun during the refresh: rv %d listing %v, want 4 and listing", got.ResourceVersion, got.Listing)
	}
	refreshAll(w, "Pod")
	if got := wmOf(w); got.ResourceVersion != 4 || !got.Listing {
		t.Errorf("the list's objects refreshed before its SYNC: rv %d listing %v, want 4 and listing", got.ResourceVersion, got.Listing)
	}
}

// refreshAll is a refresh of kinds with no write beside it: what the consumer's refresh does when
// nothing is written while it runs.
func refreshAll(w *watermarks, kinds ...string) {
	w.refreshedUpTo(w.writtenOf(kinds))
}

// TestWatermarkRefreshedUpToAfterPurge: a refresh that started before a PURGE (or before its
// partition was revoked) moves nothing of the pair tracked after it, even at the same epoch and
// with more written since: its marks are the old scope's, and the later write (30) is not
// refreshed.
func TestWatermarkRefreshedUpToAfterPurge(t *testing.T) {
	for _, c := range []struct {
		name string
		gone func(w *watermarks)
	}{
		{"purged", func(w *watermarks) { w.purged(ev(envelope.Purge, "", 100, "")) }},
		{"partition revoked", func(w *watermarks) { w.forgetPartition(0) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWatermarks()
			w.load(store.Pair{Cluster: "m1", Group: "", Resource: "pods"}, nil)
			w.synced(ev(envelope.Sync, "", 100, "10"), 0)
			w.written(ev(envelope.Modified, "", 100, "20"), 0)
			marks := w.writtenOf(w.unrefreshed())
			c.gone(w)
			// Tracked again, as stored before the refresh, and written beyond it.
			w.load(store.Pair{Cluster: "m1", Group: "", Resource: "pods"}, &store.Watermark{Cluster: "m1", Resource: "pods", Kind: "Pod",
				Epoch: 100, ResourceVersion: 10, Scopes: []store.WatermarkScope{{Epoch: 100, ResourceVersion: 10, Synced: true}}})
			w.written(ev(envelope.Modified, "", 100, "30"), 0)
			w.refreshedUpTo(marks)
			if got := wmOf(w); got.ResourceVersion != 10 {
				t.Errorf("rv %d after a refresh that began before the scope was tracked again: want 10", got.ResourceVersion)
			}
		})
	}
}

// TestWatermarkPosition: a pair's watermark carries the offset of the last event applied to it, a
// replay (a lower offset) never moves it back, and it loads back with the watermark.
func TestWatermarkPosition(t *testing.T) {
	w := newWatermarks()
	w.load(store.Pair{Cluster: "m1", Group: "", Resource: "pods"}, nil)
	for _, offset := range []int64{7, 12, 9} {
		e := ev(envelope.Added, "", 100, "5")
		w.written(e, 0)
		w.applied(e, 0, offset)
	}
	if got := wmOf(w).Position; got != 12 {
		t.Fatalf("position %d, want 12 (the highest applied)", got)
	}
	stored := wmOf(w)
	w2 := newWatermarks()
	w2.load(stored.Pair(), &stored)
	e := ev(envelope.Modified, "", 100, "6")
	w2.written(e, 0)
	w2.applied(e, 0, 10) // replayed from an older committed offset
	if got := w2.pairs[stored.Pair()].watermark().Position; got != 12 {
		t.Errorf("after a reload and a replay: position %d, want 12", got)
	}
}
