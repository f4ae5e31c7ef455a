package watchcache

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"weak"

	"github.com/tidwall/gjson"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubesearch/kubesearch/internal/changes"
	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/lifecycle"
	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/internal/stream"
)

// Event is one watch event of one object. Events are shared by every watch that reads them and
// never change once the cache has made them: exported fields, so the facade reads them without
// copies, and must not write them.
type Event struct {
	// Seq is the event's place in the stream's order (from 1, global across pairs).
	Seq  uint64
	Type watch.EventType
	Pair store.Pair
	// Namespace and UID are the object's; RV its resourceVersion at this event (for a DELETED
	// the cache made up, the SYNC's or PURGE's).
	Namespace string
	UID       string
	RV        int64
	// Object is the object as a LIST returns it; for a DELETED the cache made up (a SYNC or
	// PURGE), its metadata-only copy.
	Object []byte
	// PrevLabels are the object's labels before the event (a JSON object, "" if it was not
	// cached), so a resumed watch can tell an object that left its label selector; PrevSeq is the
	// Seq of the object's previous event (its previous state, while the window holds it: see
	// Watch.Previous), 0 if none.
	PrevLabels string
	PrevSeq    uint64
	// prev is the event of PrevSeq, while anything holds it (Watch.Previous reads it without the
	// cache's lock, which every watch and the stream's reader share).
	prev weak.Pointer[Event]
	// Offset is the offset of the record that made the event, in its pair's partition (noOffset
	// when applied without one): where a mark moves past it (marks.go).
	Offset int64
	// NameAt and RVAt locate metadata.name and metadata.resourceVersion in Object (their JSON
	// values, quotes included; Len 0 when absent): found once per event, for every watcher that
	// renders it (a fleet view rewrites the resourceVersion of each event it sends).
	NameAt, RVAt Span
	// Stable is the pair's position once this event is applied: a client that has seen it may
	// resume from there and miss nothing. During a re-list it stays where the list began: a
	// re-list publishes changed objects in key order, not resourceVersion order, so a resume from
	// the newest one seen would skip older changes still to come.
	Stable int64
}

// relisting tells an event of a re-list in progress: its resourceVersion is above the position a
// client may resume from, and later events of the same list may carry lower ones.
func (e *Event) relisting() bool { return e.RV > e.Stable }

func (e *Event) size() int64 { return int64(len(e.Object) + len(e.PrevLabels) + 176) }

// Span is where a value lies in an event's Object.
type Span struct{ Off, Len int32 }

// locate finds the JSON value at path in obj (one scan for several paths).
func locate(obj []byte, paths ...string) []Span {
	out := make([]Span, len(paths))
	for i, r := range gjson.GetManyBytes(obj, paths...) {
		if r.Index > 0 && r.Index+len(r.Raw) <= len(obj) {
			out[i] = Span{Off: int32(r.Index), Len: int32(len(r.Raw))}
		}
	}
	return out
}

// objState is what the cache keeps of every cached object.
//
// It is kept for every object of the fleet, so it holds only what the cache needs: a DELETED the
// cache makes up (deletedAt) is built from these fields, the pair and the uid, where a ready-made
// metadata-only copy repeated the labels, the names and the cluster (500–700 bytes per object).
type objState struct {
	ns, name   string
	rv         int64
	epoch      int64
	labels     string // JSON, "{}" when it has none
	apiVersion string // interned: one string per apiVersion and kind
	kind       string
	created    string // metadata.creationTimestamp as stored, "" when absent
	lastSeq    uint64 // the seq of its last event, 0 for one seeded from the index
}

