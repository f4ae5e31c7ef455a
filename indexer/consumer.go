package indexer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/tidwall/gjson"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/lifecycle"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/internal/stream"
	"github.com/kubesearch/kubesearch/mappings"
)

// messageReader is what the consumer needs of a stream.GroupReader.
type messageReader interface {
	Fetch(ctx context.Context) (stream.Message, error)
	Commit(ctx context.Context, msgs ...stream.Message) error
}

// documents is what the consumer needs of the store backend for the documents: writes that report
// what will never be accepted by position, garbage collection after SYNC and PURGE markers (an
// error that is store.ErrRejected will never pass), and a refresh that makes writes searchable.
type documents interface {
	Write(ctx context.Context, ops []store.Op) ([]store.Failure, error)
	DeleteOlder(ctx context.Context, scope store.ListScope, epoch int64, report store.GoneFunc) (int64, error)
	DeleteOlderEach(ctx context.Context, syncs []store.Sync, report store.GoneFunc) (deleted []int64, errs []error)
	DeleteAll(ctx context.Context, sel store.Selection, report store.GoneFunc) (int64, error)
	Refresh(ctx context.Context, kinds ...string) error
	// Priors reads the stored state of the ops' documents, for the change feed.
	Priors(ctx context.Context, ops []store.Op) ([]store.Prior, error)
}

// progress is what the consumer needs of the store backend for the watermarks it keeps in memory:
// loading and saving them, and, for a PURGE, reading and deleting those of a selection.
type progress interface {
	LoadWatermarks(ctx context.Context, pairs []store.Pair) (map[store.Pair]*store.Watermark, error)
	SaveWatermarks(ctx context.Context, ws []store.Watermark) error
	SelectionWatermarks(ctx context.Context, sel store.Selection) ([]store.Watermark, error)
	DeleteWatermarks(ctx context.Context, pairs []store.Pair) error
}

// item is one consumed message on its way through a batch.
type item struct {
	msg  stream.Message
	ev   *envelope.Event // nil when it does not decode
	op   *store.Op       // for ADDED, MODIFIED and DELETED
	dead *deadLetter     // set once it is known never to apply
}

// consumer reads the event stream in batches, applies each batch to OpenSearch in partition order,
// dead-letters what can never be applied, and commits a batch's offsets once all of it is written.
// run's goroutine applies the batches; one fetches and one decodes the next batch meanwhile (see run).
type consumer struct {
	reader   messageReader
	dlq      messageWriter
	changes  messageWriter // the change feed; nil publishes none
	docs     documents
	progress progress
	wm       *watermarks
	metrics  *metrics
	log      *slog.Logger
	now      func() time.Time
	backoff  func() wait.Backoff

	prefix        string
	topic         string
	batchSize     int
	batchBytes    int
	batchInterval time.Duration
	wmInterval    time.Duration

	// bookmarks, feedTopic and feedGroup keep the feed's bookmark (changes.BookmarkGroup);
	// feedStart is the feed's end before the batch being applied published, nil until it does.
	bookmarks            feedBookmarks
	feedTopic, feedGroup string
	feedStart            map[int]int64

	next        map[int]int64       // per partition, the offset expected next
	batchEnd    map[int]int64       // per partition, the last offset of the batch being applied (changes.Source.Batch)
	unversioned map[store.Pair]bool // pairs already logged as written without versioning
}

