package indexer

import (
	"encoding/json"
	"fmt"

	"github.com/kubesearch/kubesearch/internal/envelope"
)

// syncQuery is the _delete_by_query body of a SYNC marker: the documents of its (cluster, resource,
// namespace scope) from an older epoch, i.e. objects that were not in the list that just completed.
// Filters only (no scoring); the namespace term only when the scope is one namespace.
func syncQuery(ev *envelope.Event) ([]byte, error) {
	if ev.Type != envelope.Sync {
		return nil, fmt.Errorf("sync query for a %s event", ev.Type)
	}
	filter := []any{
		term("cluster", ev.Cluster),
		term("group", ev.Group),
		term("resource", ev.Resource),
	}
	if ev.Namespace != "" {
		filter = append(filter, term("namespace", ev.Namespace))
	}
	filter = append(filter, map[string]any{"range": map[string]any{"epoch": map[string]any{"lt": ev.Epoch}}})
	return boolFilter(filter)
}

// purgeQuery is the _delete_by_query body of a PURGE marker: every document of (cluster, group,
// kind), or of one namespace of it, whatever its epoch. It names the kind, not the resource: a
// selection the member never served has no resource name.
func purgeQuery(ev *envelope.Event) ([]byte, error) {
	if ev.Type != envelope.Purge {
		return nil, fmt.Errorf("purge query for a %s event", ev.Type)
	}
	filter := []any{
		term("cluster", ev.Cluster),
		term("group", ev.Group),
		term("kind", ev.Kind),
	}
	if ev.Namespace != "" {
		filter = append(filter, term("namespace", ev.Namespace))
	}
	return boolFilter(filter)
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

func boolFilter(filter []any) ([]byte, error) {
	return json.Marshal(map[string]any{"query": map[string]any{"bool": map[string]any{"filter": filter}}})
}
