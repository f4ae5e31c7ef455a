package collector

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/stream"
)

// An event over the limit is published in a smaller form, annotated, and counted by cluster,
// resource and outcome; nothing is dead-lettered or reported as unpublished, and the events around
// it go on. Sizes are as kafka-go counts them (key, value, headers, framing) against a 1 MiB limit;
// an older check compared the value alone, so "value a few bytes under" was sent, refused, and
// retried forever. Before the smaller forms, every event over the limit was dropped, and the
// index kept the object's older state.
func TestPublisherTruncatesEventsOverTheLimit(t *testing.T) {
	const limit = 1 << 20
	tests := []struct {
		name      string
		size      func(key int) int // stream.Message.Size of the middle event
		truncated bool
	}{
		{"exactly the limit", func(int) int { return limit }, false},
		{"one byte over", func(int) int { return limit + 1 }, true},
		{"value a few bytes under the limit", func(key int) int { return limit - 10 + key + 23 }, true},
		{"value over the limit", func(int) int { return 2 * limit }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newPubHarness(t)
			p, logs := k.publisher(t, publisherOptions{MaxMessageBytes: limit})
			var reported []droppedEvent
			p.dropped = func(ev droppedEvent) { reported = append(reported, ev) }
			big := sizedPubEvent(t, "member1", "big", tt.size(len("member1//configmaps")), false)
			evs := []*envelope.Event{pubEvent("member1", "before", 0), big, pubEvent("member2", "after", 0)}
			for _, ev := range evs {
				if err := p.Publish(t.Context(), ev); err != nil {
					t.Fatal(err)
				}
			}
			p.close()
			k.waitRun(t, 30*time.Second)

			msgs := k.read(t, "events")
			if got := eventNames(t, msgs); !slices.Equal(got, []string{"before", "big", "after"}) {
				t.Fatalf("topic holds %v, want before, big, after", got)
			}
			if letters := k.read(t, "events.dlq"); len(letters) != 0 || len(reported) != 0 {
				t.Errorf("%d dead letters, %v reported: a published event is neither", len(letters), reported)
			}
			published := decoded(t, msgs[1])
			if n := msgs[1].Size(); n > limit {
				t.Errorf("published %d bytes, over the limit", n)
			}
			if !tt.truncated {
				if !bytes.Equal(published.Object, big.Object) || oversizedCounts(t, p) != nil {
					t.Fatalf("an event within the limit was changed or counted: oversized %v", oversizedCounts(t, p))
				}
				return
			}
			if published.Type != envelope.Added || annotation(t, published, TruncatedAnnotation) != "true" ||
				annotation(t, published, TruncatedFieldsAnnotation) != "data" || hasField(t, published, "data") {
				t.Errorf("published %s %s, want an ADDED without data, annotated", published.Type, published.Object)
			}
			if got := oversizedCounts(t, p); !onlyCount(got, "member1/configmaps/truncated", 1) {
				t.Errorf("oversized events by cluster/resource/outcome = %v, want member1/configmaps/truncated: 1", got)
			}
			for _, key := range []string{`"cluster":"member1"`, `"resource":"configmaps"`, `"namespace":"shop"`, `"name":"big"`, `"bytes":`, `"limit":1048576`, `"form":"truncated"`} {
				if !strings.Contains(logs.String(), key) {
					t.Errorf("warning log lacks %s:\n%s", key, logs)
				}
			}
		})
	}
}