// run consumes until ctx is done, then writes and commits what was fetched (work bounds that) and
// returns. It returns an error only when work ends before the batch in flight is written.
//
// Three goroutines form a pipeline: fetch reads messages, assemble decodes each as it comes
// (envelopes parsed, documents built: CPU only, no request, no shared state) and cuts them into
// batches, and run applies the batches one at a time, in order; a fourth, while it lasts, is the
// periodic refresh (startRefresh). Decoding a batch takes a fifth to a sixth of the time
// OpenSearch takes to index it (bench-indexer: 0.24 s against 1.2–1.6 s per 1,000 Pods); doing it
// while the previous batch's _bulk is in flight keeps OpenSearch busy instead of idle between
// requests. Everything that depends on order — the
// writes, markers, watermarks, dead letters and offset commits — stays on run's goroutine, one batch
// after the other, so a partition's events are applied and committed exactly in order, as before.
func (c *consumer) run(ctx, work context.Context) error {
	fetchCtx, stopFetch := context.WithCancel(ctx)
	done := make(chan struct{}) // closed when run returns: the pipeline's stages stop too
	msgs := make(chan stream.Message, c.batchSize)
	// Unbuffered: assemble decodes at most one batch ahead of the one being applied, which bounds
	// memory to one more batch.
	ready := make(chan *decodedBatch)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(done)
	defer stopFetch()
	wg.Go(func() {
		defer close(msgs)
		c.fetch(fetchCtx, msgs)
	})
	wg.Go(func() {
		defer close(ready)
		c.assemble(msgs, ready, done)
	})

	// The periodic refresh runs beside the batches, not between them: a refresh takes as long as
	// OpenSearch's own (0.46 s on average in bench-freshness on a busy machine), and writes waiting
	// for it were that much later searchable. Its result comes back to this goroutine, which alone
	// moves the watermarks, and only as far as the writes made before it started.
	tick := time.NewTicker(c.wmInterval)
	defer tick.Stop()
	var refreshed <-chan refreshDone // nil while no refresh is in flight
	for {
		select {
		case b, ok := <-ready:
			if !ok {
				// Fetching stopped (ctx done) and every batch of what it fetched is written and
				// committed: make it searchable.
				if refreshed != nil {
					c.finishRefresh(work, <-refreshed)
				}
				c.refreshWatermarks(work)
				return nil
			}
			if err := c.apply(work, b); err != nil {
				return err
			}
		case <-tick.C:
			if refreshed == nil {
				refreshed = c.startRefresh(work, &wg)
			}
		case r := <-refreshed:
			refreshed = nil
			c.finishRefresh(work, r)
		}
	}
}

// assemble cuts the fetched messages into batches by count and bytes, decodes each message as it
// arrives and hands the batches to out, in order. A batch is handed over as soon as run takes it once
// batchInterval has passed since its first message (or at once when full): while run is writing the
// batch before, this one keeps filling, so batches grow with the load by themselves and an event
// reaching an idle indexer waits only batchInterval. Closing a batch on its timer even while run was
// busy made it wait for run all the same, then went out small, with the messages that came meanwhile
// left for the batch after. Once in is closed (fetching stopped) it hands over the last, partial batch
// and returns; it returns without handing over once done is closed.
func (c *consumer) assemble(in <-chan stream.Message, out chan<- *decodedBatch, done <-chan struct{}) {
	var (
		b     batch
		items []*item // the decoded messages of b, in the same order
		due   bool    // b has waited batchInterval: hand it over once run takes it
	)
	timer := time.NewTimer(c.batchInterval)
	timer.Stop()
	defer timer.Stop()
	send := func(msgs []stream.Message, decoded []*item) bool {
		select {
		case out <- &decodedBatch{msgs: msgs, items: decoded}:
			return true
		case <-done:
			return false
		}
	}
	// add takes the next message (ok false: there is none, fetching stopped) and reports whether to
	// go on.
	add := func(m stream.Message, ok bool) bool {
		if !ok {
			if !b.empty() {
				send(b.take(), items)
			}
			return false
		}
		items = append(items, c.decode(m))
		// push hands back the batches m completed, a prefix of items each.
		for _, full := range b.push(m, c.batchSize, c.batchBytes) {
			n := len(full)
			if !send(full, items[:n:n]) {
				return false
			}
			// A fresh array for what is left: items[n:] would keep the batch just sent, decoded
			// documents and all, alive for as long as the next batch lasts.
			items = append([]*item(nil), items[n:]...)
		}
		switch b.len() {
		case 0:
			timer.Stop()
			due = false
		case 1: // m started a batch
			timer.Reset(c.batchInterval)
			due = false
		}
		return true
	}
	for {
		var (
			ready chan<- *decodedBatch // nil, so never chosen, until b is due
			offer *decodedBatch
		)
		if due && !b.empty() {
			// What was fetched meanwhile joins the batch before run takes it: select would choose
			// at random between a waiting message and a waiting run.
			select {
			case m, ok := <-in:
				if !add(m, ok) {
					return
				}
				continue
			default:
			}
			ready, offer = out, &decodedBatch{msgs: b.msgs, items: items}
		}
		select {
		case m, ok := <-in:
			if !add(m, ok) {
				return
			}
		case ready <- offer:
			b.take()
			items, due = nil, false
			timer.Stop()
		case <-timer.C:
			due = true
		case <-done:
			return
		}
	}
}

