package collector

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/kubesearch/kubesearch/internal/envelope"
)

// sink receives the events of a collection, in order. Publish blocks while the stream is slow or away:
// that is the backpressure that stops the reflector reading from the member.
type sink interface {
	Publish(ctx context.Context, ev *envelope.Event) error
}

// scope is what one collection covers: one resource of one cluster, in one namespace or all.
type scope struct {
	cluster   string
	gvr       schema.GroupVersionResource
	kind      string
	namespace string // "" = every namespace
	redact    bool   // publish only the allow-list of a Secret (redactedSecret)
}

type keyState struct {
	uid string
	rv  string
	// changed is when the object last changed as published (Unix microseconds), so a re-list of an
	// unchanged object keeps its change time.
	changed int64
}

// store is the cache.ReflectorStore of one collection. It keeps only key → (uid, resourceVersion), never
// the objects, so a collector's memory stays near one key per object however large the objects are.
//
// A list does not reach it through Replace's argument: listPages streams every page into listed() and
// hands the reflector an empty list, so no full list is ever held in memory. Replace then closes the
// list: the keys not seen in it vanished while nothing watched (DELETED), and a SYNC marker tells the
// indexer that every older-epoch document of the scope is gone.
type store struct {
	ctx    context.Context
	scope  scope
	sink   sink
	epochs epochSource
	status *statusEntry

	mu    sync.Mutex
	items map[string]keyState // the state as of the last event published
	epoch int64               // the epoch of the last completed list, and of watch events after it
	list  *listing            // the list in progress, if any
}

type listing struct {
	epoch int64
	seen  map[string]keyState
}

func newStore(ctx context.Context, sc scope, s sink, ep epochSource, st *statusEntry) *store {
	return &store{ctx: ctx, scope: sc, sink: s, epochs: ep, status: st, items: map[string]keyState{}}
}

// beginList starts a new epoch. A list that fails midway leaves an epoch without SYNC; the next list
// starts a newer one, whose SYNC removes whatever only the failed one wrote.
func (s *store) beginList() (int64, error) {
	epoch, err := s.epochs.Next(s.ctx)
	if err != nil {
		return 0, err
	}
	s.status.listStarted()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = &listing{epoch: epoch, seen: map[string]keyState{}}
	return epoch, nil
}

// listed publishes one object of the list in progress. Its change time is what an earlier event of
// this process said when the object is unchanged since (same uid and resourceVersion), else what
// the object itself says (changedAt).
func (s *store) listed(obj *unstructured.Unstructured) error {
	return s.listedAs(key(obj), keyState{uid: string(obj.GetUID()), rv: obj.GetResourceVersion()}, changedAt(obj),
		func(epoch int64, changed time.Time) error { return s.publish(envelope.Added, obj, epoch, changed) })
}

// listedRaw is listed for an item read from its bytes (readRawItem): the same event, published
// without decoding the object.
func (s *store) listedRaw(it rawItem) error {
	k := it.name
	if it.ns != "" {
		k = it.ns + "/" + it.name
	}
	return s.listedAs(k, keyState{uid: it.uid, rv: it.rv}, it.changed, func(epoch int64, changed time.Time) error {
		ev := s.event(envelope.Added, epoch)
		ev.Namespace, ev.Name, ev.UID, ev.ResourceVersion = it.ns, it.name, it.uid, it.rv
		ev.ChangedAt, ev.Object = changed, it.object
		return s.sink.Publish(s.ctx, ev)
	})
}

// listedAs records the listed object under key k and publishes it with the time it changed.
func (s *store) listedAs(k string, st keyState, changed time.Time, publish func(epoch int64, changed time.Time) error) error {
	s.mu.Lock()
	l := s.list
	known, ok := s.items[k]
	s.mu.Unlock()
	if l == nil {
		return fmt.Errorf("object %s listed outside a list", k)
	}
	switch {
	case ok && known.uid == st.uid && known.rv == st.rv && known.changed != 0:
		changed = time.UnixMicro(known.changed).UTC()
	case changed.IsZero():
		// The object does not say: it changed at the latest now, and an unchanged re-list within this
		// process keeps that time.
		changed = time.Now().UTC().Truncate(time.Microsecond) // as kept in keyState
	}
	if err := publish(l.epoch, changed); err != nil {
		return err
	}
	st.changed = changed.UnixMicro()
	s.mu.Lock()
	l.seen[k] = st
	s.mu.Unlock()
	return nil
}

