package indexer

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/internal/stream"
)

func newDecodeConsumer() *consumer {
	return &consumer{metrics: newMetrics(), log: slog.New(slog.NewTextHandler(io.Discard, nil)), unversioned: map[store.Pair]bool{}}
}

// The consumer builds documents without checking the object's JSON again (buildDocument with
// objectValid), because envelope.Unmarshal refuses a message whose object is not valid JSON. This
// pins that: a broken object must be dead-lettered, never sent in a _bulk line.
func TestDecodeRefusesInvalidObject(t *testing.T) {
	const head = `{"v":1,"type":"ADDED","cluster":"c1","group":"","version":"v1","resource":"configmaps","kind":"ConfigMap",` +
		`"namespace":"ns","name":"a","uid":"u1","resourceVersion":"5","epoch":1,"observedAt":"2026-01-02T03:04:05Z","object":`
	const meta = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns","uid":"u1","resourceVersion":"5"}`
	for _, tc := range []struct{ name, object string }{
		{"raw line break in a string", meta + ",\"data\":{\"k\":\"line\nbreak\"}}"},
		{"trailing comma", meta + `,"data":{"k":"v",}}`},
		{"unquoted key", meta + `,data:{}}`},
		{"truncated", meta + `,"data":{"k":"v"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it := newDecodeConsumer().decode(stream.Message{Value: []byte(head + tc.object + "}")})
			if it.op != nil || it.dead == nil {
				t.Fatalf("decoded into an op (%v), want a dead letter", it.op != nil)
			}
			if it.dead.reason != ReasonMalformedEnvelope {
				t.Errorf("reason %q, want %q", it.dead.reason, ReasonMalformedEnvelope)
			}
		})
	}
	// The same object, valid, is indexed: the cases above fail for their JSON only.
	it := newDecodeConsumer().decode(stream.Message{Value: []byte(head + meta + `,"data":{"k":"v"}}}`)})
	if it.dead != nil || it.op == nil {
		t.Fatalf("valid event not decoded: %+v", it.dead)
	}
	if strings.Contains(string(it.op.Doc), "\n") {
		t.Errorf("document has a line break: %s", it.op.Doc)
	}
}

// fakeDocs refuses the ops of the uids in refuse, and the markers when rejectMarkers is set, as a
// backend does for good.
type fakeDocs struct {
	refuse        map[string]bool
	rejectMarkers bool
	written       []string // uids, in order
	calls         []string // "write N" and "sync N", in order
}

func (f *fakeDocs) Write(_ context.Context, ops []store.Op) ([]store.Failure, error) {
	f.calls = append(f.calls, fmt.Sprintf("write %d", len(ops)))
	var failed []store.Failure
	for i, o := range ops {
		if f.refuse[o.UID] {
			failed = append(failed, store.Failure{Pos: i, Err: "mapper_parsing_exception: failed to parse " + o.UID})
			continue
		}
		f.written = append(f.written, o.UID)
	}
	return failed, nil
}

func (f *fakeDocs) DeleteOlder(context.Context, store.ListScope, int64, store.GoneFunc) (int64, error) {
	if f.rejectMarkers {
		return 0, fmt.Errorf("%w: POST /kubernetes-pod/_search: 400 parsing_exception", store.ErrRejected)
	}
	return 0, nil
}

func (f *fakeDocs) DeleteOlderEach(ctx context.Context, syncs []store.Sync, report store.GoneFunc) ([]int64, []error) {
	f.calls = append(f.calls, fmt.Sprintf("sync %d", len(syncs)))
	deleted, errs := make([]int64, len(syncs)), make([]error, len(syncs))
	for i, sy := range syncs {
		deleted[i], errs[i] = f.DeleteOlder(ctx, sy.Scope, sy.Epoch, report)
	}
	return deleted, errs
}

func (f *fakeDocs) DeleteAll(context.Context, store.Selection, store.GoneFunc) (int64, error) {
	return 0, nil
}
func (f *fakeDocs) Refresh(context.Context, ...string) error { return nil }
func (f *fakeDocs) Priors(_ context.Context, ops []store.Op) ([]store.Prior, error) {
	return make([]store.Prior, len(ops)), nil
}

type fakeProgress struct{}

func (fakeProgress) LoadWatermarks(context.Context, []store.Pair) (map[store.Pair]*store.Watermark, error) {
	return map[store.Pair]*store.Watermark{}, nil
}
func (fakeProgress) SaveWatermarks(context.Context, []store.Watermark) error { return nil }
func (fakeProgress) SelectionWatermarks(context.Context, store.Selection) ([]store.Watermark, error) {
	return nil, nil
}
func (fakeProgress) DeleteWatermarks(context.Context, []store.Pair) error { return nil }

type fakeKafka struct{ written, committed []stream.Message }

func (f *fakeKafka) Fetch(ctx context.Context) (stream.Message, error) {
	<-ctx.Done()
	return stream.Message{}, ctx.Err()
}

func (f *fakeKafka) Commit(_ context.Context, msgs ...stream.Message) error {
	f.committed = append(f.committed, msgs...)
	return nil
}

func (f *fakeKafka) Write(_ context.Context, msgs ...stream.Message) error {
	f.written = append(f.written, msgs...)
	return nil
}

// TestApplyDeadLettersByPosition: the backend names the ops it will never accept by their position
// among the ops written; each becomes the dead letter of its own event, also when events without an
// op (undecodable ones, markers) sit between them. A marker the backend rejects for good is
// dead-lettered too, and the whole batch is committed.
func TestApplyDeadLettersByPosition(t *testing.T) {
	docs := &fakeDocs{refuse: map[string]bool{"u2": true, "u4": true}, rejectMarkers: true}
	k := &fakeKafka{}
	c := newDecodeConsumer()
	c.reader, c.dlq, c.docs, c.progress, c.wm = k, k, docs, fakeProgress{}, newWatermarks()
	c.now, c.backoff, c.next = time.Now, defaultBackoff, map[int]int64{}
	var msgs []stream.Message
	for i, e := range []any{
		objectEvent(envelope.Added, "m1", "Pod", "pods", "shop", "p1", "u1", "10", 2),
		stream.Message{Value: []byte(`{"v":1,"type":"ADDED"`)},
		objectEvent(envelope.Added, "m1", "Pod", "pods", "shop", "p2", "u2", "11", 2),
		objectEvent(envelope.Added, "m1", "Pod", "pods", "shop", "p3", "u3", "12", 2),
		marker(envelope.Sync, "m1", "Pod", "pods", "", 2, "12"),
		objectEvent(envelope.Modified, "m1", "Pod", "pods", "shop", "p4", "u4", "13", 2),
	} {
		m, ok := e.(stream.Message)
		if !ok {
			v, err := e.(*envelope.Event).Marshal()
			if err != nil {
				t.Fatal(err)
			}
			m = stream.Message{Value: v}
		}
		m.Topic, m.Offset = "events", int64(i)
		msgs = append(msgs, m)
	}
	if err := c.apply(t.Context(), c.decodeBatch(msgs)); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(docs.written, ","); got != "u1,u3" {
		t.Errorf("written %s, want u1,u3", got)
	}
	var letters []string
	for _, m := range k.written {
		letters = append(letters, header(m, stream.HeaderOffset)+":"+header(m, stream.HeaderReason)+":"+header(m, stream.HeaderIndex))
		if header(m, stream.HeaderReason) == ReasonRejected && !bytes.Equal(m.Value, msgs[mustAtoi(t, header(m, stream.HeaderOffset))].Value) {
			t.Errorf("dead letter of offset %s carries another event", header(m, stream.HeaderOffset))
		}
	}
	want := "1:malformed-envelope:,2:rejected:kubernetes-pod,4:rejected:kubernetes-pod,5:rejected:kubernetes-pod"
	if got := strings.Join(letters, ","); got != want {
		t.Errorf("dead letters %s, want %s", got, want)
	}
	if len(k.committed) != 1 || k.committed[0].Offset != 5 {
		t.Errorf("committed %v, want offset 5", k.committed)
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestApplySkipsSupersededEpochs: once an event of a newer epoch of a scope was seen (a new list),
// events of older epochs (a collector the new one replaced, still publishing) are not written,
// whatever their resourceVersions; other scopes are not affected.
func TestApplySkipsSupersededEpochs(t *testing.T) {
	docs, k, _ := applyEvents(t,
		objectEvent(envelope.Added, "m1", "Pod", "pods", "shop", "p1", "u1", "10", 2),
		objectEvent(envelope.Added, "m1", "Pod", "pods", "shop", "p1", "u1", "5", 3),     // the new list
		objectEvent(envelope.Modified, "m1", "Pod", "pods", "shop", "p1", "u1", "20", 2), // the old collector, later
		objectEvent(envelope.Added, "m2", "Pod", "pods", "shop", "p1", "u9", "30", 2),    // another cluster
		objectEvent(envelope.Modified, "m1", "Pod", "pods", "shop", "p1", "u1", "6", 3),
	)
	if got := strings.Join(docs.written, ","); got != "u1,u1,u9,u1" {
		t.Errorf("written %s, want u1,u1,u9,u1 (the old epoch's event after the new list skipped)", got)
	}
	if len(k.written) != 0 {
		t.Errorf("a superseded event is not a dead letter; got %d letters", len(k.written))
	}
}

// A batch's object events are written in one request, then its SYNC markers collect their garbage
// together; an event after a SYNC of a newer epoch than its own is superseded even when the list
// before the marker was consumed elsewhere (its epoch known only from the marker), and each SYNC
// completes its list's watermark.
func TestApplyCollectsSyncsAfterTheRun(t *testing.T) {
	docs, _, c := applyEvents(t,
		objectEvent(envelope.Added, "m1", "Pod", "pods", "shop", "p1", "u1", "10", 3),
		marker(envelope.Sync, "m1", "Pod", "pods", "", 3, "12"),
		marker(envelope.Sync, "m2", "Pod", "pods", "", 5, "40"),                          // its list came before this batch
		objectEvent(envelope.Modified, "m2", "Pod", "pods", "shop", "p9", "u9", "41", 4), // an older list's, later
		objectEvent(envelope.Modified, "m1", "Pod", "pods", "shop", "p1", "u1", "13", 3),
		objectEvent(envelope.Added, "m3", "Pod", "pods", "shop", "p3", "u3", "7", 1),
		marker(envelope.Sync, "m3", "Pod", "pods", "", 1, "8"),
	)
	if got := strings.Join(docs.calls, ", "); got != "write 3, sync 3" {
		t.Errorf("calls: %s; want write 3, sync 3", got)
	}
	if got := strings.Join(docs.written, ","); got != "u1,u1,u3" {
		t.Errorf("written %s, want u1,u1,u3 (m2's older epoch after its SYNC skipped)", got)
	}
	for cluster, want := range map[string]int64{"m1": 13, "m2": 40, "m3": 8} {
		s := c.wm.pairs[store.Pair{Cluster: cluster, Resource: "pods"}].scopes[""]
		if s == nil || !s.Synced || s.Listing || s.ResourceVersion > want || s.written != want {
			t.Errorf("%s: watermark %+v; want synced, not listing, written up to %d", cluster, s, want)
		}
	}
}

// applyEvents applies the events as one batch of partition 0 to a consumer over fakes, and returns
// the fakes and the consumer.
func applyEvents(t *testing.T, evs ...*envelope.Event) (*fakeDocs, *fakeKafka, *consumer) {
	t.Helper()
	docs := &fakeDocs{}
	k := &fakeKafka{}
	c := newDecodeConsumer()
	c.reader, c.dlq, c.docs, c.progress, c.wm = k, k, docs, fakeProgress{}, newWatermarks()
	c.now, c.backoff, c.next = time.Now, defaultBackoff, map[int]int64{}
	msgs := make([]stream.Message, len(evs))
	for i, ev := range evs {
		v, err := ev.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		msgs[i] = stream.Message{Topic: "events", Offset: int64(i), Value: v}
	}
	if err := c.apply(t.Context(), c.decodeBatch(msgs)); err != nil {
		t.Fatal(err)
	}
	return docs, k, c
}

// decodeBatch decodes the messages of a batch. As assemble does, one by one.
func (c *consumer) decodeBatch(msgs []stream.Message) *decodedBatch {
	items := make([]*item, len(msgs))
	for i, m := range msgs {
		items[i] = c.decode(m)
	}
	return &decodedBatch{msgs: msgs, items: items}
}

// feedReader hands over the messages sent to it and reports the offsets committed.
type feedReader struct {
	msgs      chan stream.Message
	committed chan int64
}

func (f *feedReader) Fetch(ctx context.Context) (stream.Message, error) {
	select {
	case m := <-f.msgs:
		return m, nil
	case <-ctx.Done():
		return stream.Message{}, ctx.Err()
	}
}

func (f *feedReader) Commit(_ context.Context, msgs ...stream.Message) error {
	for _, m := range msgs {
		f.committed <- m.Offset
	}
	return nil
}

// heldRefresh is fakeDocs whose first refresh waits for release.
type heldRefresh struct {
	*fakeDocs
	entered, release chan struct{}
	once             sync.Once
}

func (h *heldRefresh) Refresh(ctx context.Context, _ ...string) error {
	h.once.Do(func() {
		close(h.entered)
		<-h.release
	})
	return ctx.Err()
}

// savedRVs records the resourceVersions of the watermarks stored, in order.
type savedRVs struct {
	fakeProgress
	mu  sync.Mutex
	rvs []int64
}

func (s *savedRVs) SaveWatermarks(_ context.Context, ws []store.Watermark) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range ws {
		s.rvs = append(s.rvs, w.ResourceVersion)
	}
	return nil
}

func (s *savedRVs) last() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.rvs) == 0 {
		return -1
	}
	return s.rvs[len(s.rvs)-1]
}

// TestRunWritesWhileRefreshing: the periodic refresh does not hold the batches back: an event that
// arrives while a refresh is in flight is written and committed before the refresh ends, and the
// watermark that refresh stores is what was written when it began, not the later event.
func TestRunWritesWhileRefreshing(t *testing.T) {
	docs := &heldRefresh{fakeDocs: &fakeDocs{}, entered: make(chan struct{}), release: make(chan struct{})}
	r := &feedReader{msgs: make(chan stream.Message, 10), committed: make(chan int64, 10)}
	saved := &savedRVs{}
	c := newDecodeConsumer()
	c.reader, c.dlq, c.docs, c.progress, c.wm = r, &fakeKafka{}, docs, saved, newWatermarks()
	c.now, c.backoff, c.next = time.Now, defaultBackoff, map[int]int64{}
	c.batchSize, c.batchBytes, c.batchInterval, c.wmInterval = 10, 1<<20, time.Millisecond, 5*time.Millisecond
	offset := int64(0)
	send := func(ev *envelope.Event) int64 {
		v, err := ev.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		offset++
		r.msgs <- stream.Message{Topic: "events", Offset: offset, Value: v}
		return offset
	}
	committed := func(want int64) {
		t.Helper()
		for {
			select {
			case o := <-r.committed:
				if o == want {
					return
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("offset %d not committed", want)
			}
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.run(ctx, t.Context()) }()

	marker := ev(envelope.Sync, "", 100, "10")
	marker.V, marker.ObservedAt = envelope.Version, time.Now()
	count := 0
	marker.Count = &count
	committed(send(marker))
	committed(send(objectEvent(envelope.Modified, "m1", "Pod", "pods", "shop", "p1", "u1", "12", 100)))
	select {
	case <-docs.entered: // the tick's refresh of the write at 12 is in flight
	case <-time.After(10 * time.Second):
		saved.mu.Lock()
		t.Fatalf("no refresh started; written %v, stored %v", docs.written, saved.rvs)
	}
	committed(send(objectEvent(envelope.Modified, "m1", "Pod", "pods", "shop", "p2", "u2", "15", 100))) // would wait for the refresh if it were in line
	close(docs.release)
	deadline := time.Now().Add(10 * time.Second)
	for saved.last() != 15 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	saved.mu.Lock()
	defer saved.mu.Unlock()
	// 10 (the SYNC, urgent), then 12 (the held refresh, begun before 15 was written), then 15.
	if want := []int64{10, 12, 15}; !slices.Equal(saved.rvs, want) {
		t.Errorf("watermarks stored %v, want %v", saved.rvs, want)
	}
}