// fetch hands messages over until ctx is done. The reader retries broker errors itself; what reaches
// here is logged and retried with backoff.
func (c *consumer) fetch(ctx context.Context, out chan<- stream.Message) {
	bo := c.backoff()
	for {
		m, err := c.reader.Fetch(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, io.EOF) {
				return
			}
			if c.wait(ctx, &bo, "fetch failed", 0, err) != nil {
				return
			}
			continue
		}
		bo = c.backoff()
		c.metrics.inFlight.Inc()
		select {
		case out <- m:
		case <-ctx.Done():
			c.metrics.inFlight.Dec()
			return // not committed: consumed again later
		}
	}
}

// batch collects messages up to the count and byte limits; the consumer adds the time limit.
type batch struct {
	msgs  []stream.Message
	bytes int
}

func (b *batch) empty() bool { return len(b.msgs) == 0 }
func (b *batch) len() int    { return len(b.msgs) }

// push adds m and returns the batches it completed, oldest first: the batch before m when m does not
// fit in it, and the one with m when that reached a limit. A message larger than maxBytes makes a
// batch of its own.
func (b *batch) push(m stream.Message, maxCount, maxBytes int) [][]stream.Message {
	var full [][]stream.Message
	if !b.empty() && b.bytes+len(m.Value) > maxBytes {
		full = append(full, b.take())
	}
	b.msgs = append(b.msgs, m)
	b.bytes += len(m.Value)
	if len(b.msgs) >= maxCount || b.bytes >= maxBytes {
		full = append(full, b.take())
	}
	return full
}

func (b *batch) take() []stream.Message {
	msgs := b.msgs
	b.msgs, b.bytes = nil, 0
	return msgs
}

// decodedBatch is a batch of messages with their items, in the same order.
type decodedBatch struct {
	msgs  []stream.Message
	items []*item
}

// apply applies one decoded batch and commits it, in runs between PURGE markers (applyRun): a PURGE
// deletes whatever the epoch, so everything before it is written and collected first, and nothing
// after it before. It returns an error only when ctx ends first; nothing of the batch is committed
// then.
func (c *consumer) apply(ctx context.Context, b *decodedBatch) error {
	msgs, items := b.msgs, b.items
	c.batchEnd = map[int]int64{}
	for _, m := range msgs {
		c.checkContinuity(m)
		c.batchEnd[m.Partition] = max(c.batchEnd[m.Partition], m.Offset)
	}
	t := c.now()
	if err := c.loadWatermarks(ctx, items); err != nil {
		return err
	}
	c.since("watermarks", t)
	start := 0
	for i, it := range items {
		if it.ev == nil || it.ev.Type != envelope.Purge {
			continue
		}
		if err := c.applyRun(ctx, items[start:i]); err != nil {
			return err
		}
		if err := c.marker(ctx, it); err != nil {
			return err
		}
		start = i + 1
	}
	if err := c.applyRun(ctx, items[start:]); err != nil {
		return err
	}
	var letters []deadLetter
	for _, it := range items {
		if it.dead != nil {
			letters = append(letters, *it.dead)
		}
	}
	if err := c.writeDeadLetters(ctx, letters); err != nil {
		return fmt.Errorf("write %d dead letters: %w", len(letters), err)
	}
	// A SYNC's watermark is stored before its offset is committed: after a restart the marker is not
	// consumed again, and the pair would stay "listing" until the next list.
	t = c.now()
	if err := c.storeUrgentWatermarks(ctx); err != nil {
		return err
	}
	c.commit(ctx, msgs)
	c.bookmark(ctx)
	c.since("commit", t)
	c.metrics.batches.Inc()
	c.metrics.inFlight.Sub(float64(len(msgs)))
	return nil
}

