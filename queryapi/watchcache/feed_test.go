package watchcache

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/kubesearch/kubesearch/internal/changes"
	"github.com/kubesearch/kubesearch/internal/envelope"
)

// record is a feed record of ev, read at offset of partition 0 in the batch ending at batch.
func record(ev *envelope.Event, offset, batch int64, prev *changes.Previous) *changes.Record {
	return &changes.Record{Event: *ev, Source: changes.Source{Offset: offset, Batch: batch}, Previous: prev}
}

func prevAt(rv string, labels string) *changes.Previous {
	p := &changes.Previous{ResourceVersion: rv, Epoch: 1}
	if labels != "" {
		p.Labels = json.RawMessage(labels)
	}
	return p
}

// TestWatchCacheFollowsTheFeed: the change feed of TestWatchCacheTurnsRelistsIntoEvents's stream
// (what the indexer publishes for it: nothing for the re-lists' unchanged objects, b's deletion
// by the last list's collection before its SYNC) makes the same window, with each event's
// previous labels and previous event, and a late batch (one below a batch read) is dropped.
func TestWatchCacheFollowsTheFeed(t *testing.T) {
	c := New(Options{MaxEvents: 1000, MaxBytes: 1 << 20})
	c.replaying, c.ready = false, true
	gone := cmEvent(envelope.Deleted, "b", 13, 3)
	gone.ListResourceVersion = "20"
	feed := []*changes.Record{
		record(cmEvent(envelope.Added, "a", 10, 1), 0, 2, nil),
		record(cmEvent(envelope.Added, "b", 11, 1), 1, 2, nil),
		record(cmEvent(envelope.Modified, "b", 12, 1), 2, 2, prevAt("11", `{"app":"web"}`)),
		record(cmEvent(envelope.Modified, "b", 13, 2), 4, 6, prevAt("12", "")),
		record(cmSync(2, "14"), 5, 6, nil),
		// A late batch of an indexer that lost the partition: already read.
		record(cmEvent(envelope.Modified, "b", 12, 1), 2, 2, prevAt("11", "")),
		{Event: *gone, Source: changes.Source{Offset: 8, Batch: 8}, Previous: prevAt("13", ""), Marker: envelope.Sync},
		record(cmSync(3, "20"), 8, 8, nil),
	}
	for _, r := range feed {
		c.ApplyChange(r)
	}
	var got []string
	for _, e := range c.win.all() {
		got = append(got, fmt.Sprintf("%s %s %d prev %q/%d", e.Type, e.UID, e.RV, e.PrevLabels, e.PrevSeq))
	}
	want := []string{`ADDED uid-a 10 prev ""/0`, `ADDED uid-b 11 prev ""/0`, `MODIFIED uid-b 12 prev "{\"app\":\"web\"}"/2`,
		`MODIFIED uid-b 13 prev "{}"/3`, `DELETED uid-b 20 prev "{}"/4`}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("window = %v\nwant     %v", got, want)
	}
	if c.head[cmPair] != 20 || c.stable[cmPair] != 20 || c.synced[cmPair] != 3 {
		t.Errorf("head %d stable %d synced %d, want 20 20 3", c.head[cmPair], c.stable[cmPair], c.synced[cmPair])
	}
	if len(c.lastSeq) != 1 {
		t.Errorf("lastSeq holds %d objects, want 1 (a; b is deleted)", len(c.lastSeq))
	}
	// Evicted events take their objects out of lastSeq: it is bounded by the window.
	small := New(Options{MaxEvents: 2, MaxBytes: 1 << 20})
	small.replaying, small.ready = false, true
	for i := range 10 {
		small.ApplyChange(record(cmEvent(envelope.Added, fmt.Sprint("o", i), 10+i, 1), int64(i), int64(i), nil))
	}
	if len(small.lastSeq) != 2 {
		t.Errorf("lastSeq of a 2-event window holds %d objects", len(small.lastSeq))
	}
}
