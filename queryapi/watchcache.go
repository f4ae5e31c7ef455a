package queryapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/tidwall/gjson"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/lifecycle"
	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/internal/stream"
)

// The watch cache feeds the facade's WATCH (DESIGN section 5). Every query API replica reads every
// partition of the event stream itself, no consumer group, into a bounded window of events, and
// keeps the identity of every cached object (uid → namespace, name, resourceVersion, epoch, a
// metadata-only copy), which turns the stream into Kubernetes watch events: a collector's re-list
// repeats unchanged objects (dropped here), and its SYNC marker says which objects vanished (sent as
// DELETED here). A watch resumes from any resourceVersion the window still covers; from an older
// one it gets 410 Gone and re-lists.
//
// Start: the window must hold every event a LIST served from the index may not show yet, so
// reading starts a little before the indexers' committed offsets (what they have not written yet
// is after them), and object identities are seeded from the index. A watch may resume from a
// pair's resourceVersion only at or above its watermark at that start (the pair's floor, raised as
// events leave the window): older positions may need events from before the window.
//
// A member whose resourceVersions go backwards starts its pairs over in a new numbering, and
// clients holding positions of the old one get 410 (wentback.go).

// cacheEvent is one watch event of one object.
type cacheEvent struct {
	seq  uint64
	typ  watch.EventType
	pair store.Pair
	ns   string
	uid  string
	rv   int64
	// obj is the object as a LIST returns it; for a DELETED the cache made up (a SYNC or PURGE),
	// its metadata-only copy.
	obj []byte
	// prevLabels are the object's labels before the event (a JSON object, "" if it was not cached),
	// so a resumed watch can tell an object that left its label selector; prevSeq is the seq of
	// the object's previous event (its previous state, while the window holds it), 0 if none.
	prevLabels string
	prevSeq    uint64
	// stable is the pair's position once this event is applied: a client that has seen it may
	// resume from there and miss nothing. During a re-list it stays where the list began: a
	// re-list publishes changed objects in key order, not resourceVersion order, so a resume from
	// the newest one seen would skip older changes still to come.
	stable int64
}

// relisting tells an event of a re-list in progress: its resourceVersion is above the position a
// client may resume from, and later events of the same list may carry lower ones.
func (e *cacheEvent) relisting() bool { return e.rv > e.stable }

func (e *cacheEvent) size() int64 { return int64(len(e.obj) + len(e.prevLabels) + 160) }

// objState is what the cache keeps of every cached object.
type objState struct {
	ns, name string
	rv       int64
	epoch    int64
	labels   string // JSON, "{}" when it has none
	meta     []byte // apiVersion, kind and the identifying metadata, for a DELETED made up here
	lastSeq  uint64 // the seq of its last event, 0 for one seeded from the index
}

// watchCache is the window and the identities. Its methods are safe for concurrent use.
type watchCache struct {
	log       *slog.Logger
	maxEvents int
	maxBytes  int64

	mu sync.Mutex
	// win holds the newest events of every pair, within a budget shared fairly (window.go).
	win     *eventWindow
	nextSeq uint64
	objects map[store.Pair]map[string]*objState
	kinds   map[store.Pair]string
	head    map[store.Pair]int64 // the newest resourceVersion applied, per pair
	floor   map[store.Pair]int64 // below this a watch may have missed events
	// stable is, per pair, the position a client may resume from (see cacheEvent.stable);
	// synced the epoch of the pair's last completed list: an ADDED of a newer epoch is a re-list
	// in progress.
	stable map[store.Pair]int64
	synced map[store.Pair]int64
	// relisting is, per pair, the seq of the window's first event of a re-list in progress per
	// resourceVersion (see cacheEvent.relisting): where start places a watch resumed from it.
	relisting map[store.Pair]map[int64]uint64
	// truncated are the pairs whose list was in progress when reading began (the index's
	// watermark said so): the window may lack the list's first events, so until its SYNC a position
	// inside the list that start cannot place is 410, and at the SYNC the floor rises to it.
	truncated map[store.Pair]bool
	// scopes are, per pair, its namespace scopes as the collectors list them; renumbered the pairs
	// whose member went back while positions of the old numbering may be held; gens counts a pair's
	// numberings, resets the times it went back (a watch open at one ends with 410). See
	// wentback.go.
	scopes     map[store.Pair]map[string]*scopeState
	renumbered map[store.Pair]*renumbering
	gens       map[store.Pair]uint64
	resets     map[store.Pair]uint64
	// replaying is true until the events written before the start are read: events then are not
	// deduplicated against the seeded identities (see apply).
	replaying bool
	ready     bool
	// generation counts restarts of the cache: a watch of an earlier generation ends with 410.
	generation uint64
	changed    chan struct{} // closed and replaced on every change, for watches being placed
	// subs wake open watches, per pair they read: an event of one pair wakes only the watches
	// reading it (not every watch of the fleet at every event).
	subs map[store.Pair]map[chan struct{}]struct{}
}

