//go:build e2e && bench

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/kubesearch/kubesearch/internal/changes"
	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/osstore"
	"github.com/kubesearch/kubesearch/internal/registry"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/mappings"
	"github.com/kubesearch/kubesearch/tests/testbed"
)

// TestBenchFacadeMemory measures the query API's resident memory under BENCH_FACADE_LISTERS (10)
// concurrent full LISTs of every Pod of a fleet of BENCH_FACADE_MEMORY_PODS (100,000) Pods: the
// documents are fed to the index as the indexer writes them (9 KB Pods over three clusters, with
// their watermarks) and the three clusters' selection records to the ledger, so the facade serves
// them as it serves collected ones, without 100,000 Pods in the test bed's members. The LISTs are
// the same as TestBenchFacade's memory step (benchFacadeMemory). Goal: growth ≤ 512 MiB. Run it with
// `make bench-facade-memory`.
func TestBenchFacadeMemory(t *testing.T) {
	buildFlags = nil    // measure the binary users run, not a race-detector build
	kubesearchBinary(t) // built now, not inside a timed process start
	env := testbed.Get(t)
	ctx := t.Context()
	n := envInt("BENCH_FACADE_MEMORY_PODS", 100000)
	clusters := []string{"mem-1", "mem-2", "mem-3"}
	p := &queryPipeline{env: env, topic: uniqueName("bench-memory"), prefix: uniqueName("bench-memory"),
		collectorStatus: "http://127.0.0.1:1/status"} // no collector: collection state Unknown

	oss, err := osstore.New(osstore.Options{Addresses: []string{env.OpenSearchURL}, Index: mappings.Options{Prefix: p.prefix}})
	if err != nil {
		t.Fatal(err)
	}
	defer oss.Close()
	t.Cleanup(func() {
		req, _ := http.NewRequest(http.MethodDelete, env.OpenSearchURL+"/"+p.prefix+"-*", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	if err := oss.Setup(ctx, store.SetupOptions{}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	observed := time.Now().UTC()
	created := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	maxRV := map[string]int64{}
	ops := make([]store.Op, 0, 1000)
	for i := range n {
		cluster, local := clusters[i%len(clusters)], i/len(clusters)
		// Namespace bench-facade holds them, as TestBenchFacade's, so benchFacadeMemory's first
		// probe finds some.
		ns := benchFacadePodNS
		if local%4 != 0 {
			ns = fmt.Sprintf("team-%02d", local%20)
		}
		rv := 1000 + local
		ev := benchPodEvent(cluster, ns, local, fmt.Sprintf("00000000-0000-4000-%04d-%012d", i%len(clusters), local), rv, created, observed)
		doc, err := document.Build(ev)
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, store.Op{Kind: "Pod", UID: ev.UID, Doc: doc, Epoch: 1, Versioned: true, Version: int64(rv)})
		maxRV[cluster] = max(maxRV[cluster], int64(rv))
		if len(ops) == cap(ops) || i == n-1 {
			if fails, err := oss.Write(ctx, ops); err != nil || len(fails) > 0 {
				t.Fatalf("write: %v %v", err, fails)
			}
			ops = ops[:0]
		}
	}
	var ws []store.Watermark
	for _, c := range clusters {
		ws = append(ws, store.Watermark{Cluster: c, Resource: "pods", Kind: "Pod", ResourceVersion: maxRV[c], Epoch: 1, UpdatedAt: time.Now().UTC(),
			Scopes: []store.WatermarkScope{{ResourceVersion: maxRV[c], Epoch: 1, Synced: true}}})
	}
	if err := oss.SaveWatermarks(ctx, ws); err != nil {
		t.Fatal(err)
	}
	if err := oss.Refresh(ctx, "Pod"); err != nil {
		t.Fatal(err)
	}
	t.Logf("BENCH fed %d Pod documents and %d watermarks in %s", n, len(ws), time.Since(t0).Round(time.Second))

	// What a collector would have recorded: each cluster caches pods.
	w := &kafka.Writer{Addr: kafka.TCP(env.KafkaBrokers...), Topic: registry.LedgerTopic(p.topic), AllowAutoTopicCreation: true, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	var msgs []kafka.Message
	for _, c := range clusters {
		rec := registry.SelectionRecord{V: 1, Cluster: c, Version: "v1", Resource: "pods", Kind: "Pod", Namespaced: true,
			Singular: "pod", ShortNames: []string{"po"}, Categories: []string{"all"}, UpdatedAt: time.Now().UTC()}
		value, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, kafka.Message{Key: []byte(registry.SelectionRecordKey(c, rec.Key())), Value: value})
	}
	if err := writeRetrying(t, w, msgs); err != nil {
		t.Fatalf("write the ledger: %v", err)
	}
	tailTopic(t, env.KafkaBrokers, p.topic) // the (empty) event topic
	// The change feed the query API follows (--changes-topic), as the indexers would have made it
	// (empty: the documents were written directly). BENCH_FACADE_MEMORY_FEED=0 leaves it out, so
	// the watch cache follows the event stream and seeds an identity per object from the index,
	// the query API's default.
	var args []string
	if os.Getenv("BENCH_FACADE_MEMORY_FEED") != "0" {
		tailTopic(t, env.KafkaBrokers, changes.TopicOf(p.topic))
		args = []string{"--changes-topic", changes.TopicOf(p.topic)}
	}

	rows := benchFacadeMemory(t, p, n, args...)
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "\n| %s | %s | %s |", r.what, r.value, r.goal)
	}
	t.Logf("BENCH summary at %d Pods:%s", n, b.String())
	recordRows(t, "facade-memory", rows)
}

// writeRetrying writes msgs, retrying while a topic being created has no leader yet.
func writeRetrying(t *testing.T, w *kafka.Writer, msgs []kafka.Message) error {
	var err error
	for range 20 {
		if err = w.WriteMessages(t.Context(), msgs...); err == nil {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return err
}