// A topic whose max.message.bytes is below the flag: the publisher learns the topic's limit at start
// and makes smaller what exceeds it before sending; an event just under it is published whole. An
// older publisher sent the large event (incompressible, so lz4 does not save it), got
// MESSAGE_TOO_LARGE for the partition and retried it forever.
func TestPublisherLearnsTheTopicLimit(t *testing.T) {
	const topicLimit = 64 << 10
	k := newPubHarness(t)
	if err := k.c.CreateTopic("events", 1, map[string]string{"max.message.bytes": fmt.Sprint(topicLimit)}); err != nil {
		t.Fatal(err)
	}
	p, logs := k.publisher(t, publisherOptions{MaxMessageBytes: 1 << 20})
	big := sizedPubEvent(t, "member1", "big", 100<<10, true)
	evs := []*envelope.Event{pubEvent("member1", "before", 0), big, sizedPubEvent(t, "member1", "just-under", topicLimit-100, false), pubEvent("member1", "after", 0)}
	for _, ev := range evs {
		if err := p.Publish(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
	}
	p.close()
	k.waitRun(t, 30*time.Second)
	msgs := k.read(t, "events")
	if got, want := eventNames(t, msgs), []string{"before", "big", "just-under", "after"}; !slices.Equal(got, want) {
		t.Fatalf("topic holds %v, want %v", got, want)
	}
	if annotation(t, decoded(t, msgs[1]), TruncatedAnnotation) != "true" || msgs[1].Size() > topicLimit {
		t.Errorf("the big event was not truncated to the topic's limit: %d bytes", msgs[1].Size())
	}
	if letters := k.read(t, "events.dlq"); len(letters) != 0 {
		t.Errorf("%d dead letters for a published event", len(letters))
	}
	if !strings.Contains(logs.String(), `"topicLimit":65536`) {
		t.Errorf("no log of the lower topic limit:\n%s", logs)
	}
	if !strings.Contains(logs.String(), "limit of 65536 bytes") {
		t.Errorf("the event was not made smaller before it was sent:\n%s", logs)
	}
}

// A limit lowered after start (an operator altering the topic, a broker with a smaller
// message.max.bytes): the broker refuses the whole partition batch and does not say which message is
// too large. The publisher writes that batch one event at a time, in order, publishes the one refused
// alone in a smaller form, and goes on with the others.
func TestPublisherIsolatesWhatTheBrokerRefuses(t *testing.T) {
	k := newPubHarness(t)
	p, _ := k.publisher(t, publisherOptions{MaxMessageBytes: 1 << 20})
	if err := p.Publish(t.Context(), pubEvent("member1", "first", 0)); err != nil {
		t.Fatal(err)
	}
	k.waitFor(t, "events", 1)
	resp, err := k.client().AlterConfigs(t.Context(), &kafka.AlterConfigsRequest{Resources: []kafka.AlterConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: "events",
		Configs: []kafka.AlterConfigRequestConfig{{Name: "max.message.bytes", Value: fmt.Sprint(64 << 10)}},
	}}})
	if err == nil {
		err = resp.Errors[kafka.AlterConfigsResponseResource{Type: int8(kafka.ResourceTypeTopic), Name: "events"}]
	}
	if err != nil {
		t.Fatal(err)
	}
	// Random text: lz4 cannot shrink it under the limit.
	big := sizedPubEvent(t, "member1", "big", 200<<10, true)
	evs := []*envelope.Event{pubEvent("member1", "a", 1), pubEvent("member2", "b", 1), big, pubEvent("member1", "c", 1), pubEvent("member2", "d", 1)}
	for _, ev := range evs {
		if err := p.Publish(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
	}
	p.close()
	k.waitRun(t, 30*time.Second)
	msgs := k.read(t, "events")
	assertKeyOrder(t, msgs, []string{"first", "a", "b", "big", "c", "d"})
	for _, m := range msgs {
		if ev := decoded(t, m); ev.Name == "big" && (annotation(t, ev, TruncatedAnnotation) != "true" || m.Size() > 64<<10) {
			t.Errorf("the big event was published in %d bytes, not truncated under the broker's limit", m.Size())
		}
	}
	if letters := k.read(t, "events.dlq"); len(letters) != 0 {
		t.Errorf("%d dead letters for a published event", len(letters))
	}
	if got := oversizedCounts(t, p); !onlyCount(got, "member1/configmaps/truncated", 1) {
		t.Errorf("oversized events by cluster/resource/outcome = %v, want member1/configmaps/truncated: 1", got)
	}
}

