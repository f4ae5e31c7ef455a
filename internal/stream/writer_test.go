package stream

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// Size is exactly what the writer compares with BatchBytes: a message of Size bytes passes a writer
// whose BatchBytes is that size, and is refused (TooLarge, before anything is sent) by one a byte
// smaller. Callers drop what exceeds a limit by Size, so being off by one would send a message kafka-go
// refuses, or drop one it would take.
func TestSizeIsWhatTheWriterCounts(t *testing.T) {
	c := NewClient([]string{"127.0.0.1:1"}, Connection{}, nil)
	cancelled, cancel := context.WithCancel(t.Context())
	cancel() // kafka-go checks sizes before any network I/O; past the check, the cancelled ctx stops it
	tests := []struct {
		name       string
		key, value int
		headers    [][2]int // key and value lengths
	}{
		{"empty", 0, 0, nil},
		{"key and value", 20, 1000, nil},
		{"value of a few MiB", 30, 3 << 20, nil},
		{"one header", 20, 100, [][2]int{{5, 5}}},
		{"header lengths at varint boundaries", 20, 100, [][2]int{{63, 64}, {8191, 8192}, {0, 0}}},
		{"64 headers", 1, 1, slices.Repeat([][2]int{{1, 1}}, 64)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := Message{Key: bytes.Repeat([]byte("k"), tt.key), Value: bytes.Repeat([]byte("v"), tt.value)}
			for _, h := range tt.headers {
				m.Headers = append(m.Headers, Header{Key: strings.Repeat("h", h[0]), Value: bytes.Repeat([]byte("x"), h[1])})
			}
			n := m.Size()
			for _, limit := range []int{n, n - 1} {
				w := c.NewWriter(WriterOptions{Topic: "t", BatchBytes: limit})
				err := w.Write(cancelled, m)
				if refused := TooLarge(err); refused != (limit < n) {
					t.Errorf("Size %d, BatchBytes %d: the writer says %v", n, limit, err)
				}
				var werrs WriteErrors
				if errors.As(err, &werrs) {
					t.Errorf("a message refused before sending is reported per message: %v", err)
				}
				_ = w.Close()
			}
		})
	}
}

// A broker refusing a partition's batch as too large fails every message of it, each reported at its
// position, so a caller can resend or drop message by message.
func TestWriteErrorsSayWhichMessagesFailed(t *testing.T) {
	c := newTestClient(t)
	if err := c.CreateTopic(t.Context(), Topic{Name: "small", Partitions: 1, Config: MaxMessageBytes(4 << 10)}); err != nil {
		t.Fatal(err)
	}
	w := c.NewWriter(WriterOptions{Topic: "small", BatchBytes: 1 << 20, BatchSize: 100})
	t.Cleanup(func() { _ = w.Close() })
	big := make([]byte, 16<<10)
	_, _ = rand.Read(big) // incompressible, had the writer compressed
	err := w.Write(t.Context(), Message{Key: []byte("a"), Value: []byte("small")}, Message{Key: []byte("b"), Value: big}, Message{Key: []byte("a"), Value: []byte("small")})
	var werrs WriteErrors
	if !errors.As(err, &werrs) || len(werrs) != 3 {
		t.Fatalf("write: %v; want WriteErrors for the 3 messages", err)
	}
	if !TooLarge(err) || !TooLarge(werrs[1]) {
		t.Errorf("the refusal is not TooLarge: %v", err)
	}
	// Alone, the small ones go through, under the writer's topic.
	if err := w.Write(t.Context(), Message{Key: []byte("a"), Value: []byte("small")}); err != nil {
		t.Fatal(err)
	}
	msgs, err := c.ReadPartition(t.Context(), "small", 0)
	if err != nil || len(msgs) != 1 || string(msgs[0].Value) != "small" || msgs[0].Topic != "small" {
		t.Fatalf("small holds %+v, %v", msgs, err)
	}
}

// ReadPartition returns what a partition holds, key, value (nil for a tombstone) and headers as
// written; a topic that does not exist holds nothing.
func TestReadPartition(t *testing.T) {
	c := newTestClient(t)
	if err := c.CreateTopic(t.Context(), Topic{Name: "ledger", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	w := c.NewWriter(WriterOptions{})
	t.Cleanup(func() { _ = w.Close() })
	var want []Message
	for i := range 5 {
		m := Message{Topic: "ledger", Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i),
			Headers: []Header{{Key: "h", Value: []byte("x")}}}
		if i == 3 {
			m.Value, m.Headers = nil, nil
		}
		want = append(want, m)
	}
	for _, m := range want { // one at a time: five record batches to read across
		if err := w.Write(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.ReadPartition(t.Context(), "ledger", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("read %d messages, want %d", len(got), len(want))
	}
	for i, m := range got {
		w := want[i]
		if m.Offset != int64(i) || m.Partition != 0 || m.HighWaterMark != 5 || !bytes.Equal(m.Key, w.Key) ||
			!bytes.Equal(m.Value, w.Value) || (m.Value == nil) != (w.Value == nil) || len(m.Headers) != len(w.Headers) {
			t.Errorf("message %d: %+v, want %+v", i, m, w)
		}
	}
	if msgs, err := c.ReadPartition(t.Context(), "absent", 0); err != nil || len(msgs) != 0 {
		t.Errorf("a topic not created: %v, %v", msgs, err)
	}
}

// BenchmarkWriteLatency is the time of one synchronous Write of a few events (a watch event, a
// SYNC marker) to an in-process broker: the send and the acknowledgement, with no batch timeout
// waited out (it was 5 ms a Write).
func BenchmarkWriteLatency(b *testing.B) {
	c := newTestClient(b)
	if err := c.CreateTopic(b.Context(), Topic{Name: "events", Partitions: 1}); err != nil {
		b.Fatal(err)
	}
	w := c.NewWriter(WriterOptions{Topic: "events", BatchSize: 500, BatchBytes: 1 << 20, Compress: true})
	b.Cleanup(func() { _ = w.Close() })
	msgs := make([]Message, 3)
	for i := range msgs {
		msgs[i] = Message{Key: []byte("member1/pods"), Value: bytes.Repeat([]byte(`{"type":"MODIFIED"}`), 100)}
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Write(b.Context(), msgs...); err != nil {
			b.Fatal(err)
		}
	}
}
