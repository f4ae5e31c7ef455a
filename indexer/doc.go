// Package indexer turns the event stream into OpenSearch documents (DESIGN sections 3 to 6): a
// member of a Kafka consumer group that writes every object event it reads to the index of its kind,
// garbage-collects after each list, and records how far the index is. What is said to OpenSearch,
// and how, is the backend's (internal/osstore): the indexer hands it store.Ops, markers' scopes and
// watermarks through the small interfaces of consumer.go.
//
// It covers:
//
//   - Setup, by the backend (osstore.Store.Setup), retried until done: the index template of
//     package mappings, put when missing or older (never over a newer one), the state index, and
//     rolls; indices created on the first event of their kind as "<IndexName>-v<mappings.Version>"
//     behind the alias mappings.IndexName, its write index, so a mapping change can roll to a new
//     index. The document an event becomes is package document's.
//   - Consumption: a stream.GroupReader in a consumer group, Fetch and explicit Commits; events
//     batched by count, bytes and time into _bulk requests; a batch's offsets committed only once all
//     of it is written (or dead-lettered). Batches are applied one at a time, in order; the next one
//     is decoded (documents built) while the previous one is written. On shutdown the batches in
//     flight are written and committed.
//   - Writes (osstore.Store.Write): `index` and `delete` operations with _id = cluster/uid
//     (store.DocID), version = resourceVersion and version_type external_gte, so a replayed or late
//     event never overwrites newer state and replaying the topic leaves the index as it was. resourceVersions that are not
//     integers (some aggregated APIs) are written without versioning, logged and counted.
//   - The epoch rule: a version conflict is resolved by reading the stored document's epoch and
//     resourceVersion. A newer epoch wins whatever the resourceVersions say (a member rebuilt under
//     the same name counts from low numbers again), as does a higher resourceVersion of the same
//     epoch; the winner replaces the document with a compare-and-set on its _seq_no. Anything else
//     is a replay, counted, not an error. The replacement is not a delete followed by a versioned
//     index: the delete's tombstone keeps the old, higher version for index.gc_deletes, and would
//     refuse that index too.
//   - SYNC and PURGE markers, applied in partition order: everything before a marker is written
//     first; the index is refreshed, then a SYNC deletes the documents of its (cluster, resource,
//     namespace scope) from older epochs, a PURGE every document of its (cluster, group, kind) or one
//     namespace of it, each at its own _version (osstore's gc.go says why not _delete_by_query).
//     Nothing is deleted before its marker.
//   - Delivery: per-item results of a _bulk request; 429, 5xx, 401 and 403 retried with backoff by
//     the backend (those items only), OpenSearch away retried with backoff without committing
//     anything; what OpenSearch will never accept (a mapping conflict: a store.Failure naming the
//     op's position, or a marker refused with store.ErrRejected), malformed envelopes and objects,
//     and envelopes of an unknown version go to the dead-letter topic with the reason and their
//     origin in headers (stream.HeaderReason and others), so no event stalls its partition.
//   - Watermarks (DESIGN section 5): per (cluster, resource), the resourceVersion up to which every
//     event is written and searchable, made so by a refresh every WatermarkInterval and stored in
//     mappings.StateIndex by the backend, which reads them for the query API too.
//   - Rolls (osstore's roll.go): at start, before consuming, every alias whose index is of an older
//     mappings.Version moves to a new index, hidden while documents are copied and rebuilt from their
//     stored objects, swapped in atomically; writes to the old index are blocked meanwhile, and a
//     cluster_block_exception is retried, never dead-lettered.
//   - /healthz, /readyz (setup done — template, state index, rolls —, OpenSearch answering) and
//     /metrics.
//
// It leaves out the change history (an append-only changes index, later work) and reading Kubernetes
// Secrets (a secretRef of the registries must be mounted and passed as a folder).
//
// # Caveats
//
// Delete tombstones live only index.gc_deletes (60 s, OpenSearch's default, left as is). An event
// replayed more than that after its object's deletion (a consumer group reset to an old offset, say)
// brings the object back, until the next SYNC marker of its scope removes it again. Within those 60 s
// a replay is refused by the tombstone's version, and counted as a replay; an event of a newer epoch
// (the object listed again by a member restored from an etcd snapshot) passes the tombstone when the
// backend remembers the delete's epoch, which it does for the deletes it wrote since it started
// (internal/osstore/tombstone.go).
//
// One writer per (cluster, resource) at a time. The indexer relies on the partition's order: all
// events of a pair share a partition, and a consumer group gives each partition to one member. Two
// collectors publishing the same pair (a rolling update, a second replica) interleave epochs, and each
// SYNC deletes what the other listed; run one collector per member cluster until collectors take a
// lease. Likewise a consumer that lost its partition in a rebalance may still finish its batch in
// flight: that is harmless (the writes are idempotent and versioned), but an offset it commits late
// may make the new owner consume some events twice.
package indexer
