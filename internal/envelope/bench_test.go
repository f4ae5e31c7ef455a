package envelope

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/internal/fixtures"
)

// benchPod is a MODIFIED event of a Pod as a collector publishes it (managedFields already pruned):
// three containers with probes, resources and env, an init container, a projected token volume and
// a full status, about 9 KB of JSON — the typical object, not the smallest one.
func benchPod(b *testing.B) *Event {
	b.Helper()
	pod := fixtures.Pod("184467")
	at := fixtures.At
	obj, err := json.Marshal(pod)
	if err != nil {
		b.Fatal(err)
	}
	return &Event{V: Version, Type: Modified, Cluster: "member-eu-1", Version: "v1", Resource: "pods", Kind: "Pod",
		Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID), ResourceVersion: pod.ResourceVersion,
		Epoch: 1767225600000001, ObservedAt: at, ChangedAt: at.Add(-time.Second), Object: obj}
}

// BenchmarkMarshal is the collector's encoding of every event it publishes (collector/publish.go).
func BenchmarkMarshal(b *testing.B) {
	ev := benchPod(b)
	b.SetBytes(int64(len(ev.Object)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ev.Marshal(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnmarshal is the first step of the indexer's (and the watch cache's) handling of every
// message: decode and validate.
func BenchmarkUnmarshal(b *testing.B) {
	value, err := benchPod(b).Marshal()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(value)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Unmarshal(value); err != nil {
			b.Fatal(err)
		}
	}
}
