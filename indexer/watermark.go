package indexer

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/store"
)

// scopeState is the progress of one namespace scope.
type scopeState struct {
	store.WatermarkScope
	// written is the highest resourceVersion written of the scope's current epoch; it becomes
	// ResourceVersion once a refresh made it searchable.
	written int64
	// newest is the newest epoch of the scope's events seen in this process: an event of an older
	// epoch comes from a collector a newer list superseded (one still running through a rolling
	// update, say), and is not written (superseded).
	newest int64
}

type pairState struct {
	key       store.Pair
	kind      string
	scopes    map[string]*scopeState
	partition int
	position  int64 // the offset of the last event of the pair applied (store.Watermark.Position)
	dirty     bool  // changed since stored
	urgent    bool  // store before the offsets of the events that changed it are committed
	updatedAt time.Time
}

// watermarks tracks every pair seen in this process (DESIGN section 5). Events reach it only once
// they are written, in partition order. It is used by one goroutine.
type watermarks struct {
	pairs map[store.Pair]*pairState
	now   func() time.Time
}

func newWatermarks() *watermarks {
	return &watermarks{pairs: map[store.Pair]*pairState{}, now: time.Now}
}

// missing returns the keys not tracked yet, to be loaded from the state index.
func (w *watermarks) missing(keys []store.Pair) []store.Pair {
	var out []store.Pair
	for _, k := range keys {
		if _, ok := w.pairs[k]; !ok && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// load tracks a pair as stored (nil: never stored).
func (w *watermarks) load(k store.Pair, stored *store.Watermark) {
	p := &pairState{key: k, scopes: map[string]*scopeState{}}
	if stored != nil {
		p.kind, p.updatedAt, p.position = stored.Kind, stored.UpdatedAt, stored.Position
		for _, s := range stored.Scopes {
			p.scopes[s.Namespace] = &scopeState{WatermarkScope: s, written: s.ResourceVersion}
		}
	}
	w.pairs[k] = p
}

// forgetPartition drops the pairs of a partition another consumer may have moved on meanwhile; they
// are loaded again from the state index on their next event.
func (w *watermarks) forgetPartition(partition int) {
	maps.DeleteFunc(w.pairs, func(_ store.Pair, p *pairState) bool { return p.partition == partition })
}

// scope returns the scope an object event belongs to: the cluster-wide scope when there is one,
// else the object's namespace. Before its first SYNC a scope is provisional, named after the events'
// namespaces; the first SYNC tells which scopes exist.
func (p *pairState) scope(ns string) *scopeState {
	if s := p.scopes[""]; s != nil {
		return s
	}
	if s := p.scopes[ns]; s != nil {
		return s
	}
	s := &scopeState{WatermarkScope: store.WatermarkScope{Namespace: ns}}
	p.scopes[ns] = s
	return s
}

func (w *watermarks) pair(ev *envelope.Event, partition int) *pairState {
	k := ev.Pair()
	p := w.pairs[k]
	if p == nil {
		w.load(k, nil)
		p = w.pairs[k]
	}
	p.kind, p.partition = ev.Kind, partition
	return p
}

// superseded tells whether an object event belongs to an epoch older than one already seen for its
// scope, and notes its epoch otherwise. Such an event must not be written: OpenSearch's external
// versioning orders by resourceVersion alone, so an older epoch's higher resourceVersion would
// replace the newer epoch's state, while the newer list already holds what that event says or
// later. Call it in stream order, before the event is written.
func (w *watermarks) superseded(ev *envelope.Event, partition int) bool {
	s := w.pair(ev, partition).scope(ev.Namespace)
	if ev.Epoch < max(s.Epoch, s.newest) {
		return true
	}
	s.newest = ev.Epoch
	return false
}

// marked notes a SYNC marker's epoch for superseded, as synced will once the marker is applied: the
// events after it in the stream are judged against it before its garbage is collected (applyRun).
func (w *watermarks) marked(ev *envelope.Event, partition int) {
	s := w.pair(ev, partition).scope(ev.Namespace)
	s.newest = max(s.newest, ev.Epoch)
}

// written records an ADDED, MODIFIED or DELETED event that is written (or dead-lettered: it will
// never be, and must not hold the watermark back forever).
func (w *watermarks) written(ev *envelope.Event, partition int) {
	p := w.pair(ev, partition)
	s := p.scope(ev.Namespace)
	switch {
	case ev.Epoch > s.Epoch:
		// An object of a newer epoch than the scope's last SYNC: a list is in progress. Its objects
		// arrive in no resourceVersion order, so the watermark waits for the SYNC.
		if !s.Listing {
			s.Listing = true
			p.dirty = true
		}
	case ev.Epoch == s.Epoch && !s.Listing:
		if rv, ok := parseRV(ev.ResourceVersion); ok && rv > s.written {
			s.written = rv
		}
	}
	// An event of an older epoch is a replay: nothing moves.
}

// applied records the stream offset of an event of the pair whose effect on the watermarks is
// recorded (written or synced): what the pair's watermark accounts for, stored beside it.
func (w *watermarks) applied(ev *envelope.Event, partition int, offset int64) {
	p := w.pair(ev, partition)
	p.position = max(p.position, offset)
}

// synced records a SYNC marker whose garbage collection is done: everything of the scope written
// before it is searchable (the delete-by-query refreshed the index), up to the list's
// resourceVersion.
func (w *watermarks) synced(ev *envelope.Event, partition int) {
	p := w.pair(ev, partition)
	s := p.scopes[ev.Namespace]
	if s == nil {
		s = &scopeState{WatermarkScope: store.WatermarkScope{Namespace: ev.Namespace}}
		p.scopes[ev.Namespace] = s
	}
	if s.Synced && ev.Epoch <= s.Epoch {
		return // a replayed marker
	}
	rv, numbered := parseRV(ev.ListResourceVersion)
	if shown := max(s.written, s.ResourceVersion); numbered && s.Synced && rv < shown {
		s.Ceiling = max(s.Ceiling, shown) // the member went back: a new numbering starts at rv
	}
	s.Epoch, s.Listing, s.Synced = ev.Epoch, false, true
	s.written, s.ResourceVersion = rv, rv
	if ev.Namespace == "" {
		// A cluster-wide scope covers every namespace: provisional scopes were guesses.
		maps.DeleteFunc(p.scopes, func(ns string, sc *scopeState) bool { return ns != "" && !sc.Synced })
	}
	p.dirty, p.urgent = true, true
}

// purged removes what a PURGE marker removes: every scope of the pairs of (cluster, group, kind), or
// one namespace scope. It returns the pairs left without scope, whose documents go.
func (w *watermarks) purged(ev *envelope.Event) []store.Pair {
	var gone []store.Pair
	for k, p := range w.pairs {
		if k.Cluster != ev.Cluster || k.Group != ev.Group || p.kind != ev.Kind {
			continue
		}
		if ev.Namespace == "" {
			clear(p.scopes)
		} else {
			delete(p.scopes, ev.Namespace)
		}
		if len(p.scopes) == 0 {
			gone = append(gone, k)
			delete(w.pairs, k)
			continue
		}
		p.dirty, p.urgent = true, true
	}
	slices.SortFunc(gone, func(a, b store.Pair) int { return cmp.Compare(a.ID(), b.ID()) })
	return gone
}

// unrefreshed returns the kinds with writes not yet known to be searchable.
func (w *watermarks) unrefreshed() []string {
	var kinds []string
	for _, p := range w.pairs {
		for _, s := range p.scopes {
			if s.written != s.ResourceVersion && !slices.Contains(kinds, p.kind) {
				kinds = append(kinds, p.kind)
			}
		}
	}
	slices.Sort(kinds)
	return kinds
}

// writtenMarks is what was written of each scope of some kinds at one moment (writtenOf), for a
// refresh that started then.
type writtenMarks []writtenMark

type writtenMark struct {
	pair    *pairState
	scope   *scopeState
	epoch   int64
	written int64
}

// writtenOf returns what is written now of every scope of kinds with writes not yet searchable.
func (w *watermarks) writtenOf(kinds []string) writtenMarks {
	var out writtenMarks
	for _, p := range w.pairs {
		if !slices.Contains(kinds, p.kind) {
			continue
		}
		for _, s := range p.scopes {
			if s.written != s.ResourceVersion {
				out = append(out, writtenMark{pair: p, scope: s, epoch: s.Epoch, written: s.written})
			}
		}
	}
	return out
}

// refreshedUpTo records that the writes of marks are searchable: a refresh that started when they
// were taken is done. A scope moved since only as far as then: a later write waits for the next
// refresh, and a scope whose epoch changed (a SYNC set its watermark itself) is left as it is. A
// scope that began to list keeps its written mark (written does not move while a list runs), so
// the writes before the list move it as they would have. A pair or scope removed meanwhile (a
// PURGE) is no longer reached from w, so moving it changes nothing.
func (w *watermarks) refreshedUpTo(marks writtenMarks) {
	for _, m := range marks {
		s := m.scope
		if s.Epoch != m.epoch || m.written <= s.ResourceVersion || m.written > s.written {
			continue
		}
		s.ResourceVersion = m.written
		m.pair.dirty = true
		if s.Ceiling > 0 && s.ResourceVersion > s.Ceiling {
			s.Ceiling = 0 // the new numbering passed the old: every old position is below it
		}
	}
}

// toStore returns the watermarks that changed since stored (only the urgent ones if urgentOnly).
func (w *watermarks) toStore(urgentOnly bool) []store.Watermark {
	var out []store.Watermark
	now := w.now().UTC()
	for _, p := range w.pairs {
		if !p.dirty || (urgentOnly && !p.urgent) {
			continue
		}
		p.updatedAt = now
		out = append(out, p.watermark())
	}
	slices.SortFunc(out, func(a, b store.Watermark) int { return cmp.Compare(watermarkKey(a), watermarkKey(b)) })
	return out
}

// stored records that the watermarks were stored.
func (w *watermarks) stored(ws []store.Watermark) {
	for _, wm := range ws {
		if p := w.pairs[wm.Pair()]; p != nil && p.updatedAt.Equal(wm.UpdatedAt) {
			p.dirty, p.urgent = false, false
		}
	}
}

// watermark summarises the scopes: the lowest resourceVersion of them all (a scope that never
// synced has none: 0), listing while any scope lists or never synced.
func (p *pairState) watermark() store.Watermark {
	wm := store.Watermark{Cluster: p.key.Cluster, Group: p.key.Group, Resource: p.key.Resource, Kind: p.kind, UpdatedAt: p.updatedAt,
		Listing: len(p.scopes) == 0, Position: p.position}
	for i, ns := range slices.Sorted(maps.Keys(p.scopes)) {
		s := p.scopes[ns]
		wm.Scopes = append(wm.Scopes, s.WatermarkScope)
		if !s.Synced || s.Listing {
			wm.Listing = true
		}
		if s.Synced {
			wm.Epoch = max(wm.Epoch, s.Epoch)
		}
		if i == 0 || s.ResourceVersion < wm.ResourceVersion {
			wm.ResourceVersion = s.ResourceVersion
		}
	}
	return wm
}

func watermarkKey(w store.Watermark) string { return w.Pair().ID() }

// parseRV reads a resourceVersion as the integer it is for kube-apiservers; some aggregated APIs use
// other strings, which cannot be compared.
func parseRV(s string) (int64, bool) {
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil && v >= 0
}