func newWatchCache(log *slog.Logger, maxEvents int, maxBytes int64) *watchCache {
	// Sequence numbers start at 1: 0 says "no event" in prevSeq and lastSeq.
	c := &watchCache{log: log, maxEvents: maxEvents, maxBytes: maxBytes, changed: make(chan struct{}), nextSeq: 1,
		subs: map[store.Pair]map[chan struct{}]struct{}{}}
	c.resetLocked()
	return c
}

func (c *watchCache) resetLocked() {
	c.win = newEventWindow(c.maxEvents, c.maxBytes)
	c.objects = map[store.Pair]map[string]*objState{}
	c.kinds = map[store.Pair]string{}
	c.head = map[store.Pair]int64{}
	c.floor = map[store.Pair]int64{}
	c.stable = map[store.Pair]int64{}
	c.synced = map[store.Pair]int64{}
	c.relisting = map[store.Pair]map[int64]uint64{}
	c.truncated = map[store.Pair]bool{}
	c.scopes = map[store.Pair]map[string]*scopeState{}
	c.renumbered = map[store.Pair]*renumbering{}
	c.gens = map[store.Pair]uint64{}
	c.resets = map[store.Pair]uint64{}
	c.ready, c.replaying = false, true
	c.generation++
	c.notifyLocked()
	for _, subs := range c.subs {
		wake(subs) // their watches end with 410
	}
}

func (c *watchCache) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// wake tells the watches subscribed that there is something to read, without blocking: each
// channel holds one wakeup, and a watch reads everything new when it wakes.
func wake(subs map[chan struct{}]struct{}) {
	for ch := range subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// cacheSource is what the cache reads besides the stream: the index.
type cacheSource interface {
	searcher
	Watermarks(ctx context.Context) ([]store.Watermark, error)
}

// run fills the cache until ctx is done, starting over (every watch ends with 410) when the stream
// cannot be followed from where it was.
func (c *watchCache) run(ctx context.Context, kafka stream.Broker, topic, indexerGroup string, src cacheSource, cat *catalog) error {
	bo := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Cap: 5 * time.Second, Steps: 1 << 30}
	for {
		err := c.fill(ctx, kafka, topic, indexerGroup, src, cat.resourceOf, cat.isSynced)
		if ctx.Err() != nil {
			return nil
		}
		delay := bo.Step()
		c.log.Warn("watch cache lost the event stream; starting over, open watches end with 410", "topic", topic,
			"retryIn", delay.Round(time.Millisecond), "err", err)
		c.mu.Lock()
		c.resetLocked()
		c.mu.Unlock()
		if err := lifecycle.Sleep(ctx, delay); err != nil {
			return nil
		}
	}
}

// replaySlack is how far before the indexers' committed offsets reading starts, per partition: a
// batch they wrote and committed may not be searchable yet (refreshes come every watermark
// interval), and a LIST does not show it.
const replaySlack = 5000

