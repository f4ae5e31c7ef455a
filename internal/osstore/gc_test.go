package osstore

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/kubesearch/kubesearch/internal/store"
)

// TestMarkerQueriesGolden pins the searches of the documents SYNC and PURGE markers delete.
func TestMarkerQueriesGolden(t *testing.T) {
	tests := []struct {
		name   string
		filter []any
	}{
		{"sync-cluster-wide", syncFilter(store.ListScope{Pair: store.Pair{Cluster: "member1", Group: "apps", Resource: "deployments"},
			Kind: "Deployment"}, 1767225600000001)},
		{"sync-core-namespace", syncFilter(store.ListScope{Pair: store.Pair{Cluster: "member1", Resource: "pods"},
			Kind: "Pod", Namespace: "shop"}, 1767225600000002)},
		{"purge-cluster-wide", purgeFilter(store.Selection{Cluster: "member2", Group: "apps", Kind: "Deployment"})},
		{"purge-namespace", purgeFilter(store.Selection{Cluster: "member2", Kind: "ConfigMap", Namespace: "team-a"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, err := json.Marshal(gcSearch(tt.filter, gcPageSize, json.RawMessage(`["after-uid","kubernetes-pod-v1"]`), false))
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := json.Indent(&out, body, "", "  "); err != nil {
				t.Fatal(err)
			}
			out.WriteByte('\n')
			checkGolden(t, tt.name, out.Bytes())
		})
	}
}
