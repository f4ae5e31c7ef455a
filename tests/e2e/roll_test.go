//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/osstore"
	"github.com/kubesearch/kubesearch/mappings"
	"github.com/kubesearch/kubesearch/tests/testbed"
)

// An installation written by an indexer of an older mapping version (indices "-v0", documents
// without the free-text and image fields, one kind as a bare concrete index the way an early write
// auto-creates it) is rolled by this build at its start: every alias ends on "-v<Version>" with
// documents rebuilt (the missing fields searchable again), versions and objects kept, and the old
// indices gone. The older indexer keeps running through the roll, as in a rolling update: its writes
// to the blocked old index are retried, never dead-lettered, and land. The new indexer is killed with
// -9 in the middle of the roll and restarted as two replicas at once. Throughout, a search over the
// pattern the query API uses counts every document exactly once.
func TestIndexerRollsIndicesToNewMappingVersion(t *testing.T) {
	if mappings.Version < 1 {
		t.Fatal("the test builds an installation of version Version-1")
	}
	env := testbed.Get(t)
	f := seedFleet(t, env)
	p := startPipeline(t, env, f)
	const archived = 6000
	publishArchivePods(t, env, p.topic, archived)
	p.waitIndexMatchesMembers(t, "after the first lists", 2*time.Minute)
	pods := mappings.IndexName(p.prefix, "Pod")
	pollUntil(t, "the archive's Pods to be indexed", 2*time.Minute, func(context.Context) (bool, error) {
		return count(t, env, mappings.IndexBase(p.prefix)+"*", archiveQuery) == archived, nil
	})
	before := archiveSnapshot(t, env, pods)

	// The indexer that wrote all this plays the older version: paused (idle: everything is indexed)
	// while the indices are turned into what that version would have left, then running on through
	// the roll as a rolling update would leave it.
	older, olderAddr := p.indexer, p.indexerAddr
	older.signal(syscall.SIGSTOP)
	old := fmt.Sprintf("-v%d", mappings.Version-1)
	// Fields the roll must give back; status is also what versions before 3 did not write, and
	// columns what versions before 4 did not.
	strip := []string{"text", "images", "status", "columns"}
	aliases := resolveAliases(t, env, p.prefix)
	for _, alias := range aliases {
		current := osstore.VersionedIndexName(alias)
		if strings.HasSuffix(alias, "-configmap") {
			// A bare concrete index named like the alias.
			copyIndex(t, env, current, alias+"-stage", strip, true)
			mustHTTP(t, "DELETE", env.OpenSearchURL+"/"+current, "")
			copyIndex(t, env, alias+"-stage", alias, nil, false)
			mustHTTP(t, "DELETE", env.OpenSearchURL+"/"+alias+"-stage", "")
			continue
		}
		copyIndex(t, env, current, alias+old, strip, true)
		mustHTTP(t, "POST", env.OpenSearchURL+"/_aliases", fmt.Sprintf(
			`{"actions":[{"add":{"index":%q,"alias":%q,"is_write_index":true}},{"remove_index":{"index":%q}}]}`, alias+old, alias, current))
	}
	older.signal(syscall.SIGCONT)
	// The archive is never written again: only the roll can give its documents their images back.
	imageQuery := `{"query":{"bool":{"filter":[{"term":{"cluster":"archive"}},{"term":{"images":"docker.io/istio/proxyv2:1.24.1"}}]}}}`
	if n := count(t, env, pods, imageQuery); n != 0 {
		t.Fatalf("the older installation still finds %d archive Pods by image; the test would prove nothing", n)
	}
	// Nor sort them by a column of their Table (mapping version 4's columns).
	if n := count(t, env, pods, restartsQuery); n != 0 {
		t.Fatalf("the older installation has %d archive Pods with a RESTARTS sort key; the test would prove nothing", n)
	}
	churn(t, env, f, 6) // indexed by the older indexer into the old indices

	// Count the archive over the query API's pattern throughout.
	var polls, wrong, legacyFailures atomic.Int64
	var firstWrong atomic.Pointer[string]
	stopPoll := make(chan struct{})
	var pollers sync.WaitGroup
	pollers.Go(func() {
		url := env.OpenSearchURL + "/" + mappings.IndexBase(p.prefix) + "*/_count"
		for {
			select {
			case <-stopPoll:
				return
			case <-time.After(20 * time.Millisecond):
			}
			n, failedIndex, err := countQuery(url, archiveQuery)
			polls.Add(1)
			if failedIndex == mappings.IndexName(p.prefix, "ConfigMap") {
				// The one documented exception: the bare concrete index is deleted in the same atomic
				// request that gives its name to the alias, and a search in flight then fails there.
				legacyFailures.Add(1)
				continue
			}
			if err != nil || n != archived {
				wrong.Add(1)
				firstWrong.CompareAndSwap(nil, ptr(fmt.Sprintf("%d documents (err %v) at %s", n, err, time.Now().Format(time.RFC3339Nano))))
			}
		}
	})
	stopPolling := sync.OnceFunc(func() {
		close(stopPoll)
		pollers.Wait()
	})
	defer stopPolling()

	// First start, killed mid-roll: smaller pages keep the Pod roll going for seconds.
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	first := startProcess(t, "indexer (killed mid-roll)", "indexer", "--kafka-brokers", strings.Join(env.KafkaBrokers, ","),
		"--topic", p.topic, "--group", p.topic+"-indexer", "--opensearch-addresses", env.OpenSearchURL,
		"--index-prefix", p.prefix, "--listen", addr, "--batch-size", "100")
	target := osstore.VersionedIndexName(pods)
	// The copy is not refreshed until it ends, so progress is read from the indexer's metrics.
	copiedMetric := `kubesearch_indexer_roll_documents_copied_total{alias="` + pods + `"}`
	var copied float64
	pollUntil(t, "the Pod roll to start copying", 2*time.Minute, func(ctx context.Context) (bool, error) {
		copied = metricValue(httpText(t, "http://"+addr+"/metrics"), copiedMetric)
		return copied > 0, nil
	})
	// New Pods while the old Pod index is blocked: the older indexer's writes are refused, and must
	// be retried until the alias has moved, never dead-lettered.
	for _, cluster := range env.Clusters {
		env.KubectlRun(t, cluster, nil, "-n", f.shop, "scale", "deployment/web", "--replicas=4")
	}
	readyz := httpText(t, "http://"+addr+"/readyz")
	copied = metricValue(httpText(t, "http://"+addr+"/metrics"), copiedMetric)
	first.kill()
	t.Logf("killed with -9 after %.0f of %d Pods copied; /readyz said %q", copied, archived, strings.TrimSpace(readyz))
	if !strings.Contains(readyz, "rolling "+pods) {
		t.Errorf("/readyz during the roll = %q, want it to name the roll of %s", readyz, pods)
	}
	if copied >= archived {
		t.Fatalf("the roll had finished before the kill (%.0f copied); the test would not cover a crash", copied)
	}
	res := resolveIndex(t, env, p.prefix)
	if got := res.Get(`aliases.#(name==` + pods + `).indices`).String(); got != `["`+pods+old+`"]` {
		t.Errorf("after the crash %s points to %s, want the old index only", pods, got)
	}
	if !res.Get(`indices.#(name==`+target+`).attributes`).IsArray() || !strings.Contains(res.Get(`indices.#(name==`+target+`).attributes`).Raw, "hidden") {
		t.Errorf("the half-copied %s is not hidden: %s", target, res.Get(`indices.#(name==`+target+`)`).Raw)
	}

	// Second start, two replicas at once as a Deployment starts them: the roll resumes, one of them
	// finishes it, and then the events wait no more.
	replica := startProcess(t, "indexer (second replica)", "indexer", "--kafka-brokers", strings.Join(env.KafkaBrokers, ","),
		"--topic", p.topic, "--group", p.topic+"-indexer", "--opensearch-addresses", env.OpenSearchURL,
		"--index-prefix", p.prefix, "--listen", fmt.Sprintf("127.0.0.1:%d", freePort(t)))
	p.startIndexer(t)
	p.waitIndexMatchesMembers(t, "after the roll", 3*time.Minute)
	for _, proc := range []*process{first, replica, p.indexer} {
		for _, line := range strings.Split(proc.output(), "\n") {
			if strings.Contains(line, "index rolled") || strings.Contains(line, "old indices deleted") || strings.Contains(line, "roll") && strings.Contains(line, "level=ERROR") {
				t.Log(line)
			}
		}
	}
	stopPolling()

	res = resolveIndex(t, env, p.prefix)
	for _, alias := range aliases {
		want := osstore.VersionedIndexName(alias)
		if got := res.Get(`aliases.#(name==` + alias + `).indices`).String(); got != `["`+want+`"]` {
			t.Errorf("%s points to %s, want [%q]", alias, got, want)
		}
		ix := res.Get(`indices.#(name==` + want + `)`)
		if strings.Contains(ix.Get("attributes").Raw, "hidden") {
			t.Errorf("%s is still hidden", want)
		}
		settings := mustHTTP(t, "GET", env.OpenSearchURL+"/"+want+"/_settings?flat_settings=true", "")
		if b := gjson.GetBytes(settings, "*.settings.index\\.blocks\\.write"); b.Exists() && b.String() == "true" {
			t.Errorf("%s is write-blocked", want)
		}
		if r := gjson.GetBytes(settings, "*.settings.index\\.refresh_interval"); r.String() == "-1" {
			t.Errorf("%s is left without periodic refresh", want)
		}
	}
	for _, ix := range res.Get("indices").Array() {
		if name := ix.Get("name").Str; strings.HasSuffix(name, old) || strings.HasSuffix(name, "-stage") {
			t.Errorf("old index %s is left", name)
		}
	}
	if n := count(t, env, pods, imageQuery); n != archived {
		t.Errorf("%d archive Pods found by image after the roll, want %d (rebuilt documents)", n, archived)
	}
	metrics := string(mustHTTP(t, "GET", "http://"+olderAddr+"/metrics", ""))
	retried, dead := metricSum(metrics, "kubesearch_indexer_bulk_retried_items_total"), metricSum(metrics, "kubesearch_indexer_dead_letters_total")
	t.Logf("the older indexer retried %.0f blocked writes and dead-lettered %.0f events", retried, dead)
	if retried == 0 || dead != 0 {
		t.Errorf("the older indexer retried %.0f writes and dead-lettered %.0f events; want its writes to the blocked index retried, none dead-lettered", retried, dead)
	}
	after := archiveSnapshot(t, env, pods)
	if len(after) != len(before) {
		t.Errorf("%d archive Pods after the roll, %d before", len(after), len(before))
	}
	for id, v := range before {
		if after[id] != v {
			t.Errorf("archive Pod %s changed by the roll:\nbefore %.200s\nafter  %.200s", id, v, after[id])
			break
		}
	}
	// The roll rebuilt every document, so every archive Pod has its sort keys back.
	if n := count(t, env, pods, restartsQuery); n != archived {
		t.Errorf("%d archive Pods with a RESTARTS sort key after the roll, want %d", n, archived)
	}
	t.Logf("%d counts over %s*, %d of them wrong, %d failed on the bare ConfigMap index at its roll", polls.Load(), mappings.IndexBase(p.prefix), wrong.Load(), legacyFailures.Load())
	if wrong.Load() > 0 {
		t.Errorf("%d of %d searches during the roll did not count %d archive Pods; first: %s", wrong.Load(), polls.Load(), archived, *firstWrong.Load())
	}
}