func (c *watchCache) fill(ctx context.Context, kafka stream.Broker, topic, indexerGroup string, src cacheSource,
	resourceOf func(cluster, group, kind string) string, catalogSynced func() bool) error {
	spans, err := kafka.Spans(ctx, topic)
	if err != nil {
		return err
	}
	committed, err := kafka.CommittedOffsets(ctx, indexerGroup, topic)
	if err != nil {
		return err
	}
	// Reading starts before everything a LIST served from the index may not show: the indexers'
	// committed offset (the whole partition when they have committed nothing) less the slack.
	// However far back that is, every event is read: the window keeps the newest and raises the
	// floors of the pairs whose events it drops, so a position the index shows but the window has
	// lost is answered 410, never served with a gap. An indexer far behind makes the start slower,
	// not wrong.
	from := map[int]int64{}
	behind := map[int]int64{}
	var toRead int64
	var uncommitted []int
	for p, sp := range spans {
		at := sp.First
		if co, ok := committed[p]; ok && co >= 0 {
			at = max(sp.First, min(co, sp.End)-replaySlack)
		} else if sp.End > sp.First {
			uncommitted = append(uncommitted, p)
		}
		from[p] = at
		if sp.End > at {
			behind[p] = sp.End
			toRead += sp.End - at
		}
	}
	if len(uncommitted) > 0 {
		// Normal on a fresh install (and in the standalone mode's first start); a wrong group
		// makes every start replay the whole topic, which is slow, not wrong.
		c.log.Info("the indexers have committed nothing on these partitions yet: the watch cache reads them from their start (if this repeats at every start, check that --indexer-group is the indexers' --group)",
			"indexerGroup", indexerGroup, "topic", topic, "partitions", uncommitted)
	}
	wms, err := src.Watermarks(ctx)
	if err != nil {
		return fmt.Errorf("watermarks: %w", err)
	}
	c.mu.Lock()
	c.seedWatermarksLocked(wms)
	c.mu.Unlock()
	// Seeding maps each stored object to its resource through the catalog: it must be read first.
	for !catalogSynced() {
		if err := lifecycle.Sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	if err := c.seed(ctx, src, resourceOf); err != nil {
		return fmt.Errorf("seed from the index: %w", err)
	}
	c.mu.Lock()
	if len(behind) == 0 {
		c.replaying, c.ready = false, true
		c.notifyLocked()
	}
	c.mu.Unlock()
	c.log.Info("watch cache reading the event stream", "topic", topic, "partitions", len(spans), "replaying", len(behind), "eventsToReplay", toRead)
	f, err := kafka.NewFollower(stream.FollowerConfig{Topic: topic, From: from})
	if err != nil {
		return err
	}
	return f.Run(ctx, func(_ context.Context, m stream.Message) error {
		ev, err := envelope.Unmarshal(m.Value)
		if err == nil {
			c.apply(ev)
		}
		if end, ok := behind[m.Partition]; ok && m.Offset+1 >= end {
			delete(behind, m.Partition)
			if len(behind) == 0 {
				c.mu.Lock()
				c.replaying, c.ready = false, true
				c.notifyLocked()
				c.mu.Unlock()
				c.log.Info("watch cache caught up with the event stream")
			}
		}
		return nil
	})
}

// seedWatermarksLocked starts every pair at its watermark.
func (c *watchCache) seedWatermarksLocked(wms []store.Watermark) {
	for _, w := range wms {
		// A pair without events in the window is still at its watermark: a LIST says so, and a
		// watch from there must start, not wait for an event.
		p := w.Pair()
		c.floor[p], c.head[p], c.stable[p] = w.ResourceVersion, w.ResourceVersion, w.ResourceVersion
		if !w.Listing {
			c.synced[p] = w.Epoch
		} else {
			c.truncated[p] = true
		}
		for _, s := range w.Scopes {
			if s.Synced {
				c.scopesOf(p)[s.Namespace] = &scopeState{epoch: s.Epoch, newest: s.Epoch, seen: s.ResourceVersion}
			}
		}
		c.seedRenumberingLocked(w)
	}
}

// seed reads the identity of every cached object from the index.
func (c *watchCache) seed(ctx context.Context, src searcher, resourceOf func(cluster, group, kind string) string) error {
	q := &query.Query{Limit: query.MaxLimit, MetadataOnly: true, Now: time.Now(), Drain: true}
	n := 0
	for {
		res, err := src.Search(ctx, q)
		if err != nil {
			return err
		}
		c.mu.Lock()
		for i, it := range res.Items {
			gv, kind := gjson.GetBytes(it, "apiVersion").Str, gjson.GetBytes(it, "kind").Str
			group, _ := splitGroupVersion(gv)
			cluster := clusterOf(it)
			resource := resourceOf(cluster, group, kind)
			if resource == "" {
				continue // not in the catalog (yet): its events will say
			}
			pair := store.Pair{Cluster: cluster, Group: group, Resource: resource}
			var epoch int64
			if i < len(res.Epochs) {
				epoch = res.Epochs[i]
			}
			st := stateOf(it, epoch)
			if st.name == "" {
				continue
			}
			c.objectsOf(pair)[gjson.GetBytes(it, "metadata.uid").Str] = st
			c.kinds[pair] = kind
			n++
		}
		c.mu.Unlock()
		if res.Continue == "" {
			break
		}
		q.Continue = res.Continue
	}
	c.log.Info("watch cache seeded from the index", "objects", n)
	return nil
}

func splitGroupVersion(gv string) (group, version string) {
	for i := len(gv) - 1; i >= 0; i-- {
		if gv[i] == '/' {
			return gv[:i], gv[i+1:]
		}
	}
	return "", gv
}

// stateOf reads the identity of an object as stored.
func stateOf(obj []byte, epoch int64) *objState {
	m := gjson.GetManyBytes(obj, "apiVersion", "kind", "metadata.name", "metadata.namespace", "metadata.uid",
		"metadata.resourceVersion", "metadata.labels", "metadata.creationTimestamp", "metadata.annotations."+gjson.Escape(document.CachedFromClusterAnnotation))
	rv, _ := strconv.ParseInt(m[5].Str, 10, 64)
	labels := m[6].Raw
	if !m[6].IsObject() {
		labels = "{}"
	}
	st := &objState{ns: m[3].Str, name: m[2].Str, rv: rv, epoch: epoch, labels: labels}
	meta := []byte(`{"apiVersion":` + m[0].Raw + `,"kind":` + m[1].Raw + `,"metadata":{"name":` + m[2].Raw)
	if m[3].Exists() {
		meta = append(meta, `,"namespace":`+m[3].Raw...)
	}
	meta = append(meta, `,"uid":`+m[4].Raw+`,"resourceVersion":`+m[5].Raw...)
	if m[6].Exists() {
		meta = append(meta, `,"labels":`+m[6].Raw...)
	}
	if m[7].Exists() {
		meta = append(meta, `,"creationTimestamp":`+m[7].Raw...)
	}
	meta = append(meta, `,"annotations":{"`+document.CachedFromClusterAnnotation+`":`+m[8].Raw+`}}}`...)
	st.meta = meta
	return st
}

// deletedAt is the object of a DELETED the cache makes up: the metadata-only copy at the deletion's
// resourceVersion, as kube-apiserver sends a deletion (a one-cluster view shows it as it is, and a
// client resuming from it must not go back to the object's last change).
func deletedAt(meta []byte, rv int64) []byte {
	old := gjson.GetBytes(meta, "metadata.resourceVersion")
	if old.Index == 0 || rv == 0 {
		return meta // no deletion resourceVersion known: the last one the object had
	}
	return splice(meta, []edit{{old.Index, len(old.Raw), strconv.Quote(strconv.FormatInt(rv, 10))}})
}

func (c *watchCache) objectsOf(p store.Pair) map[string]*objState {
	m := c.objects[p]
	if m == nil {
		m = map[string]*objState{}
		c.objects[p] = m
	}
	return m
}

// apply turns one event of the stream into watch events.
func (c *watchCache) apply(ev *envelope.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pair := ev.Pair()
	rv, _ := strconv.ParseInt(ev.ResourceVersion, 10, 64)
	switch ev.Type {
	case envelope.Added, envelope.Modified, envelope.Deleted:
		if c.oldNumberingLocked(pair, ev.Namespace, ev.Epoch, rv) {
			return
		}
	}
	switch ev.Type {
	case envelope.Added, envelope.Modified:
		obj, err := document.Object(ev)
		if err != nil {
			return // the indexer dead-letters it: it never reaches the index either
		}
		objs := c.objectsOf(pair)
		st := objs[ev.UID]
		c.kinds[pair] = ev.Kind
		if st != nil && !c.replaying {
			if st.rv == rv && rv != 0 {
				st.epoch = max(st.epoch, ev.Epoch) // a re-list repeating an unchanged object
				return
			}
			if rv < st.rv && ev.Epoch <= st.epoch {
				return // older than what is cached: a replay
			}
		}
		if ev.Epoch > c.synced[pair] {
			// A list of a newer epoch is in progress: positions wait for its SYNC.
		} else {
			c.stable[pair] = max(c.stable[pair], rv)
		}
		e := &cacheEvent{typ: watch.Added, pair: pair, ns: ev.Namespace, uid: ev.UID, rv: rv, obj: obj}
		if st != nil {
			e.typ, e.prevLabels, e.prevSeq = watch.Modified, st.labels, st.lastSeq
		}
		next := stateOf(obj, ev.Epoch)
		c.appendLocked(e)
		if st == nil || rv >= st.rv || ev.Epoch > st.epoch {
			next.lastSeq = e.seq
			objs[ev.UID] = next
		}
	case envelope.Deleted:
		objs := c.objectsOf(pair)
		st := objs[ev.UID]
		delete(objs, ev.UID)
		obj, err := document.Object(ev)
		if err != nil {
			if st == nil {
				return
			}
			obj = deletedAt(st.meta, rv)
		}
		if ev.Epoch <= c.synced[pair] {
			c.stable[pair] = max(c.stable[pair], rv)
		}
		e := &cacheEvent{typ: watch.Deleted, pair: pair, ns: ev.Namespace, uid: ev.UID, rv: rv, obj: obj}
		if st != nil {
			e.prevLabels, e.prevSeq = st.labels, st.lastSeq
		}
		c.appendLocked(e)
	case envelope.Sync:
		// Every object of the scope the list did not repeat is gone from the member.
		listRV, _ := strconv.ParseInt(ev.ListResourceVersion, 10, 64)
		if c.syncScopeLocked(pair, ev.Namespace, ev.Epoch, listRV) {
			return
		}
		rv = max(listRV, c.head[pair])
		c.synced[pair] = max(c.synced[pair], ev.Epoch)
		c.stable[pair] = max(c.stable[pair], rv)
		if c.truncated[pair] {
			// Positions inside this list may need events read before the window began.
			delete(c.truncated, pair)
			c.floor[pair] = rv
		} else {
			// The SYNC's position is where LISTs and bookmarks put clients: it stays resumable
			// even when an evicted event of the list carried the same resourceVersion (the floor
			// above it, see appendLocked), else those clients would re-list and get it again,
			// forever. A client that got exactly that event mid-list is the one left ambiguous.
			c.floor[pair] = min(c.floor[pair], rv)
		}
		if r := c.renumbered[pair]; r != nil {
			r.issue(rv) // where LISTs and bookmarks put clients, whether or not an event carries it
		}
		wake(c.subs[pair]) // the pair's position moved, even when nothing vanished
		for uid, st := range c.objects[pair] {
			if st.epoch < ev.Epoch && (ev.Namespace == "" || st.ns == ev.Namespace) {
				delete(c.objects[pair], uid)
				c.appendLocked(&cacheEvent{typ: watch.Deleted, pair: pair, ns: st.ns, uid: uid, rv: rv, obj: deletedAt(st.meta, rv),
					prevLabels: st.labels, prevSeq: st.lastSeq})
			}
		}
	case envelope.Purge:
		for p, objs := range c.objects {
			if p.Cluster != ev.Cluster || p.Group != ev.Group || c.kinds[p] != ev.Kind {
				continue
			}
			// The selection is gone: its deletions come after everything seen of it. Objects of
			// a newer epoch were listed after the purge (a replay of an old PURGE must not delete
			// what the index shows now).
			var gone []string
			for uid, st := range objs {
				if (ev.Namespace == "" || st.ns == ev.Namespace) && st.epoch < ev.Epoch {
					gone = append(gone, uid)
				}
			}
			if len(gone) == 0 {
				continue
			}
			c.head[p]++
			c.stable[p] = c.head[p]
			for _, uid := range gone {
				st := objs[uid]
				delete(objs, uid)
				c.appendLocked(&cacheEvent{typ: watch.Deleted, pair: p, ns: st.ns, uid: uid, rv: c.head[p], obj: deletedAt(st.meta, c.head[p]),
					prevLabels: st.labels, prevSeq: st.lastSeq})
			}
		}
	}
	if rv > c.head[pair] {
		c.head[pair] = rv
	}
	c.notifyLocked()
}

func (c *watchCache) appendLocked(e *cacheEvent) {
	e.seq = c.nextSeq
	e.stable = c.stable[e.pair]
	if r := c.renumbered[e.pair]; r != nil {
		r.issue(e.rv)
		r.issue(e.stable)
	}
	c.nextSeq++
	c.win.add(e)
	wake(c.subs[e.pair])
	if e.relisting() {
		m := c.relisting[e.pair]
		if m == nil {
			m = map[int64]uint64{}
			c.relisting[e.pair] = m
		}
		if _, ok := m[e.rv]; !ok {
			m[e.rv] = e.seq
		}
	}
	for old := c.win.evictOne(); old != nil; old = c.win.evictOne() {
		c.evictLocked(old)
	}
}

// evictLocked raises the floor of the pair of an event that left the window.
func (c *watchCache) evictLocked(old *cacheEvent) {
	if r := c.renumbered[old.pair]; r != nil && old.seq < r.since {
		return // of the numbering the member left: says nothing of positions now
	}
	floor := old.rv
	if old.relisting() {
		// A client at this event's resourceVersion may lack later events of its list with
		// lower ones, and start can no longer place it after the event: that position is
		// gone too — unless it is also the pair's position after the list's SYNC (see apply).
		if c.stable[old.pair] != old.rv {
			floor++
		}
		if m := c.relisting[old.pair]; m[old.rv] == old.seq {
			delete(m, old.rv)
			if len(m) == 0 {
				delete(c.relisting, old.pair)
			}
		}
	}
	c.floor[old.pair] = max(c.floor[old.pair], floor)
	c.evictedLocked(old)
}

// errTooOld is a watch position the window no longer covers.
var errTooOld = errors.New("too old resource version")

// cursor is a watch's place in the cache.
type cursor struct {
	generation uint64
	// next: the watch has read every event of its pairs with a lower seq. Until its first read
	// it reads all its pairs' events in the window, and base is, per pair, the seq of the newest
	// event evicted when it started (an eviction since is a gap).
	next uint64
	base map[store.Pair]uint64
	// wake is where the cache says that one of the watch's pairs has news (subscribe).
	wake chan struct{}
	// after is, for a pair whose position is the resourceVersion of an event of a re-list in
	// progress, that event's seq: the watch sends the pair's events after it, whatever their
	// resourceVersions (see resumeAfterLocked).
	after map[store.Pair]uint64
	// resets are the watch's pairs' watchCache.resets when it started (a pair's member going back
	// since ends it with 410); since is, per pair whose member went back, the seq of the new
	// numbering's first event: the pair's earlier events are not sent (see renumbering.since).
	resets map[store.Pair]uint64
	since  map[store.Pair]uint64
}

// errTooNew is a watch position ahead of everything the stream has shown.
var errTooNew = errors.New("too large resource version")

// start places a watch of pairs from positions from (per pair, the resourceVersion it has seen up
// to): errTooOld when the window may lack an event after one of them. It waits, bounded by ctx,
// for the cache to be ready, and for every position to be reached by the stream (errTooNew when
// ctx ends first: a position ahead of the stream is never 410, the client would re-list in vain).
func (c *watchCache) start(ctx context.Context, from map[store.Pair]int64) (cursor, error) {
	for {
		c.mu.Lock()
		var ahead error
		if c.ready {
			// A position placed after its event needs nothing older than that event, which
			// the window holds.
			after := c.resumeAfterLocked(from)
			for p, rv := range from {
				_, placed := after[p]
				if !placed && c.truncated[p] && rv > c.stable[p] && rv <= c.head[p] {
					err := fmt.Errorf("%w: %s/%s at %d, inside a list whose start the watch window lacks", errTooOld, p.Cluster, groupResourceOf(p), rv)
					c.mu.Unlock()
					return cursor{}, err
				}
				if !placed && rv < c.floor[p] {
					err := fmt.Errorf("%w: %s/%s at %d, the watch window starts at %d", errTooOld, p.Cluster, groupResourceOf(p), rv, c.floor[p])
					c.mu.Unlock()
					return cursor{}, err
				}
				if err := c.oldPositionLocked(p, rv); err != nil && !placed {
					c.mu.Unlock()
					return cursor{}, err
				}
				if rv > c.head[p] {
					ahead = fmt.Errorf("%w: %s/%s at %d, the event stream is at %d", errTooNew, p.Cluster, groupResourceOf(p), rv, c.head[p])
				}
			}
			if ahead == nil {
				defer c.mu.Unlock()
				cur := cursor{generation: c.generation, after: after, base: make(map[store.Pair]uint64, len(from)), wake: make(chan struct{}, 1)}
				for p := range from {
					cur.base[p] = c.win.evicted(p)
					c.subscribeLocked(p, cur.wake)
					if n := c.resets[p]; n > 0 {
						if cur.resets == nil {
							cur.resets = map[store.Pair]uint64{}
						}
						cur.resets[p] = n
					}
					if r := c.renumbered[p]; r != nil && r.since > 0 {
						if cur.since == nil {
							cur.since = map[store.Pair]uint64{}
						}
						cur.since[p] = r.since
					}
				}
				return cur, nil
			}
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			if ahead != nil {
				return cursor{}, ahead
			}
			return cursor{}, ctx.Err()
		}
	}
}

// resumeAfterLocked finds, per pair whose position is the resourceVersion of an event of a re-list
// in progress, that event (the first that carries it). A one-cluster view's events carry their
// objects' own resourceVersions, and a re-list publishes in key order: a client that got such an
// event has seen the stream up to it, yet later events of the list may carry lower
// resourceVersions, which "above the position" would skip.
func (c *watchCache) resumeAfterLocked(from map[store.Pair]int64) map[store.Pair]uint64 {
	var out map[store.Pair]uint64
	for p, rv := range from {
		if seq, ok := c.relisting[p][rv]; ok {
			if out == nil {
				out = map[store.Pair]uint64{}
			}
			out[p] = seq
		}
	}
	return out
}

// read returns the events of pairs after cur (in the stream's order; events are immutable), the
// pairs' stable positions (where a client that saw them may resume), and the channel that says
// when one of the pairs has news. errTooOld says the watch fell behind its pairs' windows or the
// cache started over.
func (c *watchCache) read(cur *cursor, pairs []store.Pair) ([]*cacheEvent, map[store.Pair]int64, <-chan struct{}, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur.generation != c.generation || !c.ready {
		return nil, nil, nil, fmt.Errorf("%w: the watch cache started over", errTooOld)
	}
	var evs []*cacheEvent
	for _, p := range pairs {
		if c.resets[p] != cur.resets[p] {
			return nil, nil, nil, fmt.Errorf("%w: %s/%s: the member's resourceVersions went back (etcd restored or the cluster rebuilt); list again",
				errTooOld, p.Cluster, groupResourceOf(p))
		}
		gap := c.win.evicted(p) >= cur.next
		if cur.base != nil {
			gap = c.win.evicted(p) != cur.base[p]
		}
		if gap {
			return nil, nil, nil, fmt.Errorf("%w: the watch fell behind the window of %s/%s", errTooOld, p.Cluster, groupResourceOf(p))
		}
		evs = append(evs, c.win.since(p, cur.next)...)
	}
	if len(pairs) > 1 {
		slices.SortFunc(evs, func(a, b *cacheEvent) int { return cmp.Compare(a.seq, b.seq) })
	}
	if cur.since != nil {
		evs = slices.DeleteFunc(evs, func(e *cacheEvent) bool { s, ok := cur.since[e.pair]; return ok && e.seq < s })
		cur.since = nil // every later event is after it
	}
	cur.next, cur.base = c.nextSeq, nil
	stable := make(map[store.Pair]int64, len(pairs))
	for _, p := range pairs {
		stable[p] = c.stable[p]
	}
	return evs, stable, cur.wake, nil
}

// subscribeLocked has ch woken at every event of p.
func (c *watchCache) subscribeLocked(p store.Pair, ch chan struct{}) {
	m := c.subs[p]
	if m == nil {
		m = map[chan struct{}]struct{}{}
		c.subs[p] = m
	}
	m[ch] = struct{}{}
}

// stop ends a watch's subscriptions.
func (c *watchCache) stop(cur *cursor, pairs []store.Pair) {
	if cur.wake == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range pairs {
		if m := c.subs[p]; m != nil {
			delete(m, cur.wake)
			if len(m) == 0 {
				delete(c.subs, p)
			}
		}
	}
}

// heads are, per cluster, the newest resourceVersion of a resource the stream has shown: what a
// consistent read waits for the index to reach. Clusters without any are left out (nothing to wait
// for); so is everything while the cache is not ready.
func (c *watchCache) heads(res apiResource, clusters []string) rvVector {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := rvVector{}
	if !c.ready {
		return out
	}
	for _, cl := range clusters {
		if h := c.head[res.pair(cl)]; h > 0 {
			out[cl] = h
		}
	}
	return out
}

// replayFrom is the lowest position of the pair a watch can start from and miss nothing the window
// holds: its floor, at least 1 (0 is no position to a client: a watch from it starts from now).
// ok is false when the cache is not ready, holds nothing of the pair, or a list of it began before
// the window (positions inside it are not placed).
func (c *watchCache) replayFrom(p store.Pair) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ready || c.head[p] == 0 || c.truncated[p] || c.renumbered[p] != nil {
		return 0, false
	}
	return max(c.floor[p], 1), true
}

