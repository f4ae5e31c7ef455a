// Package blevestore is kubesearch's embedded store for the standalone mode (DESIGN sections 1, 4
// and 5): the same contract as internal/osstore — the same method set, answer for answer — on one
// bleve (scorch) index and one bbolt database under a directory, so the indexer and the query API
// run on either.
//
//   - Documents are the JSON documents of package document. index.go builds each one's bleve
//     fields as the OpenSearch mapping (mappings/kubernetes.json) indexes it: keyword fields as
//     exact terms, long and date fields as sortable terms (dates in milliseconds), text with the
//     standard analyzer's words, and the flat_object "object" as one term "path=value" per leaf
//     plus its path, so field selectors on any path — through lists by any element — and their
//     "missing or empty" are term queries.
//   - Queries: one compiler (compile.go) from the query model to bleve queries, clause for clause
//     as osstore's compile.go, terms the index does not hold pruned. A search (search.go) reads
//     one index snapshot: one pass over the matches counts them (exact totals, exact facets) and
//     keeps the top of the page in the query's order (rank.go: missing values last, uid and
//     cluster tiebreakers); when more than a page matches, the snapshot is held for the signed
//     continue token, which carries the last item's place, until the keep-alive passes, the last
//     page, or Release. A later page is the top after that place; a query read to the end
//     (Drain), or past a few pages, ranks its whole order once in the snapshot. Items are the
//     stored objects written as OpenSearch's filtered _source writes them (source.go), written so
//     once when the document is (stored.go): of a document only its object and the few fields
//     read besides it are stored. Folders of earlier versions, which stored whole documents, are
//     read as they are.
//   - Writes (write.go) keep OpenSearch's external versioning and osstore's epoch rule, with
//     tombstones; DeleteOlder and DeleteAll collect garbage as osstore's gc.go. Every batch is
//     committed to disk before Write returns, so Refresh has nothing left to do.
//   - Watermarks live in the bbolt database (progress.go).
//
// Documented limits and differences from OpenSearch:
//
//   - Relevance (free text without a sort) is bleve's TF-IDF score of the text words, not
//     Lucene's BM25 over per-kind indices: the matches, totals and every explicit sort are the
//     same, the order of relevance-sorted results may differ (OpenSearch's own depends on its
//     segments' deleted documents).
//   - Fuzzy names expand to the 50 nearest words across every kind, where OpenSearch expands per
//     kind's index; they differ only past 50 similar name words.
//   - Delete tombstones are kept in memory for 60 seconds (index.gc_deletes) and forgotten on a
//     restart, as OpenSearch forgets them on a refresh past that age. They keep the epoch and
//     resourceVersion of their delete, as osstore's writer remembers those of the deletes it wrote,
//     which OpenSearch's own tombstones survive across an indexer restart: after one, OpenSearch
//     refuses what the embedded store takes.
//   - Facet counts are exact (ErrorBound 0) where OpenSearch's may be approximate past 1000
//     values of one dimension in one index; totals are never a lower bound.
//   - Snapshots are bounded per subject and for the store (store.Limits) as osstore bounds its
//     point-in-times: past a bound, the least recently used idle one of a client token is closed.
//   - One process at a time: the directory is locked while a Store is open.
//
// It leaves out HTTP, the stream and the documents' shape.
package blevestore