// publishArchivePods publishes n realistic Pods of a cluster "archive" (one the test bed does not
// run), to give the roll an index large enough to be caught in the middle of.
func publishArchivePods(t *testing.T, env *testbed.Env, topic string, n int) {
	t.Helper()
	msgs := make([]kafka.Message, n)
	for i, ev := range benchPodEvents("archive", "archive", n, 8001, 5000) {
		v, err := ev.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		msgs[i] = kafka.Message{Key: ev.Key(), Value: v}
	}
	w := &kafka.Writer{Addr: kafka.TCP(env.KafkaBrokers...), Topic: topic, Balancer: &kafka.Hash{},
		RequiredAcks: kafka.RequireAll, BatchTimeout: 5 * time.Millisecond, BatchBytes: 8 << 20, Transport: &kafka.Transport{}}
	defer w.Close()
	for i := 0; i < n; i += 1000 {
		if err := w.WriteMessages(t.Context(), msgs[i:min(i+1000, n)]...); err != nil {
			t.Fatal(err)
		}
	}
}

const archiveQuery = `{"query":{"term":{"cluster":"archive"}}}`

// restartsQuery finds the archive Pods that have a RESTARTS sort key (sort=columns.restarts).
const restartsQuery = `{"query":{"bool":{"filter":[{"term":{"cluster":"archive"}},{"exists":{"field":"columns.restarts"}}]}}}`

