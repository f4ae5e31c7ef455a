package stream

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A follower reads every partition, each in offset order, from where it is told — the first offset,
// a position to resume from (per partition, the offset after the last message seen), or the end — and
// goes on with what is written while it runs. It stops with nil when ctx is done.
func TestFollowerReadsEveryPartitionInOrder(t *testing.T) {
	c, w := followTopic(t, "events", 3)
	writeKeyed(t, w, 0, 60)
	hwm, err := c.HighWaterMarks(t.Context(), "events")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for p, n := range hwm {
		if n == 0 {
			t.Fatalf("partition %d holds nothing: the keys do not spread (%v)", p, hwm)
		}
		total += n
	}
	if len(hwm) != 3 || total != 60 {
		t.Fatalf("high water marks %v, want 3 partitions holding 60", hwm)
	}

	t.Run("from the first offset", func(t *testing.T) {
		f, err := c.NewFollower(FollowerConfig{Topic: "events", Default: FirstOffset})
		if err != nil {
			t.Fatal(err)
		}
		got := follow(t, f, 60, nil)
		assertLogFrom(t, c, got, map[int]int64{0: 0, 1: 0, 2: 0})
	})

	t.Run("resumed, then live", func(t *testing.T) {
		// Partition 0 resumes after its second message; the others at their end, as a watch started
		// from a list taken at the high water marks does.
		from := maps.Clone(hwm)
		from[0] = 2
		f, err := c.NewFollower(FollowerConfig{Topic: "events", From: from})
		if err != nil {
			t.Fatal(err)
		}
		got := follow(t, f, int(hwm[0]-2)+30, func(<-chan struct{}) { writeKeyed(t, w, 100, 30) })
		assertLogFrom(t, c, got, from)
	})

	t.Run("from the end", func(t *testing.T) {
		before, err := c.HighWaterMarks(t.Context(), "events")
		if err != nil {
			t.Fatal(err)
		}
		f, err := c.NewFollower(FollowerConfig{Topic: "events", Default: LastOffset})
		if err != nil {
			t.Fatal(err)
		}
		// The end is taken once Run starts: write until what is written then arrives.
		got := follow(t, f, 3, func(done <-chan struct{}) {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				case <-time.After(20 * time.Millisecond):
					writeKeyed(t, w, 1000+i, 1)
				}
			}
		})
		for _, m := range got {
			if m.Offset < before[m.Partition] {
				t.Errorf("partition %d offset %d was written before the follower started", m.Partition, m.Offset)
			}
		}
		first := map[int]int64{}
		for _, m := range slices.Backward(got) {
			first[m.Partition] = m.Offset
		}
		assertLogFrom(t, c, got, first)
	})
}

// A position the partition does not hold is OutOfRange, so a watch starts over rather than silently
// skipping what retention removed.
func TestFollowerRefusesPositionsOutOfRange(t *testing.T) {
	c, w := followTopic(t, "events", 2)
	writeKeyed(t, w, 0, 10)
	for name, from := range map[string]map[int]int64{
		"past the end":         {0: 1000},
		"a partition not held": {7: 0},
	} {
		t.Run(name, func(t *testing.T) {
			f, err := c.NewFollower(FollowerConfig{Topic: "events", From: from})
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Run(t.Context(), func(context.Context, Message) error { return nil }); !OutOfRange(err) {
				t.Fatalf("Run: %v, want OutOfRange", err)
			}
		})
	}
	if _, err := c.NewFollower(FollowerConfig{Topic: "events", Default: -3}); err == nil {
		t.Error("an offset below FirstOffset was accepted")
	}
}

