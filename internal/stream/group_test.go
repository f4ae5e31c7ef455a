package stream

import (
	"context"
	"errors"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// A group reader reads every partition and resumes after what was committed: a second reader of the
// group, after the first left, gets only what came after the commit.
func TestGroupReaderResumesAfterCommit(t *testing.T) {
	c, w := followTopic(t, "events", 2)
	writeKeyed(t, w, 0, 10)
	first, err := c.NewGroupReader(GroupReaderConfig{Topic: "events", Group: "indexers", MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	got := fetchN(t, first, 10)
	last := map[int]Message{}
	for _, m := range got {
		last[m.Partition] = m
	}
	if err := first.Commit(t.Context(), slices.Collect(maps.Values(last))...); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Fetch(t.Context()); !errors.Is(err, io.EOF) {
		t.Errorf("Fetch after Close: %v, want io.EOF", err)
	}

	writeKeyed(t, w, 10, 4)
	second, err := c.NewGroupReader(GroupReaderConfig{Topic: "events", Group: "indexers", MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = second.Close() })
	var values []string
	for _, m := range fetchN(t, second, 4) {
		values = append(values, string(m.Value))
	}
	slices.Sort(values)
	if want := []string{"v0010", "v0011", "v0012", "v0013"}; !slices.Equal(values, want) {
		t.Fatalf("after the commit the group read %v, want %v", values, want)
	}
}

// A bad configuration is refused when the reader is made, every problem at once; a reader closed
// before its first Fetch never joins.
func TestGroupReaderConfig(t *testing.T) {
	c := NewClient([]string{"127.0.0.1:1"}, Connection{}, nil)
	_, err := c.NewGroupReader(GroupReaderConfig{})
	for _, want := range []string{"no topic", "no consumer group", "fetch max bytes"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("empty config: %v; want %q", err, want)
		}
	}
	if _, err := NewClient(nil, Connection{}, nil).NewGroupReader(GroupReaderConfig{Topic: "t", Group: "g", MaxBytes: 1}); err == nil {
		t.Error("a reader without brokers was accepted")
	}
	r, err := c.NewGroupReader(GroupReaderConfig{Topic: "t", Group: "g", MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	// A broker gets at least a second to answer after its long poll (kafka-go's RTT allowance),
	// not a quarter of a short wait.
	if w := r.(*kafkaGroupReader).config.MaxWait; w < 2*time.Second {
		t.Errorf("fetch max wait %s: a broker answering late on a busy machine times the read out; want at least 2 s", w)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Fetch(t.Context()); !errors.Is(err, io.EOF) {
		t.Errorf("Fetch after Close: %v, want io.EOF", err)
	}
}

func fetchN(t *testing.T, r GroupReader, n int) []Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var out []Message
	for len(out) < n {
		m, err := r.Fetch(ctx)
		if err != nil {
			t.Fatalf("fetch %d of %d: %v", len(out)+1, n, err)
		}
		out = append(out, m)
	}
	return out
}
