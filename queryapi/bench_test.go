package queryapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/fixtures"
	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/internal/table"
	"github.com/kubesearch/kubesearch/queryapi/watchcache"
)

// benchPod is an event of a typical Pod (about 9 KB of JSON: three containers, an init container,
// a full status), the same as internal/envelope's benchmark Pod, at resourceVersion rv.
func benchPod(b testing.TB, typ envelope.Type, rv string) *envelope.Event {
	b.Helper()
	pod := fixtures.Pod(rv)
	at := fixtures.At
	obj, err := json.Marshal(pod)
	if err != nil {
		b.Fatal(err)
	}
	return &envelope.Event{V: envelope.Version, Type: typ, Cluster: "member-eu-1", Version: "v1", Resource: "pods", Kind: "Pod",
		Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID), ResourceVersion: pod.ResourceVersion,
		Epoch: 1767225600000001, ObservedAt: at, ChangedAt: at.Add(-time.Second), Object: obj}
}

// BenchmarkWatchEvent is what the query API does per watcher for each event of the stream: one
// MODIFIED of a Pod, from the watch cache, matched against the watch's selectors and scope and
// written as the line the client reads. The watch resumed from a resourceVersion, as informers
// do, so the object's previous state is looked up in the window. Views: the fleet view (the
// object's resourceVersion becomes the watch's vector), a one-cluster view (the object as stored),
// the fleet view as a Table (kubectl get -w), and the qualified view (the object, its owner and
// its node renamed <name>_<cluster>).
func BenchmarkWatchEvent(b *testing.B) {
	const cluster = "member-eu-1"
	c := watchcache.New(watchcache.Options{MaxEvents: 1000, MaxBytes: 64 << 20})
	c.CaughtUp()
	c.Apply(benchPod(b, envelope.Added, "184466"))
	c.Apply(benchPod(b, envelope.Modified, "184467"))
	pair := store.Pair{Cluster: cluster, Resource: "pods"}
	feed, err := c.Start(b.Context(), []store.Pair{pair}, map[store.Pair]int64{pair: 0})
	if err != nil {
		b.Fatal(err)
	}
	defer feed.Stop()
	evs, _, _, err := feed.Read()
	if err != nil || len(evs) == 0 {
		b.Fatalf("read the window: %d events, %v", len(evs), err)
	}
	e := evs[len(evs)-1]
	if e.Type != watch.Modified || e.PrevSeq == 0 {
		b.Fatalf("cache event %s with previous %d, want a MODIFIED with its previous state", e.Type, e.PrevSeq)
	}
	s := &Server{log: slog.New(slog.DiscardHandler), cache: c}
	res := apiResource{Version: "v1", Resource: "pods", Kind: "Pod", Singular: "pod", Namespaced: true}
	q, err := query.Parse(url.Values{
		query.ParamLabelSelector: {"app.kubernetes.io/name=checkout,!canary"},
		query.ParamFieldSelector: {"status.phase=Running"},
	}, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	q.Scope = &query.Scope{Grants: []query.Grant{
		{Clusters: []string{"member-us-1"}, Namespaces: []string{"payments"}},
		{Namespaces: []string{"shop", "monitoring"}, Resources: []query.Resource{{Resource: "pods"}}},
	}}
	for _, bc := range []struct {
		name   string
		view   view
		accept string
	}{
		{"fleet", view{}, ""},
		{"cluster", view{cluster: cluster}, ""},
		{"fleet-table", view{}, "application/json;as=Table;g=meta.k8s.io;v=v1"},
		{"qualified", view{qualified: true}, ""},
	} {
		b.Run(bc.name, func(b *testing.B) {
			out, st := newRenderer(bc.accept, "", res, bc.view)
			if st != nil {
				b.Fatal(st.Message)
			}
			out.table = table.For(res.Group, res.Resource)
			w := &watcher{s: s, r: &facadeRequest{view: bc.view, path: "/api/v1/pods", version: "v1", resource: "pods"},
				res: res, out: out, q: q, feed: feed, from: rvVector{cluster: 184000}, pos: rvVector{cluster: 184000}}
			for _, cl := range []string{cluster, "member-eu-2", "member-us-1"} {
				w.pairs = append(w.pairs, store.Pair{Cluster: cl, Resource: "pods"})
				if bc.view.vector() {
					w.from[cl], w.pos[cl] = 184000, 184000
				}
			}
			w.event(e)
			if !json.Valid(w.buf.Bytes()) {
				b.Fatalf("watch line is not JSON: %.200s", w.buf.Bytes())
			}
			b.SetBytes(int64(w.buf.Len()))
			b.ReportAllocs()
			for b.Loop() {
				w.buf.Reset()
				w.event(e)
			}
			if w.buf.Len() == 0 {
				b.Fatal("the event was not sent")
			}
		})
	}
}

// BenchmarkFleetWatchEvent is the same per-watcher work in the shape of make bench-fleet-watch: a
// fleet view of 1,000 clusters' Pods, without selectors, its position a sealed mark of a stream of
// 12 partitions (position.go), each event a MODIFIED of another cluster's Pod, as the churn
// spreads over the fleet. What it costs per event is paid once per watcher: 100 watchers at 200
// changes/s are 20,000 of these a second.
func BenchmarkFleetWatchEvent(b *testing.B) {
	const clusters = 1000
	c := watchcache.New(watchcache.Options{MaxEvents: 10 * clusters, MaxBytes: 256 << 20})
	c.CaughtUp()
	var wms []store.Watermark
	fleet := make([]string, clusters)
	for i := range fleet {
		fleet[i] = fmt.Sprintf("member-%04d", i)
		wms = append(wms, store.Watermark{Cluster: fleet[i], Resource: "pods", Kind: "Pod", ResourceVersion: 1, Epoch: 1767225600000001})
	}
	c.Seed(wms)
	c.ReadPartitionsForTest(12)
	from := rvVector{}
	pairs := make([]store.Pair, clusters)
	apply := func(typ envelope.Type, rv string) {
		for _, cl := range fleet {
			ev := benchPod(b, typ, rv)
			ev.Cluster = cl
			c.Apply(ev)
		}
	}
	apply(envelope.Added, "184466")
	for i, cl := range fleet {
		from[cl] = 184466 // the client listed after the ADDEDs: a prefix of the stream
		pairs[i] = store.Pair{Cluster: cl, Resource: "pods"}
	}
	feed, err := c.Start(b.Context(), pairs, map[store.Pair]int64{})
	if err != nil {
		b.Fatal(err)
	}
	defer feed.Stop()
	apply(envelope.Modified, "184467")
	evs, _, _, err := feed.Read()
	if err != nil || len(evs) != 2*clusters {
		b.Fatalf("read the window: %d events, %v", len(evs), err)
	}
	positions, err := newSealer(nil)
	if err != nil {
		b.Fatal(err)
	}
	s := &Server{log: slog.New(slog.DiscardHandler), cache: c, positions: positions}
	res := apiResource{Version: "v1", Resource: "pods", Kind: "Pod", Singular: "pod", Namespaced: true}
	out, st := newRenderer("", "", res, view{})
	if st != nil {
		b.Fatal(st.Message)
	}
	w := &watcher{s: s, r: &facadeRequest{path: "/api/v1/pods", version: "v1", resource: "pods"},
		res: res, out: out, q: &query.Query{}, feed: feed, pairs: pairs, from: from, pos: maps.Clone(from)}
	w.startPosition()
	if w.at == nil {
		b.Fatal("no sealed position: the cache keeps no marks")
	}
	var modified []*watchcache.Event
	for _, e := range evs {
		if e.Type == watch.Modified {
			modified = append(modified, e)
		}
	}
	w.event(modified[0])
	b.Logf("one event: %d bytes", w.buf.Len())
	if line := w.buf.Bytes(); !json.Valid(line) || !bytes.Contains(line, []byte(`"resourceVersion":"~`)) {
		b.Fatalf("watch line is not JSON with a sealed position: %.300s", line)
	}
	b.SetBytes(int64(w.buf.Len()))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		w.buf.Reset()
		w.event(modified[i%len(modified)])
		i++
	}
	if w.buf.Len() == 0 {
		b.Fatal("the event was not sent")
	}
}
