// Package osstore is kubesearch's OpenSearch backend (DESIGN sections 4 and 5): the only code that
// speaks HTTP to OpenSearch or writes its DSL. One Store, made by New from addresses and Security,
// serves both halves:
//
//   - Reads (the query API): a query.Query compiled into query DSL (compile.go) and run with
//     point-in-time paging and signed continue tokens over the indices the indexer writes
//     (mappings/README.md describes every field used here), the answers' hits read in one pass
//     (scan.go); per-pair counts; the stored watermarks. The point-in-times of continue tokens are
//     counted per subject and bounded (store.Limits, store.Snapshots), as are searches by fuzzy
//     name running.
//   - Writes (the indexer): Write applies store.Ops as _bulk index and delete operations with
//     external versioning, retrying what OpenSearch cannot take now, applying the epoch rule to
//     version conflicts — with delete tombstones, whose epochs the writer remembers (tombstone.go) —
//     and reporting what it will never accept by position (write.go); DeleteOlder
//     and DeleteAll collect garbage after SYNC and PURGE markers (gc.go); the watermarks are loaded,
//     saved and purged in the state index (progress.go).
//   - Setup (the indexer, before it consumes): the index template, the state index, and rolls of
//     aliases whose index is of an older mapping version, under a lease (setup.go, roll.go,
//     lease.go). Concrete indices "<IndexName>-v<mappings.Version>" are created behind their alias
//     by the first write of their kind.
//
// Every request goes through one transport (nodes.go) that fails a node over when it accepts
// connections but does not answer, as a hung or partitioned node does. Every answer is classified
// in one place (client.go, responseError) into the store package's errors; the write path's retry
// rule (transient) reads the same errors. The write path's metrics are registered with
// Options.Registerer under the indexer's names.
//
// It leaves out HTTP serving (queryapi), consuming the stream and dead letters (indexer), the
// documents' shape (package document) and the embedded store of the standalone mode.
package osstore
