package osstore

import "time"

// A delete leaves a tombstone in OpenSearch that refuses every external version below its own for
// index.gc_deletes. The epoch rule must judge it like a document: a replay of the deleting epoch
// loses to it, an event of a newer epoch (a member restored from an etcd snapshot lists the object
// again, at a lower resourceVersion) wins. OpenSearch keeps a tombstone's _version only — no
// source, and _mget answers found: false — so the writer remembers the epoch and resourceVersion
// of the deletes it wrote for as long as their tombstones may live.
//
// Why not the epoch in the external version's high bits: epochs are microseconds since 1970 (51
// bits) and resourceVersions are etcd revisions, which pass 2^33 in long-lived busy clusters; the
// 63 bits of a non-negative long hold both only if the epoch is cut to a coarse clock (seconds
// leave 33 bits to the resourceVersion, minutes 38), and two epochs in one tick would again be
// ordered by resourceVersion alone — exactly a quick restore. It would also change the _version of
// every stored document, which garbage collection deletes at.
//
// What the memory does not cover (the process restarted, or the partition moved to another
// indexer, within gc_deletes of the delete): the tombstone's epoch is unknown, and a refused op is
// judged a replay as before; the restored object is indexed by its first change after the tombstone
// expired, or by the next list of its scope. Garbage collection's deletes (gc.go) are not
// remembered either: they delete at the document's own _version, which a later list of the same
// object passes, unless the epoch rule had written that document (README, "What is not
// guaranteed").

// gcDeletes is index.gc_deletes, left at OpenSearch's default (mappings/README.md).
const gcDeletes = 60 * time.Second

// tombstoneMemory is how long the writer remembers a delete. OpenSearch prunes a tombstone once it
// is older than gc_deletes, at a refresh at least a quarter of gc_deletes after the last prune, so
// it may outlive gc_deletes by a little. A memory longer than the tombstone costs nothing (an op
// that meets no tombstone is not refused, so nothing asks); a memory shorter leaves a restored
// object refused.
const tombstoneMemory = 2 * gcDeletes

// tombstone is what the writer remembers of a delete it wrote.
type tombstone struct {
	epoch, rv int64 // of the delete event
	version   int64 // the tombstone's _version, which external_gte compares with
}

// tombstones remembers the deletes written in the last tombstoneMemory, by document. It is used by
// one goroutine at a time (the writer's).
type tombstones struct {
	now   func() time.Time
	byKey map[docKey]rememberedTombstone
	order []expiring // in the order remembered, for expiry
}

type rememberedTombstone struct {
	tombstone
	at time.Time
}

type expiring struct {
	key docKey
	at  time.Time
}

func newTombstones(now func() time.Time) *tombstones {
	return &tombstones{now: now, byKey: map[docKey]rememberedTombstone{}}
}

// add remembers a delete of k.
func (t *tombstones) add(k docKey, ts tombstone) {
	now := t.now()
	t.byKey[k] = rememberedTombstone{ts, now}
	t.order = append(t.order, expiring{k, now})
}

// forget drops k's tombstone: the document was written since, so a refusal is judged on it.
func (t *tombstones) forget(k docKey) { delete(t.byKey, k) }

// get returns k's tombstone, if a delete of k was written within tombstoneMemory.
func (t *tombstones) get(k docKey) (tombstone, bool) {
	r, ok := t.byKey[k]
	if !ok || t.now().Sub(r.at) > tombstoneMemory {
		return tombstone{}, false
	}
	return r.tombstone, true
}

// expire forgets the tombstones older than tombstoneMemory, so memory stays near the deletes of
// that window.
func (t *tombstones) expire() {
	now := t.now()
	i := 0
	for ; i < len(t.order) && now.Sub(t.order[i].at) > tombstoneMemory; i++ {
		e := t.order[i]
		if r, ok := t.byKey[e.key]; ok && !r.at.After(e.at) {
			delete(t.byKey, e.key) // not remembered again since
		}
	}
	// Appends reallocate past the expired head, so the backing array does not grow without bound.
	t.order = t.order[i:]
}