// applyRun applies a run of object events and SYNC markers: every object event is written first, in
// stream order (one _bulk), then every SYNC marker deletes its scope's documents of older epochs,
// behind one refresh for them all, then the watermarks move in stream order.
//
// Collecting a SYNC's garbage after the object events that follow it in the run deletes exactly what
// collecting it at its place would. It deletes the documents of its scope with an epoch older than
// its own; every later event of that scope written in the run has its epoch or a newer one (an older
// one is superseded and dropped, judged against the marker's epoch as once the marker is applied), and
// no event of another scope matches. What must precede a SYNC's collection still does: everything
// before it is written, and refreshed, so a document the list rewrote at an unchanged version is seen
// with its new epoch and kept. The watermarks are only stored and read once the batch is applied.
func (c *consumer) applyRun(ctx context.Context, run []*item) error {
	var (
		ops    []store.Op
		owners []*item // owners[i] is the event of ops[i]
		syncs  []*item
	)
	for _, it := range run {
		switch {
		case it.ev == nil:
			// Undecodable: dead-lettered, belongs to no pair.
		case it.ev.Type == envelope.Sync:
			c.wm.marked(it.ev, it.msg.Partition)
			syncs = append(syncs, it)
		case it.op == nil:
			// Dead-lettered when decoded; it moves the watermarks below all the same.
		case c.wm.superseded(it.ev, it.msg.Partition):
			c.metrics.superseded.Inc()
		default:
			ops = append(ops, *it.op)
			owners = append(owners, it)
		}
	}
	if len(ops) > 0 {
		t := c.now()
		if err := c.publishChanges(ctx, ops, owners); err != nil {
			return err
		}
		t = c.since("changes", t)
		failed, err := c.docs.Write(ctx, ops)
		if err != nil {
			return err
		}
		written := c.since("write", t)
		for _, it := range owners {
			if !it.ev.ObservedAt.IsZero() {
				c.metrics.delay.Observe(written.Sub(it.ev.ObservedAt).Seconds())
			}
		}
		for _, f := range failed {
			it := owners[f.Pos]
			it.dead = &deadLetter{msg: it.msg, reason: ReasonRejected, err: f.Err, index: c.indexOf(it.ev.Kind)}
		}
	}
	t := c.now()
	if err := c.collectSyncs(ctx, syncs); err != nil {
		return err
	}
	if len(syncs) > 0 {
		c.since("syncs", t)
	}
	// Dead-lettered object events count as applied for the watermarks: they will never be written,
	// and must not hold them back. A dead-lettered SYNC does not complete its list.
	for _, it := range run {
		switch {
		case it.ev == nil:
		case it.ev.Type == envelope.Sync:
			if it.dead == nil {
				c.wm.synced(it.ev, it.msg.Partition)
			}
			c.wm.applied(it.ev, it.msg.Partition, it.msg.Offset)
		default:
			c.wm.written(it.ev, it.msg.Partition)
			c.wm.applied(it.ev, it.msg.Partition, it.msg.Offset)
		}
	}
	return nil
}

// collectSyncs deletes, for each SYNC marker, the documents of its scope from older epochs, all
// behind one refresh. A marker whose collection failed is retried alone (marker), with the
// refreshes of its own, until it is done or refused for good.
func (c *consumer) collectSyncs(ctx context.Context, syncs []*item) error {
	if len(syncs) == 0 {
		return nil
	}
	batch := make([]store.Sync, len(syncs))
	for i, it := range syncs {
		batch[i] = store.Sync{Scope: store.ListScope{Pair: it.ev.Pair(), Kind: it.ev.Kind, Namespace: it.ev.Namespace}, Epoch: it.ev.Epoch}
	}
	var report store.GoneFunc
	if c.changes != nil {
		report = func(ctx context.Context, i int, gone []store.Gone) error { return c.publishGone(ctx, syncs[i], gone) }
	}
	deleted, errs := c.docs.DeleteOlderEach(ctx, batch, report)
	for i, it := range syncs {
		if errs[i] == nil {
			errs[i] = c.publishMarker(ctx, it)
		}
		if errs[i] != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("SYNC marker for cluster %s resource %s: %w", it.ev.Cluster, it.ev.GroupResource(), ctx.Err())
			}
			if err := c.marker(ctx, it); err != nil {
				return err
			}
			continue
		}
		c.log.Debug("list completed; documents of older epochs deleted", "cluster", it.ev.Cluster, "resource", it.ev.GroupResource(),
			"kind", it.ev.Kind, "namespace", it.ev.Namespace, "epoch", it.ev.Epoch, "index", c.indexOf(it.ev.Kind), "deleted", deleted[i])
	}
	return nil
}