// kafka-go writes one partition's messages in several produce requests when they exceed BatchBytes,
// one after the other, and a request that fails (after MaxAttempts) does not stop the next: the
// partition holds the later events first. The old retry sent only the failed ones, after them; a
// PURGE could land after the ADDEDs that follow it. Here every event's last copy must follow the last
// copy of every event of its key before it, and the first produce request must have been a part of
// the write (else the test proves nothing).
func TestPublisherRetryKeepsPartitionOrder(t *testing.T) {
	k := newPubHarness(t)
	var requests, failed atomic.Int32
	var firstRecords atomic.Int32
	k.c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.c.KeepControl()
		preq := req.(*kmsg.ProduceRequest)
		if len(preq.Topics) != 1 || preq.Topics[0].Topic != "events" {
			return nil, nil, false
		}
		if requests.Add(1) == 1 {
			var b kmsg.RecordBatch
			if err := b.ReadFrom(preq.Topics[0].Partitions[0].Records); err == nil {
				firstRecords.Store(b.NumRecords)
			}
		}
		// The first produce request and its two retries inside kafka-go (MaxAttempts 3) fail with a
		// retriable error, as while a partition's replicas catch up; the later requests go through.
		if failed.Load() >= 3 {
			return nil, nil, false
		}
		failed.Add(1)
		resp := preq.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range preq.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.NotEnoughReplicas.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	// One partition, so both keys share it; a 4 KiB limit makes kafka-go split the 2 KiB events into
	// produce requests of one or two. All are buffered before run starts: they form one write.
	p, _ := k.newPublisher(t, publisherOptions{MaxMessageBytes: 4 << 10, Buffer: 64, Batch: 64})
	var evs []*envelope.Event
	for i := range 12 {
		evs = append(evs, sizedPubEvent(t, []string{"member1", "member2"}[i%2], fmt.Sprintf("cm-%02d", i), 2<<10, false))
	}
	want := publishAll(t, p, evs)
	k.start(t, p)
	p.close()
	k.waitRun(t, 30*time.Second)
	if n := firstRecords.Load(); n == 0 || n >= 12 {
		t.Fatalf("the first produce request held %d of the 12 events; the write was not split", n)
	}
	assertKeyOrder(t, k.read(t, "events"), want)
}

// The buffer is bounded in bytes, whatever room its count leaves: while Kafka holds a write,
// Publish blocks once the events not yet acknowledged (the write's included) fill BufferBytes, and a
// write takes at most half of it. Every event then goes out in the order handed in, an event larger
// than the whole buffer included (alone).
func TestPublisherBoundsBytesInFlight(t *testing.T) {
	k := newPubHarness(t)
	held := make(chan struct{})
	arrived := make(chan int32, 100)
	k.c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.c.KeepControl()
		preq := req.(*kmsg.ProduceRequest)
		if len(preq.Topics) != 1 || preq.Topics[0].Topic != "events" {
			return nil, nil, false
		}
		var b kmsg.RecordBatch
		if err := b.ReadFrom(preq.Topics[0].Partitions[0].Records); err == nil {
			arrived <- b.NumRecords
		}
		<-held // kfake runs control functions one at a time: every write waits here
		return nil, nil, false
	})
	const size = 2 << 10
	p, _ := k.publisher(t, publisherOptions{MaxMessageBytes: 1 << 20, Buffer: 100, BufferBytes: 5 << 10, Batch: 100})
	var want []string
	publish := func(ctx context.Context, ev *envelope.Event) error {
		err := p.Publish(ctx, ev)
		if err == nil {
			want = append(want, ev.Name)
		}
		return err
	}
	if err := publish(t.Context(), sizedPubEvent(t, "member1", "cm-0", size, false)); err != nil {
		t.Fatal(err)
	}
	if n := <-arrived; n != 1 {
		t.Fatalf("the first write holds %d events, want 1", n)
	}
	// cm-0 is being written; cm-1 fits beside it, cm-2 does not, though 98 more events would.
	if err := publish(t.Context(), sizedPubEvent(t, "member1", "cm-1", size, false)); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if err := publish(short, sizedPubEvent(t, "member1", "cm-2", size, false)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Publish beyond the bytes in flight: %v, want it blocked until its context ends", err)
	}
	close(held)
	for i := 3; i < 9; i++ {
		if err := publish(t.Context(), sizedPubEvent(t, "member1", fmt.Sprintf("cm-%d", i), size, false)); err != nil {
			t.Fatal(err)
		}
	}
	if err := publish(t.Context(), sizedPubEvent(t, "member1", "larger-than-the-buffer", 8<<10, false)); err != nil {
		t.Fatal(err)
	}
	if err := publish(t.Context(), sizedPubEvent(t, "member1", "cm-9", size, false)); err != nil {
		t.Fatal(err)
	}
	p.close()
	k.waitRun(t, 30*time.Second)
	close(arrived)
	for n := range arrived {
		if n != 1 {
			t.Errorf("a write held %d events of %d bytes; half of the 5 KiB buffer holds 1", n, size)
		}
	}
	if got := eventNames(t, k.read(t, "events")); !slices.Equal(got, want) {
		t.Fatalf("the topic holds %v, want %v", got, want)
	}
}

