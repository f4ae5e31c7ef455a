package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

func createLocalTopic(t *testing.T, l *Local, name string, partitions int, config map[string]string) {
	t.Helper()
	if err := l.CreateTopic(context.Background(), Topic{Name: name, Partitions: partitions, Config: config}); err != nil {
		t.Fatal(err)
	}
}

// Keys keep their order and land where kafka-go's Hash balancer puts them in Kafka.
func TestLocalWriteKeysAndOrder(t *testing.T) {
	ctx := context.Background()
	l := NewLocal(LocalOptions{})
	createLocalTopic(t, l, "events", 12, nil)
	w := l.NewWriter(WriterOptions{Topic: "events"})
	var msgs []Message
	for i := range 300 {
		msgs = append(msgs, Message{Key: fmt.Appendf(nil, "member%d/apps/deployments", i%7), Value: fmt.Appendf(nil, "%d", i)})
	}
	if err := w.Write(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	hw, err := l.HighWaterMarks(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	for p := range 12 {
		got, err := l.ReadPartition(ctx, "events", p)
		if err != nil {
			t.Fatal(err)
		}
		total += hw[p]
		last := map[string]int{}
		for _, m := range got {
			want := (&kafka.Hash{}).Balance(kafka.Message{Key: m.Key}, partitionIDs(12)...)
			if m.Partition != p || want != p {
				t.Fatalf("key %s in partition %d (message says %d), kafka-go's Hash puts it in %d", m.Key, p, m.Partition, want)
			}
			var v int
			fmt.Sscanf(string(m.Value), "%d", &v)
			if prev, ok := last[string(m.Key)]; ok && v <= prev {
				t.Fatalf("key %s: value %d after %d", m.Key, v, prev)
			}
			last[string(m.Key)] = v
		}
	}
	if total != 300 {
		t.Fatalf("high-water marks sum to %d, want 300", total)
	}
}

func TestLocalWriteErrorsByMessage(t *testing.T) {
	ctx := context.Background()
	l := NewLocal(LocalOptions{})
	createLocalTopic(t, l, "events", 2, MaxMessageBytes(2000))
	w := l.NewWriter(WriterOptions{Topic: "events", BatchBytes: 1 << 20})
	err := w.Write(ctx,
		Message{Key: []byte("a"), Value: []byte("small")},
		Message{Key: []byte("b"), Value: make([]byte, 5000)},
		Message{Topic: "nope", Key: []byte("c"), Value: []byte("x")})
	var werrs WriteErrors
	if !errors.As(err, &werrs) || len(werrs) != 3 {
		t.Fatalf("want WriteErrors of 3, got %v", err)
	}
	if werrs[0] != nil || !TooLarge(werrs[1]) || !UnknownTopic(werrs[2]) {
		t.Fatalf("want nil, TooLarge, UnknownTopic; got %v", werrs)
	}
	if n, _ := l.TopicMaxMessageBytes(ctx, "events"); n != 2000 {
		t.Fatalf("max.message.bytes %d, want 2000", n)
	}
}

func TestLocalCompactedTopicKeepsLastOfEachKey(t *testing.T) {
	ctx := context.Background()
	l := NewLocal(LocalOptions{RetainBytes: 1})
	createLocalTopic(t, l, "ledger", 1, map[string]string{"cleanup.policy": "compact"})
	w := l.NewWriter(WriterOptions{Topic: "ledger"})
	for i := range 5 {
		if err := w.Write(ctx, Message{Key: []byte("k1"), Value: fmt.Appendf(nil, "v%d", i)}, Message{Key: []byte("k2"), Value: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Write(ctx, Message{Key: []byte("k2")}); err != nil { // a tombstone
		t.Fatal(err)
	}
	got, err := l.ReadPartition(ctx, "ledger", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || string(got[0].Value) != "v4" || got[0].Offset != 8 || got[1].Value != nil || got[1].Offset != 10 {
		t.Fatalf("want k1=v4 at 8 and k2's tombstone at 10, got %+v", got)
	}
	// A follower from offset 0 still reads: compaction leaves gaps, not a later log start.
	f, err := l.NewFollower(FollowerConfig{Topic: "ledger", Default: FirstOffset})
	if err != nil {
		t.Fatal(err)
	}
	if msgs := followLocal(t, f, 2); msgs[0].Offset != 8 {
		t.Fatalf("follower read %+v", msgs)
	}
}

// followLocal runs f until n messages arrived and returns them.
func followLocal(t *testing.T, f Follower, n int) []Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []Message
	err := f.Run(ctx, func(_ context.Context, m Message) error {
		got = append(got, m)
		if len(got) == n {
			cancel()
		}
		return nil
	})
	if err != nil || len(got) != n {
		t.Fatalf("follower: %v, %d of %d messages", err, len(got), n)
	}
	return got
}

// A group resumes at its committed offsets; what it committed is trimmed down to RetainBytes, and a
// follower behind the trim is told OutOfRange.
func TestLocalGroupCommitResumeAndTrim(t *testing.T) {
	ctx := context.Background()
	l := NewLocal(LocalOptions{RetainBytes: 1})
	createLocalTopic(t, l, "events", 1, nil)
	r, err := l.NewGroupReader(GroupReaderConfig{Topic: "events", Group: "ix", MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	w := l.NewWriter(WriterOptions{Topic: "events"})
	for i := range 10 {
		if err := w.Write(ctx, Message{Key: []byte("k"), Value: fmt.Appendf(nil, "%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if sp, _ := l.Spans(ctx, "events"); sp[0] != (Span{0, 10}) {
		t.Fatalf("before any commit the group holds everything: span %+v", sp[0])
	}
	var last Message
	for range 6 {
		if last, err = r.Fetch(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Commit(ctx, last); err != nil {
		t.Fatal(err)
	}
	co, _ := l.CommittedOffsets(ctx, "ix", "events")
	if co[0] != 6 {
		t.Fatalf("committed %d, want 6", co[0])
	}
	if sp, _ := l.Spans(ctx, "events"); sp[0] != (Span{6, 10}) {
		t.Fatalf("after the commit: span %+v, want 6 to 10", sp[0])
	}
	r.Close()
	if _, err := r.Fetch(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("fetch after close: %v", err)
	}
	r2, _ := l.NewGroupReader(GroupReaderConfig{Topic: "events", Group: "ix", MaxBytes: 1 << 20})
	if m, err := r2.Fetch(ctx); err != nil || m.Offset != 6 {
		t.Fatalf("a new reader of the group starts at %d (%v), want 6", m.Offset, err)
	}
	f, _ := l.NewFollower(FollowerConfig{Topic: "events", From: map[int]int64{0: 2}})
	if err := f.Run(ctx, func(context.Context, Message) error { return nil }); !OutOfRange(err) {
		t.Fatalf("follower from a trimmed offset: %v, want OutOfRange", err)
	}
}

// A writer waits while the group's backlog is full, and goes on once the group commits.
func TestLocalBackpressure(t *testing.T) {
	ctx := context.Background()
	l := NewLocal(LocalOptions{RetainBytes: 1, MaxBacklogBytes: 10_000})
	createLocalTopic(t, l, "events", 1, nil)
	r, _ := l.NewGroupReader(GroupReaderConfig{Topic: "events", Group: "ix", MaxBytes: 1 << 20})
	w := l.NewWriter(WriterOptions{Topic: "events"})
	var wg sync.WaitGroup
	wrote := make(chan int, 100)
	wg.Go(func() {
		for i := range 100 {
			if err := w.Write(ctx, Message{Key: []byte("k"), Value: []byte(strings.Repeat("x", 1000))}); err != nil {
				t.Error(err)
				return
			}
			wrote <- i
		}
		close(wrote)
	})
	time.Sleep(200 * time.Millisecond)
	if n := len(wrote); n > 12 {
		t.Fatalf("%d writes of 1 kB went through a 10 kB backlog nobody consumed", n)
	}
	got := 0
	for got < 100 {
		m, err := r.Fetch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Commit(ctx, m); err != nil {
			t.Fatal(err)
		}
		got++
	}
	wg.Wait()
	if sp, _ := l.Spans(ctx, "events"); sp[0].End != 100 {
		t.Fatalf("end %d, want 100", sp[0].End)
	}
}

// Followers wait for the topic and for messages, and end when the log closes.
func TestLocalFollowerWaitsAndEnds(t *testing.T) {
	ctx := context.Background()
	l := NewLocal(LocalOptions{})
	f, _ := l.NewFollower(FollowerConfig{Topic: "events"})
	got := make(chan Message, 10)
	done := make(chan error, 1)
	go func() {
		done <- f.Run(ctx, func(_ context.Context, m Message) error {
			got <- m
			return nil
		})
	}()
	time.Sleep(50 * time.Millisecond)
	createLocalTopic(t, l, "events", 3, nil)
	if err := l.NewWriter(WriterOptions{Topic: "events"}).Write(ctx, Message{Key: []byte("k"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if string(m.Value) != "v" || m.HighWaterMark != 1 {
			t.Fatalf("got %+v", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the follower did not deliver the message")
	}
	l.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not end when the log closed")
	}
}

// A compacted topic survives a restart with its offsets, compacted, a torn last record dropped.
func TestLocalKeepsCompactedTopics(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ledger := map[string]string{"cleanup.policy": "compact"}
	l := NewLocal(LocalOptions{Dir: dir})
	createLocalTopic(t, l, "ledger", 1, ledger)
	createLocalTopic(t, l, "events", 1, nil)
	w := l.NewWriter(WriterOptions{})
	for i := range 3 {
		if err := w.Write(ctx, Message{Topic: "ledger", Key: []byte("a"), Value: fmt.Appendf(nil, "a%d", i)},
			Message{Topic: "ledger", Key: []byte("b"), Value: []byte("b")}, Message{Topic: "events", Key: []byte("e"), Value: []byte("e")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Write(ctx, Message{Topic: "ledger", Key: []byte("b")}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	f, err := os.OpenFile(filepath.Join(dir, "ledger-0.log"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(appendRecord(nil, &Message{Offset: 7, Key: []byte("c"), Value: []byte("torn")})[:5])
	f.Close()

	l = NewLocal(LocalOptions{Dir: dir})
	defer l.Close()
	createLocalTopic(t, l, "ledger", 1, ledger)
	createLocalTopic(t, l, "events", 1, nil)
	got, _ := l.ReadPartition(ctx, "ledger", 0)
	if len(got) != 2 || string(got[0].Key) != "a" || string(got[0].Value) != "a2" || got[0].Offset != 4 ||
		string(got[1].Key) != "b" || got[1].Value != nil || got[1].Offset != 6 {
		t.Fatalf("after the restart the ledger holds %+v", got)
	}
	if sp, _ := l.Spans(ctx, "ledger"); sp[0].End != 7 {
		t.Fatalf("ledger end %d, want 7", sp[0].End)
	}
	if sp, _ := l.Spans(ctx, "events"); sp[0] != (Span{}) {
		t.Fatalf("the events topic is not kept, yet holds %+v", sp[0])
	}
	if err := l.NewWriter(WriterOptions{Topic: "ledger"}).Write(ctx, Message{Key: []byte("c"), Value: []byte("c")}); err != nil {
		t.Fatal(err)
	}
	if got, _ := l.ReadPartition(ctx, "ledger", 0); len(got) != 3 || got[2].Offset != 7 {
		t.Fatalf("written after the restart: %+v", got)
	}
}
