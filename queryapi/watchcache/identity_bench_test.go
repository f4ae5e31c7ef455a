package watchcache

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	"github.com/tidwall/gjson"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/fixtures"
	"github.com/kubesearch/kubesearch/internal/store"
)

// identityObjects are n stored objects of one shape, as the index returns them to the cache's
// seed (metadata only, with the member's annotation): names and uids differ, as in a fleet.
func identityObjects(b *testing.B, n int, labels map[string]string) [][]byte {
	b.Helper()
	pod := fixtures.Pod("1000")
	meta := pod.ObjectMeta
	meta.Labels = labels
	meta.Annotations = map[string]string{document.CachedFromClusterAnnotation: "member-eu-1"}
	meta.OwnerReferences = nil // seeded objects are metadata only; stateOf reads none of the rest
	objs := make([][]byte, n)
	for i := range objs {
		m := meta
		m.Name = fmt.Sprintf("%s-%06d", pod.GenerateName, i)
		m.UID = types.UID(fmt.Sprintf("00000000-0000-4000-0000-%012d", i))
		m.ResourceVersion = fmt.Sprint(1000 + i)
		obj, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": m})
		if err != nil {
			b.Fatal(err)
		}
		objs[i] = obj
	}
	return objs
}

// BenchmarkIdentities measures what the cache keeps per cached object whatever the window holds:
// its identity (objState) under its uid in the pair's map, as seed and Apply leave it. It reports
// the live heap per object after a GC (B/object: the objState, its strings, the uid key and the
// map's share; deleted-B is the metadata-only copy deletedAt builds when it needs one), on 100,000 objects, for the fixture Pod's labels (7) and
// for the e2e benchmarks' Pod's (12, what `make bench-facade-memory` seeds). Resident memory is
// higher: the runtime keeps freed spans and heap room (GOGC) besides the live heap.
//
//	GOTOOLCHAIN=go1.27.3 go test -run '^$' -bench BenchmarkIdentities -benchtime 3x ./queryapi/watchcache/
func BenchmarkIdentities(b *testing.B) {
	const n = 100_000
	e2eLabels := map[string]string{}
	for _, k := range []string{"app", "app.kubernetes.io/name"} {
		e2eLabels[k] = "svc-042"
	}
	for k, v := range map[string]string{"app.kubernetes.io/instance": "svc-042-prod", "app.kubernetes.io/version": "1.27.3",
		"app.kubernetes.io/component": "api", "app.kubernetes.io/part-of": "shop", "app.kubernetes.io/managed-by": "helm",
		"helm.sh/chart": "svc-042-4.2.1", "pod-template-hash": "7d9f8c6b5", "team.example.com/owner": "payments",
		"security.istio.io/tlsMode": "istio", "topology.kubernetes.io/zone": "zone-1"} {
		e2eLabels[k] = v
	}
	for _, bc := range []struct {
		name   string
		labels map[string]string
	}{
		{"fixture-pod", fixtures.Pod("1").Labels},
		{"e2e-bench-pod", e2eLabels},
	} {
		b.Run(bc.name, func(b *testing.B) {
			objs := identityObjects(b, n, bc.labels)
			pair := store.Pair{Cluster: "member-eu-1", Resource: "pods"}
			var perObject, deletedBytes float64
			b.ReportAllocs()
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				c := New(Options{})
				m := c.objectsOf(pair)
				for _, obj := range objs {
					m[gjson.GetBytes(obj, "metadata.uid").Str] = stateOf(obj, 1) // as seed does
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				perObject = float64(after.HeapAlloc-before.HeapAlloc) / n
				uid := "00000000-0000-4000-0000-000000000001"
				deletedBytes = float64(len(deletedAt(m[uid], pair, uid, 0))) // built when needed, not kept
				runtime.KeepAlive(c)
			}
			b.ReportMetric(perObject, "B/object")
			b.ReportMetric(deletedBytes, "deleted-B")
			b.ReportMetric(perObject*n/(1<<20), "MiB/100k")
		})
	}
}
