package indexer

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/internal/stream"
)

// TestBatchLimits: a batch closes at the count limit, before a message that would pass the byte
// limit, and right after a message reaching it; an oversized message makes a batch alone.
func TestBatchLimits(t *testing.T) {
	msg := func(n int) stream.Message { return stream.Message{Value: make([]byte, n)} }
	sizes := func(batches [][]stream.Message) [][]int {
		var out [][]int
		for _, b := range batches {
			var s []int
			for _, m := range b {
				s = append(s, len(m.Value))
			}
			out = append(out, s)
		}
		return out
	}
	tests := []struct {
		name     string
		count    int
		bytes    int
		in       []int
		wantDone [][]int // batches completed, in order
		wantLeft []int   // still open
	}{
		{"count", 3, 1000, []int{1, 1, 1, 1}, [][]int{{1, 1, 1}}, []int{1}},
		{"bytes: the next message does not fit", 100, 100, []int{40, 40, 40}, [][]int{{40, 40}}, []int{40}},
		{"bytes: reached exactly", 100, 100, []int{60, 40, 1}, [][]int{{60, 40}}, []int{1}},
		{"oversized message alone", 100, 100, []int{10, 500, 10}, [][]int{{10}, {500}}, []int{10}},
		{"oversized first", 100, 100, []int{500}, [][]int{{500}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b batch
			var done [][]stream.Message
			for _, n := range tt.in {
				done = append(done, b.push(msg(n), tt.count, tt.bytes)...)
			}
			if got := sizes(done); !equalSizes(got, tt.wantDone) {
				t.Errorf("completed batches: got %v, want %v", got, tt.wantDone)
			}
			left := sizes([][]stream.Message{b.take()})
			if !equalSizes(left, [][]int{tt.wantLeft}) {
				t.Errorf("open batch: got %v, want %v", left[0], tt.wantLeft)
			}
		})
	}
}

func equalSizes(a, b [][]int) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// TestAssembleFillsWhileBusy: a batch handed over after its interval when run is idle; while run is
// busy a due batch keeps filling instead of going out small, up to the count limit; every message is
// handed over once, in order, with its decoded item.
func TestAssembleFillsWhileBusy(t *testing.T) {
	c := newDecodeConsumer()
	c.batchSize, c.batchBytes, c.batchInterval = 5, 1<<20, 20*time.Millisecond
	in := make(chan stream.Message, 100)
	out := make(chan *decodedBatch)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		c.assemble(in, out, done)
	}()
	defer func() { close(done); <-finished }()
	next := 0
	send := func(n int) {
		for range n {
			in <- stream.Message{Offset: int64(next), Value: []byte("not an envelope")}
			next++
		}
	}
	var got []int64
	take := func() int {
		b := <-out
		if len(b.msgs) != len(b.items) {
			t.Fatalf("%d messages, %d items", len(b.msgs), len(b.items))
		}
		for i, m := range b.msgs {
			if b.items[i].msg.Offset != m.Offset {
				t.Fatalf("item %d is offset %d, message %d", i, b.items[i].msg.Offset, m.Offset)
			}
			got = append(got, m.Offset)
		}
		return len(b.msgs)
	}

	// Idle: one message goes out alone once its interval has passed.
	send(1)
	if n := take(); n != 1 {
		t.Fatalf("idle batch of %d, want 1", n)
	}
	// Busy (nobody reads out): two messages, the interval passes, three more come: one batch of the
	// five (the count limit), not a batch of two followed by one of three.
	send(2)
	time.Sleep(3 * c.batchInterval)
	send(3)
	if n := take(); n != 5 {
		t.Fatalf("batch of %d after run was busy, want 5", n)
	}
	// Past the count limit while busy: full batches, then the rest once due.
	send(7)
	if n := take(); n != 5 {
		t.Fatalf("first batch of %d, want 5", n)
	}
	if n := take(); n != 2 {
		t.Fatalf("second batch of %d, want 2", n)
	}
	for i, o := range got {
		if o != int64(i) {
			t.Fatalf("offsets handed over %v, want 0..%d in order", got, next-1)
		}
	}
}
