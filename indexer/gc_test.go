package indexer

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/kubesearch/kubesearch/internal/envelope"
)

// TestMarkerQueriesGolden pins the searches of the documents SYNC and PURGE markers delete.
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
			filter, err := gcFilter(&tt.ev)
			if err != nil {
				t.Fatal(err)
			}
			body, err := json.Marshal(gcSearch(filter, gcPageSize, json.RawMessage(`["after-uid","kubernetes-pod-v1"]`)))
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
	if _, err := gcFilter(&envelope.Event{Type: envelope.Added}); err == nil {
		t.Error("gcFilter accepted an ADDED event")
	}
}