// changedAt is the latest time the object says it changed: its managedFields entries' times (every
// create, update, patch and status write stamps its manager's entry), its creation and its deletion.
// Zero when no managedFields entry has a time: creation alone would hide later changes, so the
// caller takes the time it observed the object. It must run before prune, which drops managedFields.
func changedAt(obj *unstructured.Unstructured) time.Time {
	meta, _ := obj.Object["metadata"].(map[string]any)
	mf, _ := meta["managedFields"].([]any) // read in place: NestedSlice would deep-copy it
	var latest time.Time
	for _, e := range mf {
		m, _ := e.(map[string]any)
		ts, _ := m["time"].(string)
		if t, err := time.Parse(time.RFC3339, ts); err == nil && t.After(latest) {
			latest = t
		}
	}
	if latest.IsZero() {
		return time.Time{}
	}
	if c := obj.GetCreationTimestamp(); c.After(latest) {
		latest = c.Time
	}
	if d := obj.GetDeletionTimestamp(); d != nil && d.After(latest) {
		latest = d.Time
	}
	return latest.UTC()
}

// Replace closes the list in progress; the reflector calls it once listPages returned.
func (s *store) Replace(_ []any, resourceVersion string) error {
	s.mu.Lock()
	l := s.list
	s.mu.Unlock()
	if l == nil {
		return fmt.Errorf("replace without a list in progress")
	}
	for k, st := range s.items {
		if _, ok := l.seen[k]; ok {
			continue
		}
		ns, name, _ := cache.SplitMetaNamespaceKey(k)
		ev := s.event(envelope.Deleted, l.epoch)
		// Deleted while nothing watched: noticed now, at the list's resourceVersion. Its own last
		// resourceVersion would place the deletion before changes the member made since, which a
		// watch of the facade has passed already and would then skip it as seen.
		ev.Namespace, ev.Name, ev.UID, ev.ResourceVersion = ns, name, st.uid, resourceVersion
		ev.ChangedAt = ev.ObservedAt
		if err := s.sink.Publish(s.ctx, ev); err != nil {
			return err
		}
	}
	count := len(l.seen)
	sync := s.event(envelope.Sync, l.epoch)
	sync.Namespace = s.scope.namespace
	sync.Count = &count
	sync.ListResourceVersion = resourceVersion
	if err := s.sink.Publish(s.ctx, sync); err != nil {
		return err
	}
	s.mu.Lock()
	s.items, s.epoch, s.list = l.seen, l.epoch, nil
	s.mu.Unlock()
	s.status.synced(l.epoch, count, resourceVersion)
	return nil
}

func (s *store) Add(obj any) error    { return s.watched(envelope.Added, obj) }
func (s *store) Update(obj any) error { return s.watched(envelope.Modified, obj) }
func (s *store) Delete(obj any) error { return s.watched(envelope.Deleted, obj) }

// Resync is a no-op: the collector sets no resync period; a full re-list is what repairs drift.
func (s *store) Resync() error { return nil }

func (s *store) watched(t envelope.Type, obj any) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("watch event %s carries %T, want *unstructured.Unstructured", t, obj)
	}
	s.mu.Lock()
	epoch := s.epoch
	s.mu.Unlock()
	// A watch event is a change happening now.
	now := time.Now().UTC()
	if err := s.publish(t, u, epoch, now); err != nil {
		return err
	}
	k := key(u)
	s.mu.Lock()
	if t == envelope.Deleted {
		delete(s.items, k)
	} else {
		s.items[k] = keyState{uid: string(u.GetUID()), rv: u.GetResourceVersion(), changed: now.UnixMicro()}
	}
	n := len(s.items)
	s.mu.Unlock()
	s.status.published(n, u.GetResourceVersion())
	return nil
}

func (s *store) publish(t envelope.Type, obj *unstructured.Unstructured, epoch int64, changed time.Time) error {
	prune(obj, s.scope.redact)
	raw, err := json.Marshal(obj.Object)
	if err != nil {
		return fmt.Errorf("encode %s %s: %w", s.scope.gvr.Resource, key(obj), err)
	}
	ev := s.event(t, epoch)
	ev.Namespace, ev.Name, ev.UID, ev.ResourceVersion = obj.GetNamespace(), obj.GetName(), string(obj.GetUID()), obj.GetResourceVersion()
	ev.ChangedAt, ev.Object = changed, raw
	return s.sink.Publish(s.ctx, ev)
}

func (s *store) event(t envelope.Type, epoch int64) *envelope.Event {
	return &envelope.Event{
		V: envelope.Version, Type: t, Cluster: s.scope.cluster,
		Group: s.scope.gvr.Group, Version: s.scope.gvr.Version, Resource: s.scope.gvr.Resource, Kind: s.scope.kind,
		Epoch: epoch, ObservedAt: time.Now().UTC(),
	}
}

func key(obj *unstructured.Unstructured) string {
	if ns := obj.GetNamespace(); ns != "" {
		return ns + "/" + obj.GetName()
	}
	return obj.GetName()
}
