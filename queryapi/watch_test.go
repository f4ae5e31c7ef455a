package queryapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/store"
)

func cmEvent(typ envelope.Type, name string, rv int, epoch int64) *envelope.Event {
	obj := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"shop","uid":"uid-%s","resourceVersion":"%d"},"data":{"k":"v"}}`, name, name, rv)
	return &envelope.Event{V: envelope.Version, Type: typ, Cluster: "member1", Version: "v1", Resource: "configmaps", Kind: "ConfigMap",
		Namespace: "shop", Name: name, UID: "uid-" + name, ResourceVersion: fmt.Sprint(rv), Epoch: epoch, Object: json.RawMessage(obj)}
}

func cmSync(epoch int64, listRV string) *envelope.Event {
	return &envelope.Event{V: envelope.Version, Type: envelope.Sync, Cluster: "member1", Version: "v1", Resource: "configmaps",
		Kind: "ConfigMap", Namespace: "shop", Epoch: epoch, ListResourceVersion: listRV}
}

var cmPair = store.Pair{Cluster: "member1", Resource: "configmaps"}

// TestWatchDeliversSyncDeletes: a watch resumed from a list's resourceVersion gets the DELETED a
// re-list's SYNC implies, and the events after it, once.
func TestWatchDeliversSyncDeletes(t *testing.T) {
	st := &fakeStore{}
	srvURL, s := newFacadeServerWithCache(t, st)
	c := cacheOf(s)
	c.Apply(cmEvent(envelope.Added, "a", 10, 1))
	c.Apply(cmEvent(envelope.Added, "gone", 11, 1))
	c.Apply(cmEvent(envelope.Added, "gone2", 12, 1))
	done := make(chan []string)
	go func() {
		resp, err := http.Get(srvURL + "/clusters/member1/api/v1/namespaces/shop/configmaps?watch=1&resourceVersion=12")
		if err != nil {
			t.Error(err)
			close(done)
			return
		}
		defer resp.Body.Close()
		seen, err := readWatch(resp.Body, 3)
		if err != nil {
			t.Error(err)
		}
		done <- seen
	}()
	time.Sleep(200 * time.Millisecond)
	c.Apply(cmEvent(envelope.Added, "a", 10, 2))
	c.Apply(cmEvent(envelope.Added, "new", 15, 2))
	c.Apply(&envelope.Event{V: envelope.Version, Type: envelope.Sync, Cluster: "member1", Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespace: "shop", Epoch: 2, ListResourceVersion: "16"})
	select {
	case seen := <-done:
		// Both deletions of the SYNC, though they share its resourceVersion.
		want := []string{"ADDED new 15", "DELETED gone 16", "DELETED gone2 16"}
		slices.Sort(seen[1:])
		if fmt.Sprint(seen) != fmt.Sprint(want) {
			t.Errorf("watch saw %v, want %v", seen, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no events")
	}
}

// watchNames reads n events of a watch.
func watchNames(t *testing.T, url string, n int) []string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch %s: %d", url, resp.StatusCode)
	}
	seen, err := readWatch(resp.Body, n)
	if err != nil {
		t.Fatal(err)
	}
	return seen
}

// readWatch reads n events of a watch's body as "TYPE name resourceVersion".
func readWatch(body io.Reader, n int) ([]string, error) {
	dec := json.NewDecoder(body)
	var seen []string
	for len(seen) < n {
		var ev struct {
			Type   string
			Object struct {
				Metadata struct{ Name, ResourceVersion string }
			}
		}
		if err := dec.Decode(&ev); err != nil {
			return seen, fmt.Errorf("after %v: %w", seen, err)
		}
		seen = append(seen, ev.Type+" "+ev.Object.Metadata.Name+" "+ev.Object.Metadata.ResourceVersion)
	}
	return seen, nil
}

// TestWatchResumesInsideARelist: a one-cluster view's events carry their objects' own
// resourceVersions, which a re-list publishes in key order; a client resuming from one of them gets
// every later event of the list, lower resourceVersions included, and nothing it had.
func TestWatchResumesInsideARelist(t *testing.T) {
	srvURL, s := newFacadeServerWithCache(t, &fakeStore{})
	c := cacheOf(s)
	sync := func(epoch int64, listRV string) {
		c.Apply(&envelope.Event{V: envelope.Version, Type: envelope.Sync, Cluster: "member1", Version: "v1", Resource: "configmaps",
			Kind: "ConfigMap", Namespace: "shop", Epoch: epoch, ListResourceVersion: listRV})
	}
	c.Apply(cmEvent(envelope.Added, "a", 10, 1))
	c.Apply(cmEvent(envelope.Added, "b", 11, 1))
	c.Apply(cmEvent(envelope.Added, "c", 12, 1))
	sync(1, "12")
	// The collector re-lists (epoch 2) after missing changes: a at 40 comes before b at 30 and c at
	// 35 (key order); then the list's SYNC, then the watch's next change.
	c.Apply(cmEvent(envelope.Added, "a", 40, 2))
	c.Apply(cmEvent(envelope.Added, "b", 30, 2))
	c.Apply(cmEvent(envelope.Added, "c", 35, 2))
	sync(2, "41")
	c.Apply(cmEvent(envelope.Modified, "a", 42, 2))

	base := srvURL + "/clusters/member1/api/v1/namespaces/shop/configmaps?watch=1&resourceVersion="
	if got, want := watchNames(t, base+"40", 3), []string{"MODIFIED b 30", "MODIFIED c 35", "MODIFIED a 42"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("resumed after a (40): %v, want %v", got, want)
	}
	if got, want := watchNames(t, base+"30", 2), []string{"MODIFIED c 35", "MODIFIED a 42"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("resumed after b (30): %v, want %v", got, want)
	}
	// Outside a re-list a position is a resourceVersion as usual.
	if got, want := watchNames(t, base+"41", 1), []string{"MODIFIED a 42"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("resumed from the SYNC (41): %v, want %v", got, want)
	}
}