// Cache is the window and the identities. Its methods are safe for concurrent use.
type Cache struct {
	opts      Options
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
	// stable is, per pair, the position a client may resume from (see Event.Stable);
	// synced the epoch of the pair's last completed list: an ADDED of a newer epoch is a re-list
	// in progress.
	stable map[store.Pair]int64
	synced map[store.Pair]int64
	// relisting is, per pair, the seq of the window's first event of a re-list in progress per
	// resourceVersion (see Event.relisting): where start places a watch resumed from it.
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
	// resetCount counts every pair's resets: a read checks its pairs' only when it moved.
	resetCount uint64
	// movedLog are the pairs whose stable position moved, in order, from the movedBase-th move on
	// (at most 2×maxMovedLog): a read returns the positions of its pairs that moved since the last
	// one, not of every pair (a fleet watch reads 1,000 pairs per resource).
	movedLog  []store.Pair
	movedBase uint64
	// replaying is true until the events written before the start are read: events then are not
	// deduplicated against the seeded identities (see Apply).
	replaying bool
	ready     bool
	// caughtUp is set the first time the cache has read up to where the stream ended at its start,
	// and stays set across restarts (Ready).
	caughtUp bool
	// generation counts restarts of the cache: a watch of an earlier generation ends with 410.
	generation uint64
	changed    chan struct{} // closed and replaced on every change, for watches being placed
	// In feed mode (feed.go): lastSeq is, per object with an event in the window, the seq of its
	// newest; batches, per events partition, the newest changes.Source.Batch read; purging, per
	// pair, the PURGE whose deletions are being read.
	lastSeq map[string]uint64
	batches map[int]int64
	purging map[store.Pair]changes.Source
	// feedMode says Run follows the feed now.
	feedMode bool
	// Marks (marks.go): the number of partitions of the stream read (0 when none is: Apply and
	// tests), per partition the offset reading started at and the offset after the last record
	// read, the record being applied, each pair's partition and history.
	partitions      int
	started, readTo map[int]int64
	cur             *at
	parts           map[store.Pair]int
	hist            map[store.Pair]*history
	// moves are, per partition, the moves of positions without events, from movesFrom on.
	moves     map[int][]unevented
	movesFrom map[int]int64
	// subs wake open watches, per pair they read: an event of one pair wakes only the watches
	// reading it (not every watch of the fleet at every event).
	subs map[store.Pair]map[chan struct{}]struct{}
}

// Options are what a cache reads (Run) and how much of it it keeps.
type Options struct {
	Log *slog.Logger // nil: nothing logged
	// MaxEvents and MaxBytes bound the window, shared by every pair (window.go).
	MaxEvents int
	MaxBytes  int64
	// Stream is the event stream Run follows, Topic its events' topic; IndexerGroup is the
	// indexers' consumer group, whose committed offsets say where reading starts (see fill).
	Stream       stream.Broker
	Topic        string
	IndexerGroup string
	// Changes, when set, is the indexers' change feed (package changes), which Run follows
	// instead of Topic: the cache then keeps no identity per object (feed.go).
	Changes string
	// Index is read at every start of Run: its watermarks, and the identity of every stored
	// object.
	Index Index
	// ResourceOf maps a stored object's cluster, group and kind to its resource ("" when unknown):
	// the index stores kinds, the stream and the facade speak resources. Run seeds identities only
	// once CatalogSynced says the mapping is complete.
	ResourceOf    func(cluster, group, kind string) string
	CatalogSynced func() bool
}

// Index is what the cache reads of the index at its start: the watermarks, below which every
// event is searchable, and the stored objects' identities.
type Index interface {
	Search(ctx context.Context, q *query.Query) (*store.Result, error)
	Watermarks(ctx context.Context) ([]store.Watermark, error)
}

// New is an empty cache, not ready: Run fills it (or Seed, Apply and CaughtUp, for a caller that
// reads the stream itself).
func New(o Options) *Cache {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	// Sequence numbers start at 1: 0 says "no event" in PrevSeq and lastSeq.
	c := &Cache{opts: o, log: o.Log, maxEvents: o.MaxEvents, maxBytes: o.MaxBytes, changed: make(chan struct{}), nextSeq: 1,
		subs: map[store.Pair]map[chan struct{}]struct{}{}}
	c.resetLocked()
	return c
}

func (c *Cache) resetLocked() {
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
	c.movedLog, c.movedBase = nil, c.movedBase+uint64(len(c.movedLog))
	c.lastSeq, c.batches, c.purging = map[string]uint64{}, map[int]int64{}, map[store.Pair]changes.Source{}
	c.feedMode = false
	c.partitions, c.started, c.readTo, c.cur = 0, map[int]int64{}, map[int]int64{}, nil
	c.parts, c.hist = map[store.Pair]int{}, map[store.Pair]*history{}
	c.moves, c.movesFrom = map[int][]unevented{}, map[int]int64{}
	c.ready, c.replaying = false, true
	c.generation++
	c.notifyLocked()
	for _, subs := range c.subs {
		wake(subs) // their watches end with 410
	}
}