// previous is the object of the pair's event with seq, while the window holds it: an object's
// state before a later event, for a watch to judge whether it matched its selectors then.
func (c *watchCache) previous(p store.Pair, seq uint64) []byte {
	if seq == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.win.get(p, seq); e != nil {
		return e.obj
	}
	return nil
}

func groupResourceOf(p store.Pair) string {
	if p.Group == "" {
		return p.Resource
	}
	return p.Resource + "." + p.Group
}

// eventsAfter are the pair's events above rv that the window holds, at most limit, oldest first (in
// resourceVersion order). ok is false when that cannot be the whole story: the cache is not ready,
// the window's floor is above rv (below says stale: a newer rv may do), a list is in progress (its
// events come in key order) or began before the window, or the member went back.
func (c *watchCache) eventsAfter(p store.Pair, rv int64, limit int) (evs []*cacheEvent, ok, below bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ready || c.floor[p] > rv {
		return nil, false, true
	}
	if c.truncated[p] || len(c.relisting[p]) > 0 || c.renumbered[p] != nil {
		return nil, false, false
	}
	if c.head[p] <= rv {
		return nil, true, false // the common case: the index has everything the stream has
	}
	// From the newest back to the first at or below rv: the events above a watermark are the
	// window's last few, and the lock this holds is every watch's.
	all := c.win.since(p, 0)
	i := len(all)
	for i > 0 && (all[i-1].rv > rv || all[i-1].relisting()) {
		i--
	}
	for _, e := range all[i:] {
		if e.relisting() {
			continue
		}
		if len(evs) == limit {
			break
		}
		evs = append(evs, e)
	}
	return evs, true, false
}
