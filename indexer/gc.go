package indexer

import (
	"encoding/json"
	"fmt"

	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/envelope"
)

// Garbage collection deletes what a SYNC or PURGE marker says is gone. It does not use
// _delete_by_query: that deletes with internal versioning, which leaves a tombstone at the document's
// version + 1 for index.gc_deletes (60 s). A re-list of the same objects within that minute (a
// selection widened from one namespace to all, removed and added back, a cluster re-added) carries
// the same resourceVersions, and external_gte refuses every unchanged object against that tombstone:
// the objects would stay missing until they change. Instead the matching documents are read (id,
// concrete index, _version) and deleted in _bulk with external_gte at their own _version, so the
// tombstone keeps exactly the version the document had and an equal one is accepted again, while an
// older (replayed) event is still refused.

// gcFilter is the filter of the documents a SYNC or PURGE marker deletes.
//
// SYNC: the documents of its (cluster, resource, namespace scope) from an older epoch, i.e. objects
// that were not in the list that just completed.
//
// PURGE: every document of (cluster, group, kind), or of one namespace of it, whatever its epoch. It
// names the kind, not the resource: a selection the member never served has no resource name.
func gcFilter(ev *envelope.Event) ([]any, error) {
	var filter []any
	switch ev.Type {
	case envelope.Sync:
		filter = []any{term(document.FieldCluster, ev.Cluster), term(document.FieldGroup, ev.Group), term(document.FieldResource, ev.Resource)}
	case envelope.Purge:
		filter = []any{term(document.FieldCluster, ev.Cluster), term(document.FieldGroup, ev.Group), term(document.FieldKind, ev.Kind)}
	default:
		return nil, fmt.Errorf("garbage collection for a %s event", ev.Type)
	}
	if ev.Namespace != "" {
		filter = append(filter, term(document.FieldNamespace, ev.Namespace))
	}
	if ev.Type == envelope.Sync {
		filter = append(filter, map[string]any{"range": map[string]any{document.FieldEpoch: map[string]any{"lt": ev.Epoch}}})
	}
	return filter, nil
}

// gcSearch is one page of the documents matching filter, after the sort values of the last hit of
// the page before (nil for the first): ids, concrete indices and versions only, in (uid, index)
// order — total even when an alias reaches several indices holding the same uid.
func gcSearch(filter []any, size int, after json.RawMessage) map[string]any {
	body := map[string]any{
		"size":             size,
		"_source":          false,
		"version":          true,
		"track_total_hits": false,
		"query":            map[string]any{"bool": map[string]any{"filter": filter}},
		"sort":             []any{map[string]any{document.FieldUID: "asc"}, map[string]any{"_index": "asc"}},
	}
	if after != nil {
		body["search_after"] = after
	}
	return body
}

// purgeStateQuery selects the watermark documents of a PURGE marker's (cluster, group, kind).
func purgeStateQuery(ev *envelope.Event) map[string]any {
	return map[string]any{
		"size": 1000,
		"query": map[string]any{"bool": map[string]any{"filter": []any{
			term("cluster", ev.Cluster), term("group", ev.Group), term("kind", ev.Kind),
		}}},
	}
}

func term(field, value string) map[string]any {
	return map[string]any{"term": map[string]any{field: value}}
}