// decode turns a message into an item: an op for object events, nothing more for markers, a dead
// letter for what can never apply. It runs on assemble's goroutine (c.unversioned is its own).
func (c *consumer) decode(m stream.Message) *item {
	it := &item{msg: m}
	ev, err := envelope.Unmarshal(m.Value)
	if err != nil {
		reason := ReasonMalformedEnvelope
		if v := gjson.GetBytes(m.Value, "v"); v.Type == gjson.Number && v.Int() != envelope.Version {
			reason = ReasonUnsupportedVersion
		}
		c.metrics.messages.WithLabelValues("invalid").Inc()
		it.dead = &deadLetter{msg: m, reason: reason, err: err.Error()}
		return it
	}
	it.ev = ev
	c.metrics.messages.WithLabelValues(string(ev.Type)).Inc()
	switch ev.Type {
	case envelope.Added, envelope.Modified:
		doc, err := document.BuildDecoded(ev) // envelope.Unmarshal validated the object
		if err != nil {
			it.dead = &deadLetter{msg: m, reason: ReasonMalformedObject, err: err.Error(), index: c.indexOf(ev.Kind)}
			return it
		}
		it.op = &store.Op{Kind: ev.Kind, Cluster: ev.Cluster, UID: ev.UID, Doc: doc, Epoch: ev.Epoch}
	case envelope.Deleted:
		it.op = &store.Op{Delete: true, Kind: ev.Kind, Cluster: ev.Cluster, UID: ev.UID, Epoch: ev.Epoch}
	default:
		return it
	}
	if rv, ok := parseRV(ev.ResourceVersion); ok {
		it.op.Versioned, it.op.Version = true, rv
	} else {
		k := ev.Pair()
		c.metrics.unversioned.WithLabelValues(ev.Cluster, ev.GroupResource()).Inc()
		if !c.unversioned[k] {
			c.unversioned[k] = true
			c.log.Warn("resourceVersion is not an integer: writing without external versioning, so a replayed event can overwrite newer state until the next list",
				"cluster", ev.Cluster, "resource", ev.GroupResource(), "resourceVersion", ev.ResourceVersion)
		}
	}
	return it
}

// checkContinuity notices when a partition's offsets jump: another consumer of the group had the
// partition meanwhile (a rebalance), so the watermarks kept for its pairs may be behind what that
// consumer stored. They are loaded again.
func (c *consumer) checkContinuity(m stream.Message) {
	if next, ok := c.next[m.Partition]; ok && m.Offset != next {
		c.log.Info("partition resumed at another offset, reloading its watermarks", "topic", m.Topic,
			"partition", m.Partition, "offset", m.Offset, "expected", next)
		c.wm.forgetPartition(m.Partition)
	}
	c.next[m.Partition] = m.Offset + 1
}

// marker applies a SYNC or PURGE marker, retrying until it is done. A marker the backend refuses
// for good (store.ErrRejected: for OpenSearch, a 4xx other than 401, 403 and 429) is dead-lettered
// rather than stalling the partition.
func (c *consumer) marker(ctx context.Context, it *item) error {
	ev := it.ev
	bo := c.backoff()
	for {
		err := c.applyMarker(ctx, it)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s marker for cluster %s resource %s: %w", ev.Type, ev.Cluster, ev.GroupResource(), ctx.Err())
		}
		if errors.Is(err, store.ErrRejected) {
			it.dead = &deadLetter{msg: it.msg, reason: ReasonRejected, err: err.Error(), index: c.indexOf(ev.Kind)}
			return nil
		}
		if err := c.wait(ctx, &bo, string(ev.Type)+" marker failed", 0, err); err != nil {
			return err
		}
	}
}

