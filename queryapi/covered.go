package queryapi

import (
	"context"
	"time"

	"github.com/tidwall/gjson"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/queryapi/watchcache"
)

// positions is what a LIST needs of the watch cache (package watchcache): how far the stream has
// shown each pair (a consistent read waits for the index to reach it), and the events the index
// must show before a position covers them (cover).
type positions interface {
	// Sync waits until the heads of pairs include every event published before the call (a
	// cache following the indexers' change feed waits for the indexers; one following the event
	// stream has them already).
	Sync(ctx context.Context, pairs []store.Pair) error
	// Heads are, per pair, the newest resourceVersion the stream has shown; pairs without any are
	// left out, and all of them while the cache is not ready.
	Heads(pairs []store.Pair) map[store.Pair]int64
	// ReplayFrom is the lowest position of the pair a watch can start from and miss nothing the
	// window holds; false when there is none to tell.
	ReplayFrom(p store.Pair) (int64, bool)
	// EventsAfter are the pair's events above rv, at most limit, oldest first; ok is false when
	// they cannot be the whole story, below when the window starts above rv.
	EventsAfter(p store.Pair, rv int64, limit int) (evs []*watchcache.Event, ok, below bool)
}

// maxCoverEvents bounds the events one LIST checks against the index: a prefix of them still
// gives a position (up to where the prefix is covered).
const maxCoverEvents = 1000

// cover lifts vec's members — the index's watermarks, below which everything the stream carried is
// searchable — as far as the index shows every later event the watch cache holds of them: the
// position a LIST reports is one a watch can resume from without a gap. The newest resourceVersion
// a snapshot shows would claim more than that when writes become visible out of order: shards
// refresh on their own, and a `_bulk` item retried after a later one succeeded (429, a conflict
// resolved in a second pass). Searchability only grows, so what this finds covered before the
// LIST's search is covered in the search's snapshot too; the snapshot may show newer states, which a
// watch from the position sends again (a repeat, never a gap). Without a watch cache there are no
// watches to miss anything: the watermarks stand.
func (s *Server) cover(ctx context.Context, res apiResource, vec rvVector, listing map[string]bool) {
	if s.cache == nil {
		return
	}
	type pending struct {
		cluster string
		events  []*watchcache.Event
	}
	var todo []pending
	names, namespaces := map[string]bool{}, map[string]bool{}
	budget := maxCoverEvents
	fresh := rvVector(nil)
	readFresh := func() {
		if fresh == nil {
			// The fleet status polls the watermarks every PollInterval: the window may start
			// above what it last read (a query API just started, an indexer just caught up), or
			// it may not hold the pair at all. The index's own watermarks are covered by
			// definition; read once per LIST, when needed.
			fresh, _ = s.freshWatermarks(ctx, res) // unreadable: the positions stay as they are
			if fresh == nil {
				fresh = rvVector{}
			}
		}
	}
	for cl, wm := range vec {
		if _, known := s.fleet.watermark(res.pair(cl)); !known {
			// Unknown to the fleet status (not polled since the pair's first SYNC, or a poll
			// that missed it): not a position of 0, which a client takes for "from now on" and so
			// misses what changed between its LIST and its WATCH, but the index's own watermark
			// (it does not move while the pair lists). Only for pairs the status lacks, so that
			// a fleet's cold start, with many pairs at 0, does not read every watermark per LIST.
			readFresh()
			vec[cl] = max(wm, fresh[cl])
			if vec[cl] == 0 {
				// No watermark stored yet (the pair's first SYNC is being written): a watch from
				// the window's start replays every event of the pair (repeats of what the LIST
				// shows, never a gap).
				if from, ok := s.cache.ReplayFrom(res.pair(cl)); ok {
					vec[cl] = from
				}
			}
			continue
		}
		if listing[cl] || budget == 0 {
			continue
		}
		pair := res.pair(cl)
		evs, ok, below := s.cache.EventsAfter(pair, wm, budget)
		if below {
			readFresh()
		}
		if below && fresh[cl] > wm {
			wm = fresh[cl]
			vec[cl] = wm
			evs, ok, _ = s.cache.EventsAfter(pair, wm, budget)
		}
		if !ok || len(evs) == 0 {
			continue
		}
		budget -= len(evs)
		todo = append(todo, pending{cl, evs})
		for _, e := range evs {
			names[gjson.GetBytes(e.Object, "metadata.name").Str] = true
			namespaces[e.Namespace] = true
		}
	}
	if len(todo) == 0 {
		return
	}
	q := &query.Query{Resources: []query.Resource{{Resource: res.Resource, Group: res.storeGroup()}}, MetadataOnly: true,
		Limit: query.MaxLimit, Now: time.Now(), Peek: true}
	for _, p := range todo {
		q.Clusters = append(q.Clusters, p.cluster)
	}
	for n := range names {
		q.Names = append(q.Names, n)
	}
	if !namespaces[""] { // a cluster-scoped resource has no namespace to narrow by
		for ns := range namespaces {
			q.Namespaces = append(q.Namespaces, ns)
		}
	}
	sctx, cancel := context.WithTimeout(ctx, s.opts.RequestTimeout)
	defer cancel()
	page, err := s.store.Search(sctx, q)
	if err != nil {
		s.log.Debug("a LIST's position stays at the watermarks: the index could not be asked what it shows", "err", err)
		return
	}
	if page.Total > int64(len(page.Items)) {
		return // more objects of those names than one page: not judged
	}
	shown := map[string]int64{} // cluster/uid → resourceVersion searchable now
	for _, it := range page.Items {
		m := gjson.GetManyBytes(it, "metadata.uid", "metadata.resourceVersion")
		shown[clusterOf(it)+"/"+m[0].Str] = m[1].Int()
	}
	for _, p := range todo {
		vec[p.cluster] = max(vec[p.cluster], coveredPrefix(p.cluster, p.events, shown))
	}
}

// freshWatermarks are the resource's watermarks per cluster as the index holds them now, read
// past the fleet status, which polls them every PollInterval.
func (s *Server) freshWatermarks(ctx context.Context, res apiResource) (rvVector, error) {
	wms, err := s.fleet.readWatermarks(ctx)
	if err != nil {
		return nil, err
	}
	out := rvVector{}
	for _, w := range wms {
		if w.Group == res.storeGroup() && w.Resource == res.Resource {
			out[w.Cluster] = w.ResourceVersion
		}
	}
	return out, nil
}

// coveredPrefix is the resourceVersion of the last event of a prefix of evs (oldest first) whose
// every event the index shows — the object at that state or a newer one, or gone when the event, or
// a later one of the stream, is its deletion; 0 when the first is not shown.
func coveredPrefix(cluster string, evs []*watchcache.Event, shown map[string]int64) int64 {
	deletedAt := map[string]int64{}
	for _, e := range evs {
		if e.Type == watch.Deleted {
			deletedAt[e.UID] = e.RV
		}
	}
	var at int64
	for _, e := range evs {
		rv, present := shown[cluster+"/"+e.UID]
		switch {
		case present && rv >= e.RV:
		case !present && deletedAt[e.UID] >= e.RV:
		default:
			return at
		}
		at = e.RV
	}
	return at
}