func (c *Cache) notifyLocked() {
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

// Run fills the cache from Options.Stream until ctx is done, starting over (every watch ends with
// 410) when the stream cannot be followed from where it was.
func (c *Cache) Run(ctx context.Context) error {
	o := c.opts
	kafka, topic, indexerGroup, src := o.Stream, o.Topic, o.IndexerGroup, o.Index
	bo := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Cap: 5 * time.Second, Steps: 1 << 30}
	for {
		var err error
		if o.Changes != "" {
			err = c.fillFeed(ctx, kafka, o.Changes, indexerGroup, src)
			if stream.UnknownTopic(err) {
				err = c.fillUntilFeed(ctx)
				if errors.Is(err, errFeedAppeared) {
					c.log.Info("the change feed exists now: the watch cache follows it; open watches end with 410", "changes", o.Changes)
					c.mu.Lock()
					c.resetLocked()
					c.mu.Unlock()
					continue
				}
			}
		} else {
			err = c.fill(ctx, kafka, topic, indexerGroup, src, o.ResourceOf, o.CatalogSynced)
		}
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

// errFeedAppeared ends fillUntilFeed.
var errFeedAppeared = errors.New("the change feed appeared")

// fillUntilFeed follows the event stream while the change feed does not exist (indexers of an
// older version, --changes-topic none, or not started yet on a first install), until it does.
func (c *Cache) fillUntilFeed(ctx context.Context) error {
	o := c.opts
	c.log.Warn("the change feed does not exist: the watch cache follows the event stream, keeping an identity per object, until it does",
		"changes", o.Changes, "topic", o.Topic)
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		for lifecycle.Sleep(fctx, 10*time.Second) == nil {
			if _, err := o.Stream.Spans(fctx, o.Changes); err == nil {
				cancel(errFeedAppeared)
				return
			}
		}
	})
	err := c.fill(fctx, o.Stream, o.Topic, o.IndexerGroup, o.Index, o.ResourceOf, o.CatalogSynced)
	if errors.Is(context.Cause(fctx), errFeedAppeared) {
		return errFeedAppeared
	}
	return err
}

// replaySlack is how far before the indexers' committed offsets reading starts, per partition: a
// batch they wrote and committed may not be searchable yet (refreshes come every watermark
// interval), and a LIST does not show it.
const replaySlack = 5000

func (c *Cache) fill(ctx context.Context, kafka stream.Broker, topic, indexerGroup string, src Index,
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
	from, behind, toRead, uncommitted := startOffsets(spans, committed)
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
	c.Seed(wms)
	// Seeding maps each stored object to its resource through the catalog: it must be read first.
	for !catalogSynced() {
		if err := lifecycle.Sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	if err := c.seed(ctx, src, resourceOf); err != nil {
		return fmt.Errorf("seed from the index: %w", err)
	}
	c.startMarks(from)
	if len(behind) == 0 {
		c.CaughtUp()
	}
	c.log.Info("watch cache reading the event stream", "topic", topic, "partitions", len(spans), "replaying", len(behind), "eventsToReplay", toRead)
	f, err := kafka.NewFollower(stream.FollowerConfig{Topic: topic, From: from})
	if err != nil {
		return err
	}
	return f.Run(ctx, func(_ context.Context, m stream.Message) error {
		ev, err := envelope.Unmarshal(m.Value)
		c.applyAt(m, func() {
			if err == nil {
				c.applyLocked(ev)
			}
		})
		if end, ok := behind[m.Partition]; ok && m.Offset+1 >= end {
			delete(behind, m.Partition)
			if len(behind) == 0 {
				c.CaughtUp()
				c.log.Info("watch cache caught up with the event stream")
			}
		}
		return nil
	})
}

// Seed starts every pair at its watermark, as Run does at each start before it reads the stream.
func (c *Cache) Seed(wms []store.Watermark) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seedWatermarksLocked(wms)
}

// CaughtUp says the events written before the start are read (Run says it once it has read up to
// where the stream ended when it started): from then on events are deduplicated against the
// identities, and watches are placed.
func (c *Cache) CaughtUp() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.replaying, c.ready, c.caughtUp = false, true, true
	c.notifyLocked()
}

