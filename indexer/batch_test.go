package indexer

import (
	"bytes"
	"encoding/json"
	"testing"

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