// Writes are filled up to their size bound, in order: an event that would make a write too large
// begins the next one.
func TestPublisherBatchesBySize(t *testing.T) {
	k := newPubHarness(t)
	var records []int32
	var mu sync.Mutex
	k.c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.c.KeepControl()
		preq := req.(*kmsg.ProduceRequest)
		if len(preq.Topics) == 1 && preq.Topics[0].Topic == "events" {
			var b kmsg.RecordBatch
			if err := b.ReadFrom(preq.Topics[0].Partitions[0].Records); err == nil {
				mu.Lock()
				records = append(records, b.NumRecords)
				mu.Unlock()
			}
		}
		return nil, nil, false
	})
	// Buffered before run starts: the writes are cut by size alone. 16 KiB of buffer, writes of
	// 8 KiB: three events of 2.5 KiB each, then a fourth begins the next write.
	p, _ := k.newPublisher(t, publisherOptions{MaxMessageBytes: 1 << 20, Buffer: 100, BufferBytes: 16 << 10, Batch: 100})
	var evs []*envelope.Event
	for i := range 6 {
		evs = append(evs, sizedPubEvent(t, "member1", fmt.Sprintf("cm-%d", i), 5<<9, false))
	}
	want := publishAll(t, p, evs)
	k.start(t, p)
	p.close()
	k.waitRun(t, 30*time.Second)
	if got := eventNames(t, k.read(t, "events")); !slices.Equal(got, want) {
		t.Fatalf("the topic holds %v, want %v", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(records, []int32{3, 3}) {
		t.Errorf("writes of %v events, want [3 3]", records)
	}
}

// flush returns once everything handed in before it is acknowledged or dropped, and with ctx's error
// while Kafka does not answer; close still ends run after a flush.
func TestPublisherFlush(t *testing.T) {
	t.Run("written and truncated events", func(t *testing.T) {
		k := newPubHarness(t)
		p, _ := k.publisher(t, publisherOptions{MaxMessageBytes: 1 << 20, Buffer: 4, Batch: 2})
		var evs []*envelope.Event
		for i := range 9 {
			ev := pubEvent("member1", fmt.Sprintf("cm-%d", i), 0)
			if i == 4 {
				ev = sizedPubEvent(t, "member1", "big", 2<<20, false)
			}
			evs = append(evs, ev)
		}
		want := publishAll(t, p, evs)
		if err := p.flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		// No waiting: flush promised they are in Kafka.
		if got := eventNames(t, k.read(t, "events")); !slices.Equal(got, want) {
			t.Fatalf("after flush the topic holds %v, want %v", got, want)
		}
		if got := oversizedCounts(t, p); !onlyCount(got, "member1/configmaps/truncated", 1) {
			t.Fatalf("after flush oversized = %v, want the truncated event counted", got)
		}
		if err := p.flush(t.Context()); err != nil {
			t.Fatalf("flush of nothing: %v", err)
		}
		if err := p.Publish(t.Context(), pubEvent("member1", "last", 0)); err != nil {
			t.Fatal(err)
		}
		p.close()
		k.waitRun(t, 30*time.Second)
		if got := eventNames(t, k.read(t, "events")); len(got) != len(want)+1 || got[len(got)-1] != "last" {
			t.Fatalf("after close the topic holds %v", got)
		}
	})
	t.Run("Kafka away", func(t *testing.T) {
		p := newPublisher(stream.NewClient([]string{"127.0.0.1:1"}, stream.Connection{}, nil), publisherOptions{Topic: "events", Partitions: 1,
			MaxMessageBytes: 1 << 20, Buffer: 4, Batch: 4}, slog.New(slog.DiscardHandler))
		p.metrics = newMetrics(func() float64 { return 0 })
		ctx, abort := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- p.run(ctx) }()
		if err := p.Publish(t.Context(), pubEvent("member1", "a", 0)); err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		if err := p.flush(short); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("flush while Kafka is away: %v, want the deadline", err)
		}
		abort()
		<-done
		if err := p.flush(t.Context()); err == nil {
			t.Error("flush after run was aborted returned nil")
		}
	})
}

// pubHarness is an in-process Kafka (kfake) with a publisher running against it.
type pubHarness struct {
	c       *kfake.Cluster
	brokers []string
	stream  stream.Broker // the publisher's, and the harness's to read with
	runDone chan error
}

func newPubHarness(t *testing.T) *pubHarness {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	sc := stream.NewClient(c.ListenAddrs(), stream.Connection{}, nil)
	t.Cleanup(sc.Close)
	return &pubHarness{c: c, brokers: c.ListenAddrs(), stream: sc, runDone: make(chan error, 1)}
}