func (c *consumer) applyMarker(ctx context.Context, it *item) error {
	ev := it.ev
	// Everything before the marker is written; the backend refreshes first, so no document the list
	// rewrote is seen with its old epoch, and none written just before a PURGE survives it.
	var (
		deleted int64
		err     error
	)
	var report store.GoneFunc
	if c.changes != nil {
		report = func(ctx context.Context, _ int, gone []store.Gone) error { return c.publishGone(ctx, it, gone) }
	}
	if ev.Type == envelope.Sync {
		deleted, err = c.docs.DeleteOlder(ctx, store.ListScope{Pair: ev.Pair(), Kind: ev.Kind, Namespace: ev.Namespace}, ev.Epoch, report)
	} else {
		deleted, err = c.docs.DeleteAll(ctx, selection(ev), report)
	}
	if err == nil {
		err = c.publishMarker(ctx, it)
	}
	if err != nil {
		return err
	}
	attrs := []any{"cluster", ev.Cluster, "resource", ev.GroupResource(), "kind", ev.Kind, "namespace", ev.Namespace,
		"epoch", ev.Epoch, "index", c.indexOf(ev.Kind), "deleted", deleted}
	if ev.Type == envelope.Sync {
		// Its watermark moves in stream order once its run is applied (applyRun).
		c.log.Debug("list completed; documents of older epochs deleted", attrs...)
		return nil
	}
	if err := c.purgeWatermarks(ctx, ev); err != nil {
		return err
	}
	c.log.Info("selection purged", attrs...)
	return nil
}

// since observes the time from start to now as stage's and returns now, the next stage's start.
func (c *consumer) since(stage string, start time.Time) time.Time {
	now := c.now()
	c.metrics.stages.WithLabelValues(stage).Observe(now.Sub(start).Seconds())
	return now
}

// commit commits the batch's offsets. The events are written: a failed commit (a rebalance took the
// partition, say) only means they are consumed and written again, idempotently.
func (c *consumer) commit(ctx context.Context, msgs []stream.Message) {
	last := map[int]stream.Message{}
	for _, m := range msgs {
		if cur, ok := last[m.Partition]; !ok || m.Offset > cur.Offset {
			last[m.Partition] = m
		}
	}
	commits := make([]stream.Message, 0, len(last))
	for _, m := range last {
		commits = append(commits, m)
	}
	if err := c.reader.Commit(ctx, commits...); err != nil {
		c.metrics.commitErrors.Inc()
		c.log.Warn("offset commit failed; the batch's events will be consumed again", "topic", c.topic, "err", err)
		return
	}
	for p, m := range last {
		c.metrics.lag.WithLabelValues(c.topic, strconv.Itoa(p)).Set(float64(max(m.HighWaterMark-m.Offset-1, 0)))
	}
}

// loadWatermarks loads the stored watermarks of the pairs of a batch that are not tracked yet.
func (c *consumer) loadWatermarks(ctx context.Context, items []*item) error {
	var keys []store.Pair
	for _, it := range items {
		if it.ev != nil && it.ev.Resource != "" {
			keys = append(keys, it.ev.Pair())
		}
	}
	keys = c.wm.missing(keys)
	if len(keys) == 0 {
		return nil
	}
	bo := c.backoff()
	for {
		stored, err := c.progress.LoadWatermarks(ctx, keys)
		if err == nil {
			for _, k := range keys {
				c.wm.load(k, stored[k])
			}
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("load watermarks: %w", ctx.Err())
		}
		if err := c.wait(ctx, &bo, "cannot load watermarks", 0, err); err != nil {
			return err
		}
	}
}

// purgeWatermarks applies a PURGE to the watermarks, stored ones included.
func (c *consumer) purgeWatermarks(ctx context.Context, ev *envelope.Event) error {
	// Stored ones too: another replica may have stored pairs of the selection this one never saw
	// (before a rebalance), and they would outlive their pair.
	stored, err := c.progress.SelectionWatermarks(ctx, selection(ev))
	if err != nil {
		return err
	}
	for _, w := range stored {
		k := w.Pair()
		if _, ok := c.wm.pairs[k]; !ok {
			c.wm.load(k, &w)
		}
	}
	return c.progress.DeleteWatermarks(ctx, c.wm.purged(ev))
}