// handle's error stops the follower and is returned as it is.
func TestFollowerStopsOnHandlerError(t *testing.T) {
	c, w := followTopic(t, "events", 2)
	writeKeyed(t, w, 0, 10)
	f, err := c.NewFollower(FollowerConfig{Topic: "events", Default: FirstOffset})
	if err != nil {
		t.Fatal(err)
	}
	stop := errors.New("enough")
	n := 0
	err = f.Run(t.Context(), func(context.Context, Message) error {
		if n++; n == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 3 {
		t.Fatalf("Run: %v after %d messages, want the handler's error after 3", err, n)
	}
}

// While Kafka is away the follower waits for it, and still stops with nil once ctx is done.
func TestFollowerStopsWhileKafkaIsAway(t *testing.T) {
	f, err := NewClient([]string{"127.0.0.1:1"}, Connection{}, nil).NewFollower(FollowerConfig{Topic: "events"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if err := f.Run(ctx, func(context.Context, Message) error { return nil }); err != nil {
		t.Fatalf("Run: %v, want nil once ctx is done", err)
	}
}

func followTopic(t *testing.T, topic string, partitions int) (*Client, Writer) {
	t.Helper()
	c := newTestClient(t)
	if err := c.CreateTopic(t.Context(), Topic{Name: topic, Partitions: partitions}); err != nil {
		t.Fatal(err)
	}
	w := c.NewWriter(WriterOptions{Topic: topic})
	t.Cleanup(func() { _ = w.Close() })
	return c, w
}

// writeKeyed writes n messages, values v<from>…, over 20 keys.
func writeKeyed(t *testing.T, w Writer, from, n int) {
	t.Helper()
	var msgs []Message
	for i := from; i < from+n; i++ {
		msgs = append(msgs, Message{Key: fmt.Appendf(nil, "key-%02d", i%20), Value: fmt.Appendf(nil, "v%04d", i)})
	}
	if err := w.Write(t.Context(), msgs...); err != nil {
		t.Fatal(err)
	}
}

// follow runs f until it delivered n messages, with then running meanwhile (done is closed once Run
// returned); it checks that Run returned nil and that handle was never called concurrently.
func follow(t *testing.T, f Follower, n int, then func(done <-chan struct{})) []Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var (
		got      []Message
		inside   sync.Mutex
		overlaps atomic.Int32
	)
	done := make(chan struct{})
	var runErr error
	go func() {
		defer close(done)
		runErr = f.Run(ctx, func(_ context.Context, m Message) error {
			if !inside.TryLock() {
				overlaps.Add(1)
				return nil
			}
			defer inside.Unlock()
			if got = append(got, m); len(got) == n {
				cancel()
			}
			return nil
		})
	}()
	if then != nil {
		then(done)
	}
	<-done
	if runErr != nil {
		t.Fatalf("Run: %v", runErr)
	}
	if n := overlaps.Load(); n > 0 {
		t.Errorf("handle was called concurrently %d times", n)
	}
	if len(got) < n {
		t.Fatalf("read %d messages within the deadline, want %d", len(got), n)
	}
	return got
}

// assertLogFrom checks that got is, per partition, exactly what the partition holds from the offset
// from names on (as far as got goes), in order; partitions from leaves out must be absent.
func assertLogFrom(t *testing.T, c *Client, got []Message, from map[int]int64) {
	t.Helper()
	byPartition := map[int][]Message{}
	for _, m := range got {
		byPartition[m.Partition] = append(byPartition[m.Partition], m)
	}
	for p, msgs := range byPartition {
		start, ok := from[p]
		if !ok {
			t.Errorf("partition %d read, but not followed from anywhere", p)
			continue
		}
		log, err := c.ReadPartition(t.Context(), "events", p)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, m := range log {
			if m.Offset >= start && len(want) < len(msgs) {
				want = append(want, fmt.Sprintf("%d:%s=%s", m.Offset, m.Key, m.Value))
			}
		}
		var have []string
		for _, m := range msgs {
			have = append(have, fmt.Sprintf("%d:%s=%s", m.Offset, m.Key, m.Value))
			if m.Topic != "events" || m.HighWaterMark <= m.Offset {
				t.Errorf("partition %d offset %d: topic %q, high water mark %d", p, m.Offset, m.Topic, m.HighWaterMark)
			}
		}
		if !slices.Equal(have, want) {
			t.Errorf("partition %d from offset %d:\nread %v\nwant %v", p, start, have, want)
		}
	}
}