func (k *pubHarness) client() *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(k.brokers...), Timeout: 10 * time.Second}
}

// newPublisher builds a publisher on topic "events" (one partition) logging JSON into the returned
// buffer; start runs it.
func (k *pubHarness) newPublisher(t *testing.T, o publisherOptions) (*publisher, *logBuffer) {
	t.Helper()
	o.Topic, o.Partitions = "events", 1
	if o.Buffer == 0 {
		o.Buffer, o.Batch = 16, 16
	}
	logs := &logBuffer{}
	p := newPublisher(k.stream, o, slog.New(slog.NewJSONHandler(logs, nil)))
	p.metrics = newMetrics(func() float64 { return float64(len(p.queue)) })
	t.Cleanup(func() { _ = p.writer.Close() })
	return p, logs
}

func (k *pubHarness) publisher(t *testing.T, o publisherOptions) (*publisher, *logBuffer) {
	t.Helper()
	p, logs := k.newPublisher(t, o)
	k.start(t, p)
	return p, logs
}

func (k *pubHarness) start(t *testing.T, p *publisher) {
	ctx, abort := context.WithCancel(t.Context())
	go func() { k.runDone <- p.run(ctx) }()
	t.Cleanup(func() {
		abort()
		select {
		case <-k.runDone:
		case <-time.After(10 * time.Second):
		}
	})
}

// waitRun waits for run to return after close: every event written or dropped.
func (k *pubHarness) waitRun(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case err := <-k.runDone:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		k.runDone <- nil // for the cleanup
	case <-time.After(timeout):
		t.Fatalf("the publisher did not finish within %s: it is stuck on an event", timeout)
	}
}