// Ready says the cache has caught up with the stream once since the process started: a watch from
// then on is placed at once, where before a watch (and a consistent LIST) of a replica that just
// started waits for the cache up to --resource-version-wait, then fails. A later restart of the cache
// (a partition's offsets gone from under it) does not make the process unready: its watches end
// with 410 and are placed again once it caught up, and the REST search, which needs no cache, goes
// on.
func (c *Cache) Ready() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.caughtUp
}

// seedWatermarksLocked starts every pair at its watermark.
func (c *Cache) seedWatermarksLocked(wms []store.Watermark) {
	for _, w := range wms {
		// A pair without events in the window is still at its watermark: a LIST says so, and a
		// watch from there must start, not wait for an event.
		p := w.Pair()
		c.floor[p], c.head[p], c.stable[p] = w.ResourceVersion, w.ResourceVersion, w.ResourceVersion
		c.noteMovedLocked(p)
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
func (c *Cache) seed(ctx context.Context, src Index, resourceOf func(cluster, group, kind string) string) error {
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
	m := gjson.GetManyBytes(obj, "apiVersion", "kind", "metadata.name", "metadata.namespace",
		"metadata.resourceVersion", "metadata.labels", "metadata.creationTimestamp")
	rv, _ := strconv.ParseInt(m[4].Str, 10, 64)
	labels := m[5].Raw
	if !m[5].IsObject() {
		labels = "{}"
	}
	return &objState{ns: m[3].Str, name: m[2].Str, rv: rv, epoch: epoch, labels: labels,
		apiVersion: intern(m[0].Str), kind: intern(m[1].Str), created: m[6].Str}
}

// interned holds one copy of each apiVersion and kind, which every object of a kind repeats.
var interned sync.Map

func intern(s string) string {
	if v, ok := interned.Load(s); ok {
		return v.(string)
	}
	v, _ := interned.LoadOrStore(s, s)
	return v.(string)
}

// deletedAt is the metadata-only copy of an object the cache deletes without a last state from the
// stream (a SYNC or PURGE made the DELETED, or the event had no object): apiVersion, kind, name,
// namespace, uid, labels, creation time and the cluster annotation, at resourceVersion rv (its
// last one when rv is 0).
func deletedAt(st *objState, pair store.Pair, uid string, rv int64) []byte {
	if rv == 0 {
		rv = st.rv
	}
	b := make([]byte, 0, 192+len(st.labels))
	b = append(b, `{"apiVersion":`...)
	b = document.AppendString(b, st.apiVersion)
	b = append(b, `,"kind":`...)
	b = document.AppendString(b, st.kind)
	b = append(b, `,"metadata":{"name":`...)
	b = document.AppendString(b, st.name)
	if st.ns != "" {
		b = append(b, `,"namespace":`...)
		b = document.AppendString(b, st.ns)
	}
	b = append(b, `,"uid":`...)
	b = document.AppendString(b, uid)
	b = append(b, `,"resourceVersion":"`...)
	b = strconv.AppendInt(b, rv, 10)
	b = append(b, '"')
	if st.labels != "{}" {
		b = append(b, `,"labels":`...)
		b = append(b, st.labels...)
	}
	if st.created != "" {
		b = append(b, `,"creationTimestamp":`...)
		b = document.AppendString(b, st.created)
	}
	b = append(b, `,"annotations":{"`+document.CachedFromClusterAnnotation+`":`...)
	b = document.AppendString(b, pair.Cluster)
	return append(b, "}}}"...)
}

// clusterOf reads the member a stored object came from.
func clusterOf(obj []byte) string {
	return gjson.GetBytes(obj, "metadata.annotations."+gjson.Escape(document.CachedFromClusterAnnotation)).Str
}

func (c *Cache) objectsOf(p store.Pair) map[string]*objState {
	m := c.objects[p]
	if m == nil {
		m = map[string]*objState{}
		c.objects[p] = m
	}
	return m
}

// Apply turns one event of the stream into watch events. Run applies every event it reads.
func (c *Cache) Apply(ev *envelope.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextRecordLocked(ev.Pair(), func() { c.applyLocked(ev) })
}

func (c *Cache) applyLocked(ev *envelope.Event) {
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
			c.setStableLocked(pair, max(c.stable[pair], rv))
		}
		e := &Event{Type: watch.Added, Pair: pair, Namespace: ev.Namespace, UID: ev.UID, RV: rv, Object: obj}
		if st != nil {
			e.Type, e.PrevLabels, e.PrevSeq = watch.Modified, st.labels, st.lastSeq
		}
		next := stateOf(obj, ev.Epoch)
		c.appendLocked(e)
		if st == nil || rv >= st.rv || ev.Epoch > st.epoch {
			next.lastSeq = e.Seq
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
			obj = deletedAt(st, pair, ev.UID, rv)
		}
		if ev.Epoch <= c.synced[pair] {
			c.setStableLocked(pair, max(c.stable[pair], rv))
		}
		e := &Event{Type: watch.Deleted, Pair: pair, Namespace: ev.Namespace, UID: ev.UID, RV: rv, Object: obj}
		if st != nil {
			e.PrevLabels, e.PrevSeq = st.labels, st.lastSeq
		}
		c.appendLocked(e)
	case envelope.Sync:
		var ok bool
		if rv, ok = c.applySyncLocked(ev, pair); !ok {
			return
		}
		// Every object of the scope the list did not repeat is gone from the member.
		for uid, st := range c.objects[pair] {
			if st.epoch < ev.Epoch && (ev.Namespace == "" || st.ns == ev.Namespace) {
				delete(c.objects[pair], uid)
				c.appendLocked(&Event{Type: watch.Deleted, Pair: pair, Namespace: st.ns, UID: uid, RV: rv, Object: deletedAt(st, pair, uid, rv),
					PrevLabels: st.labels, PrevSeq: st.lastSeq})
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
			c.setStableLocked(p, c.head[p])
			for _, uid := range gone {
				st := objs[uid]
				delete(objs, uid)
				c.appendLocked(&Event{Type: watch.Deleted, Pair: p, Namespace: st.ns, UID: uid, RV: c.head[p], Object: deletedAt(st, p, uid, c.head[p]),
					PrevLabels: st.labels, PrevSeq: st.lastSeq})
			}
		}
	}
	if rv > c.head[pair] {
		c.head[pair] = rv
	}
	c.notifyLocked()
}

// applySyncLocked moves the pair's positions for a SYNC marker (the list of a scope completed):
// rv is the pair's position after it, ok false for a SYNC of a numbering the member left (to be
// dropped). What the list did not repeat is the caller's to delete.
func (c *Cache) applySyncLocked(ev *envelope.Event, pair store.Pair) (rv int64, ok bool) {
	listRV, _ := strconv.ParseInt(ev.ListResourceVersion, 10, 64)
	if c.syncScopeLocked(pair, ev.Namespace, ev.Epoch, listRV) {
		return 0, false
	}
	rv = max(listRV, c.head[pair])
	c.synced[pair] = max(c.synced[pair], ev.Epoch)
	c.setStableLocked(pair, max(c.stable[pair], rv))
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
	c.uneventedLocked(pair)
	wake(c.subs[pair]) // the pair's position moved, even when nothing vanished
	return rv, true
}

func (c *Cache) appendLocked(e *Event) {
	if m := locate(e.Object, "metadata.name", "metadata.resourceVersion"); len(m) == 2 {
		e.NameAt, e.RVAt = m[0], m[1]
	}
	e.Seq = c.nextSeq
	e.Stable = c.stable[e.Pair]
	e.Offset = noOffset
	if c.cur != nil && c.partitions > 0 && c.partitionOf(e.Pair) == c.cur.partition {
		// Not a record of another partition's (a PURGE deletes every resource of its kind): no
		// mark of the pair's partition places that.
		e.Offset = c.cur.offset
	}
	if r := c.renumbered[e.Pair]; r != nil {
		r.issue(e.RV)
		r.issue(e.Stable)
	}
	c.nextSeq++
	if e.PrevSeq != 0 {
		if pe := c.win.get(e.Pair, e.PrevSeq); pe != nil {
			e.prev = weak.Make(pe)
		}
	}
	c.win.add(e)
	wake(c.subs[e.Pair])
	if e.relisting() {
		m := c.relisting[e.Pair]
		if m == nil {
			m = map[int64]uint64{}
			c.relisting[e.Pair] = m
		}
		if _, ok := m[e.RV]; !ok {
			m[e.RV] = e.Seq
		}
	}
	for old := c.win.evictOne(); old != nil; old = c.win.evictOne() {
		c.evictLocked(old)
	}
}

// evictLocked raises the floor of the pair of an event that left the window.
func (c *Cache) evictLocked(old *Event) {
	if r := c.renumbered[old.Pair]; r != nil && old.Seq < r.since {
		return // of the numbering the member left: says nothing of positions now
	}
	floor := old.RV
	if old.relisting() {
		// A client at this event's resourceVersion may lack later events of its list with
		// lower ones, and start can no longer place it after the event: that position is
		// gone too — unless it is also the pair's position after the list's SYNC (see Apply).
		if c.stable[old.Pair] != old.RV {
			floor++
		}
		if m := c.relisting[old.Pair]; m[old.RV] == old.Seq {
			delete(m, old.RV)
			if len(m) == 0 {
				delete(c.relisting, old.Pair)
			}
		}
	}
	c.floor[old.Pair] = max(c.floor[old.Pair], floor)
	c.forgetLocked(old.Pair, old.Offset)
	if len(c.lastSeq) > 0 {
		if key := objectKey(old.Pair, old.UID); c.lastSeq[key] == old.Seq {
			delete(c.lastSeq, key)
		}
	}
	c.evictedLocked(old)
}

// ErrTooOld is a watch position the window no longer covers (or a watch the cache ended: its
// pair's member went back, the cache started over): the facade answers 410 Expired, and the
// client lists again.
var ErrTooOld = errors.New("too old resource version")

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
	// resets are the watch's pairs' Cache.resets when it started (a pair's member going back
	// since ends it with 410); since is, per pair whose member went back, the seq of the new
	// numbering's first event: the pair's earlier events are not sent (see renumbering.since).
	resets map[store.Pair]uint64
	since  map[store.Pair]uint64
	// mark is where the last read left the stream, per partition of the watch's pairs (nil when
	// the cache reads none); unevented what that read said of moves without events (marks.go).
	mark      Mark
	unevented Unevented
	// set and parts are the watch's pairs as a set and their partitions, made at its first read;
	// resetCount and moved where the watch read Cache.resetCount and Cache.movedLog up to.
	set        map[store.Pair]bool
	parts      []int
	resetCount uint64
	moved      uint64
}

