package indexer

import (
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/internal/changes"
	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/osstore/osstoretest"
)

// TestChangeFeed: the feed holds exactly the changes of the index, in order — new objects, changed
// ones with their previous labels, deletions by events and by a SYNC's collection, each marker after
// its deletions — and nothing for a re-list's unchanged objects or a replay.
func TestChangeFeed(t *testing.T) {
	s := newStream(t, 1)
	osrv := osstoretest.New()
	srv := httptest.NewServer(osrv)
	t.Cleanup(srv.Close)
	startIndexerWith(t, s, srv.URL, func(o *Options) { o.ChangesTopic = changes.TopicOf(s.topic) })
	cm := func(typ envelope.Type, name, rv string, epoch int64) *envelope.Event {
		return objectEvent(typ, "m1", "ConfigMap", "configmaps", "shop", name, "u"+name, rv, epoch)
	}
	// Each step is consumed before the next is published, so the feed's order is the steps'.
	steps := []struct {
		events []any
		want   []string
	}{
		{[]any{cm(envelope.Added, "a", "10", 2), cm(envelope.Added, "b", "11", 2), cm(envelope.Added, "c", "12", 2),
			marker(envelope.Sync, "m1", "ConfigMap", "configmaps", "shop", 2, "12")},
			[]string{"ADDED a 10", "ADDED b 11", "ADDED c 12", "SYNC 2"}},
		// A re-list: a unchanged, b changed, c gone.
		{[]any{cm(envelope.Added, "a", "10", 3), cm(envelope.Added, "b", "15", 3),
			marker(envelope.Sync, "m1", "ConfigMap", "configmaps", "shop", 3, "16")},
			[]string{"MODIFIED b 15 after 11", "DELETED c 12 after 12", "SYNC 3"}},
		{[]any{cm(envelope.Modified, "a", "20", 3), cm(envelope.Deleted, "b", "21", 3)},
			[]string{"MODIFIED a 20 after 10", "DELETED b 21 after 15"}},
		// A replay of an older state, and of a deletion already applied.
		{[]any{cm(envelope.Modified, "a", "10", 3), cm(envelope.Deleted, "b", "21", 3), cm(envelope.Added, "d", "22", 3)},
			[]string{"ADDED d 22"}},
	}
	var want []string
	for i, st := range steps {
		s.publish(t, st.events...)
		end := s.ends(t, 1)[0]
		eventually(t, 30*time.Second, func() bool { return s.committed(t, "indexers", 1)[0] == end },
			func() string { return fmt.Sprintf("step %d not committed", i) })
		want = append(want, st.want...)
	}
	msgs := s.readAll(t, changes.TopicOf(s.topic), len(want))
	var got []string
	var last int64 = -1
	for _, m := range msgs {
		r, err := changes.Unmarshal(m.Value)
		if err != nil {
			t.Fatalf("record %s: %v", m.Value, err)
		}
		if r.Source.Batch < last || r.Source.Offset > r.Source.Batch {
			t.Errorf("source %+v after batch %d", r.Source, last)
		}
		last = r.Source.Batch
		line := string(r.Type) + " " + r.Name + " " + r.ResourceVersion
		switch r.Type {
		case envelope.Sync:
			line = fmt.Sprintf("SYNC %d", r.Epoch)
		case envelope.Modified, envelope.Deleted:
			if r.Previous == nil {
				t.Errorf("%s: no previous state", line)
				break
			}
			line += " after " + r.Previous.ResourceVersion
			if string(r.Previous.Labels) != `{"app":"web"}` {
				t.Errorf("%s: previous labels %s", line, r.Previous.Labels)
			}
		}
		// A collection's deletion carries the stored identity (the test's events carry no last state).
		if r.Type == envelope.Deleted && r.Name == "c" && !strings.Contains(string(r.Object), `"uid":"uc"`) {
			t.Errorf("%s: object %s", line, r.Object)
		}
		got = append(got, line)
	}
	if !slices.Equal(got, want) {
		t.Errorf("feed:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The bookmark is the feed's end before the last batch that published: where a reader starts.
	marks, err := s.client.CommittedOffsets(t.Context(), changes.BookmarkGroup("indexers"), changes.TopicOf(s.topic))
	if err != nil || marks[0] != int64(len(want)-1) {
		t.Errorf("bookmark %v (%v), want %d", marks, err, len(want)-1)
	}
	// Nothing after what was expected.
	time.Sleep(200 * time.Millisecond)
	all, err := s.client.ReadPartition(t.Context(), changes.TopicOf(s.topic), 0)
	if err != nil || len(all) != len(want) {
		t.Errorf("feed holds %d records, want %d (%v)", len(all), len(want), err)
	}
}
