package indexer

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/kubesearch/kubesearch/internal/envelope"
)

// TestMarkerQueriesGolden pins the _delete_by_query bodies of SYNC and PURGE markers.
func TestMarkerQueriesGolden(t *testing.T) {
	count := 3
	tests := []struct {
		name string
		ev   envelope.Event
	}{
		{"sync-cluster-wide", envelope.Event{Type: envelope.Sync, Cluster: "member1", Group: "apps", Version: "v1",
			Resource: "deployments", Kind: "Deployment", Epoch: 1767225600000001, Count: &count, ListResourceVersion: "1234"}},
		{"sync-core-namespace", envelope.Event{Type: envelope.Sync, Cluster: "member1", Version: "v1",
			Resource: "pods", Kind: "Pod", Namespace: "shop", Epoch: 1767225600000002, Count: &count}},
		{"purge-cluster-wide", envelope.Event{Type: envelope.Purge, Cluster: "member2", Group: "apps", Kind: "Deployment", Epoch: 9}},
		{"purge-namespace", envelope.Event{Type: envelope.Purge, Cluster: "member2", Kind: "ConfigMap", Namespace: "team-a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			query := syncQuery
			if tt.ev.Type == envelope.Purge {
				query = purgeQuery
			}
			body, err := query(&tt.ev)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := json.Indent(&out, body, "", "  "); err != nil {
				t.Fatal(err)
			}
			out.WriteByte('\n')
			golden(t, tt.name+".golden", out.Bytes())
		})
	}
	if _, err := syncQuery(&envelope.Event{Type: envelope.Purge}); err == nil {
		t.Error("syncQuery accepted a PURGE")
	}
}
