//go:build e2e && bench

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opensearch-project/opensearch-go/v4"
	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"
	"github.com/segmentio/kafka-go"
	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/osstore"
	"github.com/kubesearch/kubesearch/mappings"
	"github.com/kubesearch/kubesearch/tests/testbed"
)

// TestBenchIndexer measures the indexer writing BENCH_DOCS (50,000) realistic Pod documents from Kafka
// into OpenSearch, beside a raw _bulk replay of the same prebuilt documents into the same node, in the
// same run, with the same client, batch size, version type and refresh settings; the replay runs
// before and after the indexer. It reports docs/s, MB/s and the ratio to the replays' mean; it
// asserts only that every document arrived. Run it with `make bench-indexer`.
func TestBenchIndexer(t *testing.T) {
	buildFlags = nil    // measure the binary users run, not a race-detector build
	kubesearchBinary(t) // built now, not inside a timed process start
	env := testbed.Get(t)
	n := envInt("BENCH_DOCS", 50000)
	const batch = 1000 // the indexer's default --batch-size

	// The events a collector would publish for n Pods of one cluster, status included.
	events := benchPodEvents("bench", "bench-indexer", n, 8000, 1000)
	values := make([][]byte, n)
	var eventBytes int
	for i := range events {
		values[i], _ = events[i].Marshal()
		eventBytes += len(values[i])
	}
	t.Logf("%d Pod events, %.1f MiB, %.1f KB average", n, float64(eventBytes)/(1<<20), float64(eventBytes)/float64(n)/1000)

	// Raw: the same documents, prebuilt, sent by the same client in batches of the same size, one
	// request in flight like the indexer, external_gte versions, into an index from the same template.
	prefix := uniqueName("bench")
	client, err := opensearchapi.NewClient(opensearchapi.Config{Client: opensearch.Config{Addresses: []string{env.OpenSearchURL}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = client.Indices.Delete(context.Background(), opensearchapi.IndicesDeleteReq{Indices: []string{prefix + "-*", prefix + "raw*"}})
	})
	docs := make([][]byte, n)
	var docBytes int
	for i, ev := range events {
		if docs[i], err = document.Build(ev); err != nil {
			t.Fatal(err)
		}
		docBytes += len(docs[i])
	}
	rawReplay := func(rawPrefix string) time.Duration {
		tmpl, err := mappings.IndexTemplate(mappings.Options{Prefix: rawPrefix})
		if err != nil {
			t.Fatal(err)
		}
		mustHTTP(t, "PUT", env.OpenSearchURL+"/_index_template/"+mappings.TemplateName(rawPrefix), string(tmpl))
		t.Cleanup(func() {
			req, _ := http.NewRequest("DELETE", env.OpenSearchURL+"/_index_template/"+mappings.TemplateName(rawPrefix), nil)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		})
		rawIndex := osstore.VersionedIndexName(mappings.IndexName(rawPrefix, "Pod"))
		mustHTTP(t, "PUT", env.OpenSearchURL+"/"+rawIndex, "")
		start := time.Now()
		for i := 0; i < n; i += batch {
			var body bytes.Buffer
			for j := i; j < min(i+batch, n); j++ {
				fmt.Fprintf(&body, `{"index":{"_index":%q,"_id":%q,"version":%s,"version_type":"external_gte"}}`+"\n", rawIndex, events[j].UID, events[j].ResourceVersion)
				body.Write(docs[j])
				body.WriteByte('\n')
			}
			resp, err := client.Bulk(t.Context(), opensearchapi.BulkReq{Body: &body})
			if err != nil || resp.Errors {
				t.Fatalf("raw bulk: %v (errors %v)", err, resp != nil && resp.Errors)
			}
		}
		took := time.Since(start)
		if got := countDocs(t, env, rawIndex); got != n {
			t.Fatalf("raw replay wrote %d documents, want %d", got, n)
		}
		return took
	}
	// The raw replay runs before the indexer and again after it. The first one also warms up
	// OpenSearch's JVM, which otherwise slows whichever phase comes first on a freshly started test
	// bed (seen: ratio 0.60 on a cold JVM, 0.82 on a warm one, same code); the mean of the two evens
	// out load that drifts during the run (merges, other tests sharing the test bed).
	rawBefore := rawReplay(prefix + "raw1")

	// Through Kafka and the indexer.
	topic := uniqueName("bench-indexer")
	tailTopic(t, env.KafkaBrokers, topic)
	w := &kafka.Writer{Addr: kafka.TCP(env.KafkaBrokers...), Topic: topic, Balancer: &kafka.Hash{},
		RequiredAcks: kafka.RequireAll, BatchTimeout: 5 * time.Millisecond, BatchSize: 1000, BatchBytes: 8 << 20,
		Compression: kafka.Lz4, Transport: &kafka.Transport{}}
	msgs := make([]kafka.Message, n)
	for i, v := range values {
		msgs[i] = kafka.Message{Key: events[i].Key(), Value: v}
	}
	for i := 0; i < n; i += 5000 {
		if err := w.WriteMessages(t.Context(), msgs[i:min(i+5000, n)]...); err != nil {
			t.Fatal(err)
		}
	}
	_ = w.Close()

	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	start := time.Now()
	args := []string{"indexer", "--kafka-brokers", strings.Join(env.KafkaBrokers, ","),
		"--topic", topic, "--group", topic + "-indexer", "--opensearch-addresses", env.OpenSearchURL,
		"--index-prefix", prefix, "--listen", addr, "--batch-size", strconv.Itoa(batch)}
	if c := os.Getenv("BENCH_INDEXER_CHANGES"); c != "" {
		// "none": without the change feed, to measure what publishing it costs.
		args = append(args, "--changes-topic", c)
	}
	startProcess(t, "indexer", args...)
	waitGroupCaughtUp(t, env, topic, topic+"-indexer", 20*time.Minute)
	viaIndexer := time.Since(start)
	alias := mappings.IndexName(prefix, "Pod")
	if got := countDocs(t, env, alias); got != n {
		t.Fatalf("indexer wrote %d documents, want %d", got, n)
	}
	// How much of that the indexer spent waiting for _bulk answers, from its own metrics.
	metrics := string(mustHTTP(t, "GET", "http://"+addr+"/metrics", ""))

	rawAfter := rawReplay(prefix + "raw2")
	raw := (rawBefore + rawAfter) / 2

	mbs := func(d time.Duration) float64 { return float64(docBytes) / 1e6 / d.Seconds() }
	t.Logf("documents: %.1f MiB, %.1f KB average", float64(docBytes)/(1<<20), float64(docBytes)/float64(n)/1000)
	t.Logf("indexer (Kafka → indexer → OpenSearch, process start to all offsets committed): %s = %.0f docs/s, %.1f MB/s; %.1f s of it waiting for %s _bulk answers",
		viaIndexer.Round(time.Millisecond), float64(n)/viaIndexer.Seconds(), mbs(viaIndexer),
		metricValue(metrics, "kubesearch_indexer_bulk_duration_seconds_sum"), metricText(metrics, "kubesearch_indexer_bulk_duration_seconds_count"))
	for _, r := range []struct {
		name string
		d    time.Duration
	}{{"before the indexer", rawBefore}, {"after the indexer", rawAfter}, {"mean", raw}} {
		t.Logf("raw _bulk replay of the prebuilt documents, %s: %s = %.0f docs/s, %.1f MB/s (ratio indexer/raw %.2f)",
			r.name, r.d.Round(time.Millisecond), float64(n)/r.d.Seconds(), mbs(r.d), r.d.Seconds()/viaIndexer.Seconds())
	}
	t.Logf("ratio indexer/raw (mean of the two replays): %.2f", raw.Seconds()/viaIndexer.Seconds())
	size := fmt.Sprintf("%d Pod documents, %.1f KB average, batches of %d", n, float64(docBytes)/float64(n)/1000, batch)
	ratio := raw.Seconds() / viaIndexer.Seconds()
	recordBench(t,
		benchResult{Bench: "indexer", What: "indexer (Kafka → OpenSearch)", Value: float64(n) / viaIndexer.Seconds(), Unit: "docs/s",
			Note: size + "; process start to every offset committed"},
		benchResult{Bench: "indexer", What: "raw _bulk replay before the indexer", Value: float64(n) / rawBefore.Seconds(), Unit: "docs/s", Note: size},
		benchResult{Bench: "indexer", What: "raw _bulk replay after the indexer", Value: float64(n) / rawAfter.Seconds(), Unit: "docs/s", Note: size},
		benchResult{Bench: "indexer", What: "indexer throughput", Value: mbs(viaIndexer), Unit: "MB/s", Note: size},
		benchResult{Bench: "indexer", What: "indexer ÷ raw _bulk (mean of the replays)", Value: ratio, Unit: "ratio",
			Goal: "≥ 0.8×", Met: met(ratio >= 0.8), Note: size},
	)
}

// metricText is the value of an unlabelled metric in a Prometheus text exposition, or "?".
func countDocs(t *testing.T, env *testbed.Env, index string) int {
	t.Helper()
	mustHTTP(t, "POST", env.OpenSearchURL+"/"+index+"/_refresh", "")
	return int(gjson.GetBytes(mustHTTP(t, "GET", env.OpenSearchURL+"/"+index+"/_count", ""), "count").Int())
}