// ErrTooNew is a watch position ahead of everything the stream has shown: the facade answers 504
// with the cause ResourceVersionTooLarge, never 410 (the client would list again in vain).
var ErrTooNew = errors.New("too large resource version")

// start is Start's placement of a watch: its cursor (this package's tests hold cursors, not
// Watches).
func (c *Cache) start(ctx context.Context, from map[store.Pair]int64) (cursor, error) {
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
					err := fmt.Errorf("%w: %s/%s at %d, inside a list whose start the watch window lacks", ErrTooOld, p.Cluster, groupResourceOf(p), rv)
					c.mu.Unlock()
					return cursor{}, err
				}
				if !placed && rv < c.floor[p] {
					err := fmt.Errorf("%w: %s/%s at %d, the watch window starts at %d", ErrTooOld, p.Cluster, groupResourceOf(p), rv, c.floor[p])
					c.mu.Unlock()
					return cursor{}, err
				}
				if err := c.oldPositionLocked(p, rv); err != nil && !placed {
					c.mu.Unlock()
					return cursor{}, err
				}
				if rv > c.head[p] {
					ahead = fmt.Errorf("%w: %s/%s at %d, the event stream is at %d", ErrTooNew, p.Cluster, groupResourceOf(p), rv, c.head[p])
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

// Watch is one watch's place in the cache, from Start to Stop. A Watch is used by one goroutine.
type Watch struct {
	c     *Cache
	cur   cursor
	pairs []store.Pair
}

// Start places a watch of pairs from positions from (per pair, the resourceVersion its client
// has seen up to): ErrTooOld when the window may lack an event after one of them. It waits,
// bounded by ctx, for the cache to be ready, and for every position to be reached by the stream
// (ErrTooNew when ctx ends first: a position ahead of the stream is never 410, the client would
// re-list in vain). The Watch must be stopped.
func (c *Cache) Start(ctx context.Context, pairs []store.Pair, from map[store.Pair]int64) (*Watch, error) {
	cur, err := c.start(ctx, from)
	if err != nil {
		return nil, err
	}
	return &Watch{c: c, cur: cur, pairs: pairs}, nil
}

// Read returns the events of the watch's pairs it has not read (in the stream's order; events are
// immutable), the stable positions (where a client that saw them may resume) of the pairs that
// moved since the last Read (of every pair at the first: the others have not moved), and the
// channel that says when one of the pairs has news. ErrTooOld says the watch fell behind its
// pairs' windows, a pair's member went back, or the cache started over: the client lists again.
func (w *Watch) Read() ([]*Event, map[store.Pair]int64, <-chan struct{}, error) {
	return w.c.read(&w.cur, w.pairs)
}

// From says where in the stream the watch's client stands (the mark its position reads back at):
// the first Read then names the pairs moved without events since (Unevented), as every later Read
// does since the one before. Without it, the first Read names the partitions instead.
func (w *Watch) From(m Mark) {
	if w.cur.mark == nil {
		w.cur.mark = maps.Clone(m)
	}
}

// Stop ends the watch's subscriptions.
func (w *Watch) Stop() { w.c.stop(&w.cur, w.pairs) }

// After is, per pair whose position was the resourceVersion of an event of a re-list in progress,
// that event's Seq: the watch sends the pair's events after it by their place in the stream,
// whatever their resourceVersions (a re-list publishes in key order).
func (w *Watch) After() map[store.Pair]uint64 { return w.cur.after }

// Previous is the object of e's previous event (PrevSeq), while it is held (the window, or a watch
// reading it): an object's state before e, for a resumed watch to judge whether it matched its
// selectors then. nil when there is none or it is gone. It takes no lock: a watch asks it for
// every event, and the cache's lock is every watch's and the stream reader's.
func (w *Watch) Previous(e *Event) []byte {
	if pe := e.prev.Value(); pe != nil {
		return pe.Object
	}
	return nil
}

// resumeAfterLocked finds, per pair whose position is the resourceVersion of an event of a re-list
// in progress, that event (the first that carries it). A one-cluster view's events carry their
// objects' own resourceVersions, and a re-list publishes in key order: a client that got such an
// event has seen the stream up to it, yet later events of the list may carry lower
// resourceVersions, which "above the position" would skip.
func (c *Cache) resumeAfterLocked(from map[store.Pair]int64) map[store.Pair]uint64 {
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
// stable positions of the pairs that moved since the last read (where a client that saw them may
// resume), and the channel that says when one of the pairs has news. ErrTooOld says the watch fell behind its pairs' windows or the
// cache started over.
func (c *Cache) read(cur *cursor, pairs []store.Pair) ([]*Event, map[store.Pair]int64, <-chan struct{}, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur.generation != c.generation || !c.ready {
		return nil, nil, nil, fmt.Errorf("%w: the watch cache started over", ErrTooOld)
	}
	// A fleet watch reads 1,000 pairs or more, under the lock every watch and the stream's reader
	// share: what each read costs is what changed since the last one, not the number of pairs.
	first := cur.base != nil
	if cur.set == nil {
		cur.set = make(map[store.Pair]bool, len(pairs))
		for _, p := range pairs {
			cur.set[p] = true
		}
	}
	if first || cur.resetCount != c.resetCount {
		for _, p := range pairs {
			if c.resets[p] != cur.resets[p] {
				return nil, nil, nil, fmt.Errorf("%w: %s/%s: the member's resourceVersions went back (etcd restored or the cluster rebuilt); list again",
					ErrTooOld, p.Cluster, groupResourceOf(p))
			}
		}
		cur.resetCount = c.resetCount
	}
	if first || c.win.newestEvicted >= cur.next {
		// Events the watch had not read may have left the window (none has since newestEvicted).
		for _, p := range pairs {
			gap := c.win.evicted(p) >= cur.next
			if cur.base != nil {
				gap = c.win.evicted(p) != cur.base[p]
			}
			if gap {
				return nil, nil, nil, fmt.Errorf("%w: the watch fell behind the window of %s/%s", ErrTooOld, p.Cluster, groupResourceOf(p))
			}
		}
	}
	var evs []*Event
	if tail := c.win.logSince(cur.next); len(tail) <= 2*len(pairs) {
		// The stream's tail is shorter than asking each pair: it is in the stream's order already.
		for _, e := range tail {
			if cur.set[e.Pair] && (e.Seq > c.win.newestEvicted || c.win.holds(e)) {
				evs = append(evs, e)
			}
		}
	} else {
		for _, p := range pairs {
			evs = append(evs, c.win.since(p, cur.next)...)
		}
		if len(pairs) > 1 {
			slices.SortFunc(evs, func(a, b *Event) int { return cmp.Compare(a.Seq, b.Seq) })
		}
	}
	// The stable positions of the pairs that moved since the last read (every pair at the first,
	// or when the log no longer reaches back to it); the others are where that read left them.
	stable := map[store.Pair]int64{}
	if first || cur.moved < c.movedBase {
		for _, p := range pairs {
			stable[p] = c.stable[p]
		}
	} else {
		for _, p := range c.movedLog[cur.moved-c.movedBase:] {
			if cur.set[p] {
				stable[p] = c.stable[p]
			}
		}
		for _, e := range evs {
			stable[e.Pair] = c.stable[e.Pair]
		}
	}
	cur.moved = c.movedBase + uint64(len(c.movedLog))
	if cur.since != nil {
		evs = slices.DeleteFunc(evs, func(e *Event) bool { s, ok := cur.since[e.Pair]; return ok && e.Seq < s })
		cur.since = nil // every later event is after it
	}
	cur.next, cur.base = c.nextSeq, nil
	prev := cur.mark
	cur.mark, cur.unevented = nil, Unevented{}
	if c.partitions > 0 {
		if cur.parts == nil {
			seen := map[int]bool{}
			for _, p := range pairs {
				if q := c.partitionOf(p); !seen[q] {
					seen[q] = true
					cur.parts = append(cur.parts, q)
				}
			}
		}
		cur.mark = make(Mark, len(cur.parts))
		for _, q := range cur.parts {
			cur.mark[q] = c.readTo[q]
		}
		cur.unevented = c.uneventedSinceLocked(prev, cur.mark, cur.set)
		// The pairs moved without events are among the moved (the move log has them, unless a
		// SYNC left the position where it was); a partition whose moves are not known, all its pairs.
		for _, p := range cur.unevented.Pairs {
			stable[p] = c.stable[p]
		}
		if len(cur.unevented.Partitions) > 0 && len(stable) < len(pairs) {
			for _, p := range pairs {
				if slices.Contains(cur.unevented.Partitions, c.partitionOf(p)) {
					stable[p] = c.stable[p]
				}
			}
		}
	}
	return evs, stable, cur.wake, nil
}

// subscribeLocked has ch woken at every event of p.
func (c *Cache) subscribeLocked(p store.Pair, ch chan struct{}) {
	m := c.subs[p]
	if m == nil {
		m = map[chan struct{}]struct{}{}
		c.subs[p] = m
	}
	m[ch] = struct{}{}
}

// stop ends a watch's subscriptions.
func (c *Cache) stop(cur *cursor, pairs []store.Pair) {
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

// Heads are, per pair, the newest resourceVersion the stream has shown: what a consistent read
// waits for the index to reach. Pairs without any are left out (nothing to wait for); so is
// everything while the cache is not ready.
func (c *Cache) Heads(pairs []store.Pair) map[store.Pair]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[store.Pair]int64{}
	if !c.ready {
		return out
	}
	for _, p := range pairs {
		if h := c.head[p]; h > 0 {
			out[p] = h
		}
	}
	return out
}

// ReplayFrom is the lowest position of the pair a watch can start from and miss nothing the window
// holds: its floor, at least 1 (0 is no position to a client: a watch from it starts from now).
// ok is false when the cache is not ready, holds nothing of the pair, or a list of it began before
// the window (positions inside it are not placed).
func (c *Cache) ReplayFrom(p store.Pair) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ready || c.head[p] == 0 || c.truncated[p] || c.renumbered[p] != nil {
		return 0, false
	}
	return max(c.floor[p], 1), true
}

func groupResourceOf(p store.Pair) string {
	if p.Group == "" {
		return p.Resource
	}
	return p.Resource + "." + p.Group
}

// EventsAfter are the pair's events above rv that the window holds, at most limit, oldest first (in
// resourceVersion order). ok is false when that cannot be the whole story: the cache is not ready,
// the window's floor is above rv (below says stale: a newer rv may do), a list is in progress (its
// events come in key order) or began before the window, or the member went back.
func (c *Cache) EventsAfter(p store.Pair, rv int64, limit int) (evs []*Event, ok, below bool) {
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
	for i > 0 && (all[i-1].RV > rv || all[i-1].relisting()) {
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