// countQuery is a _count that reports its failures rather than failing the test, for goroutines;
// failedIndex is the index of the first shard failure, if any.
func countQuery(url, query string) (n int, failedIndex string, err error) {
	resp, err := http.Post(url, "application/json", strings.NewReader(query))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var body struct {
		Count  int
		Shards struct {
			Total, Failed int
			Failures      []struct{ Index string }
		} `json:"_shards"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusOK {
		return 0, "", fmt.Errorf("%s: %v", resp.Status, err)
	}
	if body.Shards.Failed > 0 {
		if len(body.Shards.Failures) > 0 {
			failedIndex = body.Shards.Failures[0].Index
		}
		return body.Count, failedIndex, fmt.Errorf("%d of %d shards failed (%s)", body.Shards.Failed, body.Shards.Total, failedIndex)
	}
	return body.Count, "", nil
}

func count(t *testing.T, env *testbed.Env, target, query string) int {
	t.Helper()
	return int(gjson.GetBytes(mustHTTP(t, "POST", env.OpenSearchURL+"/"+target+"/_count", query), "count").Int())
}

// archiveSnapshot is the archive's Pods: _id → _version and stored object.
func archiveSnapshot(t *testing.T, env *testbed.Env, alias string) map[string]string {
	t.Helper()
	mustHTTP(t, "POST", env.OpenSearchURL+"/"+alias+"/_refresh", "")
	body := mustHTTP(t, "POST", env.OpenSearchURL+"/"+alias+"/_search",
		`{"size":10000,"version":true,"query":{"term":{"cluster":"archive"}}}`)
	out := map[string]string{}
	for _, h := range gjson.GetBytes(body, "hits.hits").Array() {
		obj, err := mappings.StoredObject([]byte(h.Get("_source").Raw))
		if err != nil {
			t.Fatal(err)
		}
		out[h.Get("_id").Str] = h.Get("_version").String() + " " + string(obj)
	}
	return out
}

func resolveIndex(t *testing.T, env *testbed.Env, prefix string) gjson.Result {
	t.Helper()
	return gjson.ParseBytes(mustHTTP(t, "GET", env.OpenSearchURL+"/_resolve/index/"+mappings.IndexBase(prefix)+"*?expand_wildcards=all", ""))
}

func resolveAliases(t *testing.T, env *testbed.Env, prefix string) []string {
	t.Helper()
	var out []string
	for _, a := range resolveIndex(t, env, prefix).Get("aliases.#.name").Array() {
		out = append(out, a.Str)
	}
	if len(out) < 4 {
		t.Fatalf("only %d aliases under %s: %v", len(out), prefix, out)
	}
	return out
}

// copyIndex copies every document of from into to (created from the template) with its _version,
// leaving out the top-level fields strip names; byUID gives each the _id mapping version 1 gave it,
// its uid alone (the roll to version 2 re-keys them by cluster and uid).
func copyIndex(t *testing.T, env *testbed.Env, from, to string, strip []string, byUID bool) {
	t.Helper()
	mustHTTP(t, "POST", env.OpenSearchURL+"/"+from+"/_refresh", "")
	page := mustHTTP(t, "POST", env.OpenSearchURL+"/"+from+"/_search?scroll=2m", `{"size":500,"sort":["_doc"],"version":true}`)
	total := 0
	for {
		hits := gjson.GetBytes(page, "hits.hits").Array()
		if len(hits) == 0 {
			break
		}
		var body bytes.Buffer
		for _, h := range hits {
			var src map[string]json.RawMessage
			if err := json.Unmarshal([]byte(h.Get("_source").Raw), &src); err != nil {
				t.Fatal(err)
			}
			for _, k := range strip {
				delete(src, k)
			}
			doc, _ := json.Marshal(src)
			id := h.Get("_id").Str
			if byUID {
				id = gjson.GetBytes(doc, "uid").Str
			}
			fmt.Fprintf(&body, `{"index":{"_index":%q,"_id":%q,"version":%d,"version_type":"external_gte"}}`+"\n%s\n", to, id, h.Get("_version").Int(), doc)
		}
		resp := mustHTTP(t, "POST", env.OpenSearchURL+"/_bulk", body.String())
		if gjson.GetBytes(resp, "errors").Bool() {
			t.Fatalf("copy %s to %s: %.500s", from, to, resp)
		}
		total += len(hits)
		page = mustHTTP(t, "POST", env.OpenSearchURL+"/_search/scroll", fmt.Sprintf(`{"scroll":"2m","scroll_id":%q}`, gjson.GetBytes(page, "_scroll_id").Str))
	}
	mustHTTP(t, "POST", env.OpenSearchURL+"/"+to+"/_refresh", "")
	if got := count(t, env, to, `{"query":{"match_all":{}}}`); got != total {
		t.Fatalf("copied %d documents from %s, %s holds %d", total, from, to, got)
	}
}

func httpText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return b.String()
}