// read returns what partition 0 of topic holds.
func (k *pubHarness) read(t *testing.T, topic string) []stream.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	msgs, err := k.stream.ReadPartition(ctx, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

func (k *pubHarness) waitFor(t *testing.T, topic string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for len(k.read(t, topic)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s never held %d messages", topic, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pubEvent is an ADDED ConfigMap; pad adds that many KiB to it.
func pubEvent(cluster, name string, pad int) *envelope.Event {
	obj, _ := json.Marshal(map[string]any{"metadata": map[string]string{"name": name, "namespace": "shop"}, "data": map[string]string{"pad": strings.Repeat("x", pad<<10)}})
	return &envelope.Event{V: envelope.Version, Type: envelope.Added, Cluster: cluster, Version: "v1", Resource: "configmaps",
		Kind: "ConfigMap", Namespace: "shop", Name: name, UID: "uid-" + name, ResourceVersion: "1", Epoch: 1, Object: obj}
}

// publishAll publishes evs in order and returns their names, the order the topic must hold them in.
func publishAll(t *testing.T, p *publisher, evs []*envelope.Event) []string {
	t.Helper()
	names := make([]string, len(evs))
	for i, ev := range evs {
		names[i] = ev.Name
		if err := p.Publish(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
	}
	return names
}

// sizedPubEvent is a ConfigMap event whose Kafka message is exactly size bytes by Message.Size; random
// makes its padding incompressible.
func sizedPubEvent(t *testing.T, cluster, name string, size int, random bool) *envelope.Event {
	t.Helper()
	ev := pubEvent(cluster, name, 0)
	base := pubEventSize(t, ev)
	if size < base {
		t.Fatalf("an event of %d bytes cannot be made smaller than %d", size, base)
	}
	pad := []byte(strings.Repeat("x", size-base))
	if random {
		raw := make([]byte, len(pad)*3/4)
		_, _ = rand.Read(raw)
		base64.RawURLEncoding.Encode(pad, raw) // URL-safe: nothing JSON escapes; the tail stays x

	}
	ev.Object, _ = json.Marshal(map[string]any{"metadata": map[string]string{"name": name, "namespace": "shop"}, "data": map[string]string{"pad": string(pad)}})
	if got := pubEventSize(t, ev); got != size {
		t.Fatalf("sized event is %d bytes, want %d", got, size)
	}
	return ev
}

func pubEventSize(t *testing.T, ev *envelope.Event) int {
	t.Helper()
	v, err := ev.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	m := stream.Message{Key: ev.Key(), Value: v}
	return m.Size()
}

func eventNames(t *testing.T, msgs []stream.Message) []string {
	t.Helper()
	var out []string
	for _, m := range msgs {
		ev, err := envelope.Unmarshal(m.Value)
		if err != nil {
			t.Fatalf("offset %d: %v", m.Offset, err)
		}
		out = append(out, ev.Name)
	}
	return out
}

// assertKeyOrder checks that every event of want is in msgs and that, per key, the last copies are in
// want's order: what an idempotent consumer applying the log in order ends with.
func assertKeyOrder(t *testing.T, msgs []stream.Message, want []string) {
	t.Helper()
	last := map[string]int{}
	keyOf := map[string]string{}
	var log []string
	for i, m := range msgs {
		ev, err := envelope.Unmarshal(m.Value)
		if err != nil {
			t.Fatalf("offset %d: %v", m.Offset, err)
		}
		last[ev.Name], keyOf[ev.Name] = i, string(m.Key)
		log = append(log, ev.Name)
	}
	for i, name := range want {
		if _, ok := last[name]; !ok {
			t.Fatalf("%s missing from the topic: %v", name, log)
		}
		for _, before := range want[:i] {
			if keyOf[before] == keyOf[name] && last[before] > last[name] {
				t.Fatalf("the last %s follows the last %s (same key %s): the partition holds %v", before, name, keyOf[name], log)
			}
		}
	}
}

func assertTooLargeLetter(t *testing.T, letters []stream.Message, ev *envelope.Event) {
	t.Helper()
	if len(letters) != 1 {
		t.Fatalf("dead-letter topic holds %d messages, want 1", len(letters))
	}
	m := letters[0]
	if string(m.Key) != string(ev.Key()) {
		t.Errorf("dead letter key %q, want the event's %q", m.Key, ev.Key())
	}
	if m.Value != nil {
		t.Errorf("dead letter carries a %d-byte value, want none", len(m.Value))
	}
	h := map[string]string{}
	for _, x := range m.Headers {
		h[x.Key] = string(x.Value)
	}
	for k, v := range map[string]string{
		"kubesearch-dlq-reason": "message-too-large", "kubesearch-dlq-topic": "events", "kubesearch-dlq-value-dropped": "true",
		"kubesearch-dlq-namespace": ev.Namespace, "kubesearch-dlq-name": ev.Name, "kubesearch-dlq-uid": ev.UID,
	} {
		if h[k] != v {
			t.Errorf("dead letter header %s = %q, want %q", k, h[k], v)
		}
	}
	if !strings.Contains(h["kubesearch-dlq-error"], "bytes") {
		t.Errorf("dead letter error %q does not say the size", h["kubesearch-dlq-error"])
	}
	if _, err := time.Parse(time.RFC3339, h["kubesearch-dlq-time"]); err != nil {
		t.Errorf("dead letter time: %v", err)
	}
}

// oversizedCounts is the oversized-events counter by "cluster/resource/outcome"; nil when nothing
// was counted.
func oversizedCounts(t *testing.T, p *publisher) map[string]float64 {
	t.Helper()
	families, err := p.metrics.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]float64
	for _, f := range families {
		if f.GetName() != "kubesearch_collector_oversized_events_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if v := m.GetCounter().GetValue(); v != 0 {
				if out == nil {
					out = map[string]float64{}
				}
				out[labels["cluster"]+"/"+labels["resource"]+"/"+labels["outcome"]] += v
			}
		}
	}
	return out
}

func onlyCount(m map[string]float64, key string, v float64) bool { return len(m) == 1 && m[key] == v }

type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func decoded(t *testing.T, m stream.Message) *envelope.Event {
	t.Helper()
	ev, err := envelope.Unmarshal(m.Value)
	if err != nil {
		t.Fatalf("offset %d: %v", m.Offset, err)
	}
	return ev
}

// annotation is an annotation of the event's object, "" when absent.
func annotation(t *testing.T, ev *envelope.Event, key string) string {
	t.Helper()
	var obj struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if len(ev.Object) == 0 {
		return ""
	}
	if err := json.Unmarshal(ev.Object, &obj); err != nil {
		t.Fatalf("object of %s: %v", ev.Name, err)
	}
	return obj.Metadata.Annotations[key]
}

// hasField reports whether the event's object has the top-level field.
func hasField(t *testing.T, ev *envelope.Event, field string) bool {
	t.Helper()
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(ev.Object, &obj); err != nil {
		t.Fatalf("object of %s: %v", ev.Name, err)
	}
	_, ok := obj[field]
	return ok
}