// refreshDone is the outcome of a refresh started by startRefresh.
type refreshDone struct {
	kinds   []string
	written writtenMarks // what was written when it started
	start   time.Time
	err     error
}

// startRefresh starts a refresh of the indices with writes not yet searchable, in a goroutine of wg,
// and returns the channel its outcome comes on; with nothing to refresh it stores the watermarks
// that moved (as finishRefresh does) and returns nil.
func (c *consumer) startRefresh(ctx context.Context, wg *sync.WaitGroup) <-chan refreshDone {
	kinds := c.wm.unrefreshed()
	if len(kinds) == 0 {
		c.storeWatermarks(ctx)
		return nil
	}
	r := refreshDone{kinds: kinds, written: c.wm.writtenOf(kinds), start: c.now()}
	out := make(chan refreshDone, 1) // never blocks the goroutine, also when run has returned
	wg.Go(func() {
		r.err = c.docs.Refresh(ctx, r.kinds...)
		out <- r
	})
	return out
}

// finishRefresh moves the watermarks of a refresh that succeeded as far as the writes made before it
// started, and stores the watermarks that moved. A failure leaves them for the next tick.
func (c *consumer) finishRefresh(ctx context.Context, r refreshDone) {
	if r.err != nil {
		c.log.Warn("refresh failed; watermarks wait for the next one", "err", r.err)
		return
	}
	c.since("refresh", r.start)
	c.wm.refreshedUpTo(r.written)
	c.storeWatermarks(ctx)
}

// storeWatermarks stores the watermarks that moved since stored. A failure leaves them for the next
// tick.
func (c *consumer) storeWatermarks(ctx context.Context) {
	ws := c.wm.toStore(false)
	if len(ws) == 0 {
		return
	}
	if err := c.progress.SaveWatermarks(ctx, ws); err != nil {
		c.log.Warn("cannot store watermarks; retried at the next tick", "err", err)
		return
	}
	c.wm.stored(ws)
}

// refreshWatermarks makes what was written searchable (one refresh of the indices written to) and
// stores the watermarks that moved, before it returns: the last refresh of run. A failure leaves
// them behind.
func (c *consumer) refreshWatermarks(ctx context.Context) {
	if kinds := c.wm.unrefreshed(); len(kinds) > 0 {
		r := refreshDone{kinds: kinds, written: c.wm.writtenOf(kinds), start: c.now()}
		r.err = c.docs.Refresh(ctx, kinds...)
		c.finishRefresh(ctx, r)
		return
	}
	c.storeWatermarks(ctx)
}

// storeUrgentWatermarks stores the watermarks that must be stored before the offsets of the batch
// that moved them are committed (their markers refreshed the indices already), retrying until done.
func (c *consumer) storeUrgentWatermarks(ctx context.Context) error {
	ws := c.wm.toStore(true)
	if len(ws) == 0 {
		return nil
	}
	bo := c.backoff()
	for {
		err := c.progress.SaveWatermarks(ctx, ws)
		if err == nil {
			c.wm.stored(ws)
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("store watermarks: %w", ctx.Err())
		}
		if err := c.wait(ctx, &bo, "cannot store watermarks", 0, err); err != nil {
			return err
		}
	}
}

// indexOf names the index of a kind, for the dead letters' headers and the logs.
func (c *consumer) indexOf(kind string) string { return mappings.IndexName(c.prefix, kind) }

// selection is what a PURGE marker removes.
func selection(ev *envelope.Event) store.Selection {
	return store.Selection{Cluster: ev.Cluster, Group: ev.Group, Kind: ev.Kind, Namespace: ev.Namespace}
}

func (c *consumer) wait(ctx context.Context, bo *wait.Backoff, msg string, n int, err error) error {
	delay := bo.Step()
	attrs := []any{"retryIn", delay.Round(time.Millisecond), "err", err}
	if n > 0 {
		attrs = append(attrs, "count", n)
	}
	c.log.Warn(msg+", retrying", attrs...)
	if err := lifecycle.Sleep(ctx, delay); err != nil {
		return fmt.Errorf("%s: %w", msg, err)
	}
	return nil
}
