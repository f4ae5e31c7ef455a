package osstore

import (
	"errors"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/internal/store"
)

// TestWatermarkDocument pins the stored form of a watermark: the store.Watermark and its key, which
// Watermarks sorts on; it reads back to the same watermark.
func TestWatermarkDocument(t *testing.T) {
	w := store.Watermark{Cluster: "m1", Resource: "pods", Kind: "Pod", Epoch: 100, Listing: true,
		UpdatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Scopes: []store.WatermarkScope{
			{Namespace: "a", ResourceVersion: 50, Epoch: 100, Synced: true},
			{Namespace: "b", Listing: true},
		}}
	doc, err := watermarkDocument(w)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"key":"m1//pods","cluster":"m1","group":"","resource":"pods","kind":"Pod","resourceVersion":0,"epoch":100,"listing":true,"updatedAt":"2026-01-02T03:04:05Z",` +
		`"scopes":[{"namespace":"a","resourceVersion":50,"epoch":100,"listing":false,"synced":true},{"namespace":"b","resourceVersion":0,"epoch":0,"listing":true,"synced":false}]}`
	if string(doc) != want {
		t.Errorf("document:\ngot  %s\nwant %s", doc, want)
	}
	back, err := parseWatermark(string(doc))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := watermarkDocument(back); string(b) != want {
		t.Errorf("read back as %s", b)
	}
}

// TestWatermarkPersistence: saved watermarks load back by pair, a selection finds the pairs of its
// (cluster, group, kind) whatever the namespace, and deleted ones are gone; a missing state index
// holds none.
func TestWatermarkPersistence(t *testing.T) {
	_, s := newEngineStore(t)
	pods := store.Pair{Cluster: "m1", Resource: "pods"}
	cms := store.Pair{Cluster: "m1", Resource: "configmaps"}
	other := store.Pair{Cluster: "m2", Resource: "pods"}
	if got, err := s.LoadWatermarks(t.Context(), []store.Pair{pods}); err != nil || len(got) != 0 {
		t.Fatalf("before any: %v, %v", got, err)
	}
	ws := []store.Watermark{
		{Cluster: "m1", Resource: "pods", Kind: "Pod", ResourceVersion: 7},
		{Cluster: "m1", Resource: "configmaps", Kind: "ConfigMap", ResourceVersion: 9},
		{Cluster: "m2", Resource: "pods", Kind: "Pod", ResourceVersion: 3},
	}
	if err := s.SaveWatermarks(t.Context(), ws); err != nil {
		t.Fatal(err)
	}
	got, err := s.LoadWatermarks(t.Context(), []store.Pair{pods, {Cluster: "m3", Resource: "pods"}, other})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[pods].ResourceVersion != 7 || got[other].ResourceVersion != 3 {
		t.Errorf("loaded: %v", got)
	}
	sel, err := s.SelectionWatermarks(t.Context(), store.Selection{Cluster: "m1", Kind: "Pod", Namespace: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	if len(sel) != 1 || sel[0].Pair() != pods {
		t.Errorf("selection m1 Pod: %+v", sel)
	}
	if err := s.DeleteWatermarks(t.Context(), []store.Pair{pods}); err != nil {
		t.Fatal(err)
	}
	got, err = s.LoadWatermarks(t.Context(), []store.Pair{pods, cms})
	if err != nil || len(got) != 1 || got[cms] == nil {
		t.Errorf("after deleting m1 pods: %v, %v", got, err)
	}
}

// TestMarkerRefusals: a garbage collection OpenSearch refuses for good is store.ErrRejected, so the
// indexer dead-letters its marker; one that may pass later (OpenSearch away or busy, credentials or
// permissions wrong, a write block) is not, and is retried.
func TestMarkerRefusals(t *testing.T) {
	const refresh = `{"_shards":{"total":1,"successful":1,"failed":0}}`
	tests := []struct {
		name     string
		search   answer
		rejected bool
	}{
		{"malformed", answer{400, `{"error":{"type":"parsing_exception","reason":"unknown query"},"status":400}`}, true},
		{"not found, not an index", answer{404, `{"error":{"type":"resource_not_found_exception","reason":"x"},"status":404}`}, true},
		{"too large", answer{413, ``}, true},
		{"busy", answer{429, `{"error":{"type":"es_rejected_execution_exception","reason":"rejected"},"status":429}`}, false},
		{"away", answer{503, `{"error":{"type":"unavailable_shards_exception","reason":"no shard"},"status":503}`}, false},
		{"unauthorized", answer{401, `{"error":{"type":"security_exception","reason":"missing credentials"},"status":401}`}, false},
		{"forbidden", answer{403, `{"error":{"type":"security_exception","reason":"no permissions"},"status":403}`}, false},
		{"blocked", answer{403, `{"error":{"type":"cluster_block_exception","reason":"index [x] blocked"},"status":403}`}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, s := newScripted(t, map[string][]answer{
				"POST /kubernetes-pod/_refresh": {{200, refresh}},
				"POST /kubernetes-pod/_search":  {tt.search},
			})
			_, err := s.DeleteOlder(t.Context(), store.ListScope{Pair: store.Pair{Cluster: "m1", Resource: "pods"}, Kind: "Pod"}, 5, nil)
			if err == nil {
				t.Fatal("no error")
			}
			if got := errors.Is(err, store.ErrRejected); got != tt.rejected {
				t.Errorf("DeleteOlder: %v; rejected %v, want %v", err, got, tt.rejected)
			}
			_, err = s.DeleteAll(t.Context(), store.Selection{Cluster: "m1", Kind: "Pod"}, nil)
			if got := errors.Is(err, store.ErrRejected); got != tt.rejected {
				t.Errorf("DeleteAll: %v; rejected %v, want %v", err, got, tt.rejected)
			}
		})
	}
}
