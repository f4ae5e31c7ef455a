//go:build e2e && bench

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/osstore"
	"github.com/kubesearch/kubesearch/mappings"
	"github.com/kubesearch/kubesearch/tests/testbed"
)

// TestBenchRoll measures an index roll: BENCH_ROLL_DOCS (50,000) realistic Pod documents in an index
// of the previous mapping version behind its alias, rolled by the indexer at its start. The baseline
// is a raw _bulk load of the same prebuilt documents into the old index on the same node, in batches
// of the same size. It asserts only that every document arrived. Run it with `make bench-roll`.
func TestBenchRoll(t *testing.T) {
	buildFlags = nil    // measure the binary users run, not a race-detector build
	kubesearchBinary(t) // built now, not inside a timed process start
	env := testbed.Get(t)
	n := envInt("BENCH_ROLL_DOCS", 50000)
	const batch = 1000 // the indexer's default --batch-size, which is also the roll's page size

	prefix := templatePrefix(t, env, "bench")
	alias := mappings.IndexName(prefix, "Pod")
	old := fmt.Sprintf("%s-v%d", alias, mappings.Version-1)
	mustHTTP(t, "PUT", env.OpenSearchURL+"/"+old, fmt.Sprintf(`{"aliases":{%q:{"is_write_index":true}}}`, alias))

	// Baseline: the documents loaded into the old index.
	events := benchPodEvents("bench", "bench-roll", n, 8002, 1000)
	var docBytes int
	start := time.Now()
	for i := 0; i < n; i += batch {
		var body bytes.Buffer
		for _, ev := range events[i:min(i+batch, n)] {
			doc, err := document.Build(ev)
			if err != nil {
				t.Fatal(err)
			}
			docBytes += len(doc)
			fmt.Fprintf(&body, `{"index":{"_index":%q,"_id":%q,"version":%s,"version_type":"external_gte"}}`+"\n%s\n", old, ev.UID, ev.ResourceVersion, doc)
		}
		if resp := mustHTTP(t, "POST", env.OpenSearchURL+"/_bulk", body.String()); gjson.GetBytes(resp, "errors").Bool() {
			t.Fatalf("raw bulk: %.500s", resp)
		}
	}
	load := time.Since(start)
	if got := countDocs(t, env, old); got != n {
		t.Fatalf("raw load wrote %d documents, want %d", got, n)
	}

	// The roll, at the indexer's start (its topic is empty).
	topic := uniqueName("bench-roll")
	tailTopic(t, env.KafkaBrokers, topic)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	ix := startProcess(t, "indexer", "indexer", "--kafka-brokers", strings.Join(env.KafkaBrokers, ","),
		"--topic", topic, "--group", topic+"-indexer", "--opensearch-addresses", env.OpenSearchURL,
		"--index-prefix", prefix, "--listen", addr, "--batch-size", fmt.Sprint(batch))
	var took time.Duration
	pollUntil(t, "the roll", 30*time.Minute, func(context.Context) (bool, error) {
		m := regexp.MustCompile(`msg="index rolled to this mapping version".* documents=(\d+) took=(\S+)`).FindStringSubmatch(ix.output())
		if m == nil {
			return false, nil
		}
		var err error
		took, err = time.ParseDuration(m[2])
		return err == nil, err
	})
	if got := countDocs(t, env, osstore.VersionedIndexName(alias)); got != n {
		t.Fatalf("the roll copied %d documents, want %d", got, n)
	}

	mbs := func(d time.Duration) float64 { return float64(docBytes) / 1e6 / d.Seconds() }
	t.Logf("%d Pod documents, %.1f MiB, %.1f KB average", n, float64(docBytes)/(1<<20), float64(docBytes)/float64(n)/1000)
	t.Logf("raw _bulk load into the old index: %s = %.0f docs/s, %.1f MB/s", load.Round(time.Millisecond), float64(n)/load.Seconds(), mbs(load))
	t.Logf("roll (scroll, rebuild, _bulk into the new index, swap): %s = %.0f docs/s, %.1f MB/s (ratio roll/raw load %.2f)",
		took.Round(time.Millisecond), float64(n)/took.Seconds(), mbs(took), load.Seconds()/took.Seconds())
	size := fmt.Sprintf("%d Pod documents, %.1f KB average, pages of %d", n, float64(docBytes)/float64(n)/1000, batch)
	recordBench(t,
		benchResult{Bench: "roll", What: "index roll (scroll, rebuild, _bulk, swap)", Value: float64(n) / took.Seconds(), Unit: "docs/s", Note: size},
		benchResult{Bench: "roll", What: "raw _bulk load into the old index", Value: float64(n) / load.Seconds(), Unit: "docs/s", Note: size},
		benchResult{Bench: "roll", What: "roll ÷ raw _bulk load", Value: load.Seconds() / took.Seconds(), Unit: "ratio", Note: size},
	)
}
