//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opensearch-project/opensearch-go/v4"
	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"
	"github.com/segmentio/kafka-go"
	"github.com/tidwall/gjson"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/mappings"
	"github.com/kubesearch/kubesearch/tests/testbed"
)

// pipeline is a collector and an indexer writing to indices of their own (a unique prefix), so tests
// sharing the test bed never see each other's documents.
type pipeline struct {
	env        *testbed.Env
	f          fleet
	registries string
	topic      string
	prefix     string
	os         *opensearchapi.Client
	collector  *process
	indexer    *process
	// indexerAddr is where the indexer serves /metrics.
	indexerAddr string
	// sel, when set, replaces the fleet's selection in indexProblems (a test that edits the registries).
	sel map[schema.GroupVersionResource]string
	// indexerArgs are added to the indexer's command line.
	indexerArgs []string
}

func startPipeline(t *testing.T, env *testbed.Env, f fleet) *pipeline {
	t.Helper()
	p := startIndexing(t, env, f)
	p.startCollector(t)
	return p
}

// startIndexing starts the pipeline's indexer and no collector: for a test that starts its own.
func startIndexing(t *testing.T, env *testbed.Env, f fleet) *pipeline {
	t.Helper()
	return startIndexingOn(t, env, f, uniqueName("pipeline"))
}

// startIndexingOn is startIndexing on the events topic given, with indexerArgs added to the
// indexer's command line.
func startIndexingOn(t *testing.T, env *testbed.Env, f fleet, topic string, indexerArgs ...string) *pipeline {
	t.Helper()
	p := &pipeline{env: env, f: f, registries: f.registries(t), topic: topic, prefix: uniqueName("e2e"), indexerArgs: indexerArgs}
	client, err := opensearchapi.NewClient(opensearchapi.Config{Client: opensearch.Config{Addresses: []string{env.OpenSearchURL}}})
	if err != nil {
		t.Fatal(err)
	}
	p.os = client
	tailTopic(t, env.KafkaBrokers, p.topic) // creates the topic
	p.startIndexer(t)
	t.Cleanup(func() {
		_, _ = client.Indices.Delete(context.Background(), opensearchapi.IndicesDeleteReq{Indices: []string{p.prefix + "-*"}})
	})
	return p
}

func (p *pipeline) startCollector(t *testing.T) {
	t.Helper()
	var base string
	p.collector, base = startCollector(t, p.env, p.registries, p.topic)
	waitHTTP(t, base+"/readyz", 2*time.Minute)
}

func (p *pipeline) startIndexer(t *testing.T) {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	args := append([]string{"indexer", "--kafka-brokers", strings.Join(p.env.KafkaBrokers, ","),
		"--topic", p.topic, "--group", p.topic + "-indexer", "--opensearch-addresses", strings.Join(p.env.OpenSearchURLs, ","),
		"--index-prefix", p.prefix, "--listen", addr, "--batch-interval", "100ms", "--watermark-interval", "500ms"}, p.indexerArgs...)
	p.indexer = startProcess(t, "indexer", args...)
	p.indexerAddr = addr
	waitHTTP(t, "http://"+addr+"/readyz", 2*time.Minute)
}

// deleteWhileCollectorDown stops the collector (SIGTERM), deletes two ConfigMaps and a Widget of
// the shop namespace in every member, and starts it again: deletions only its next list can tell.
func (p *pipeline) deleteWhileCollectorDown(t *testing.T) {
	t.Helper()
	if err := p.collector.stop(30 * time.Second); err != nil {
		t.Fatalf("collector did not exit cleanly on SIGTERM: %v", err)
	}
	for _, cluster := range p.env.Clusters {
		p.env.KubectlRun(t, cluster, nil, "-n", p.f.shop, "delete", "configmap", "web-config-2", "web-config-4")
		p.env.KubectlRun(t, cluster, nil, "-n", p.f.shop, "delete", "widget", "widget-1")
	}
	p.startCollector(t)
}

// doc is what the tests read back of an indexed document.
type doc struct {
	id, cluster, namespace, name string
	resourceVersion              int64
	object                       []byte
}

// docs returns every document of one kind of one cluster (in one namespace when ns is set), by uid.
func (p *pipeline) docs(t *testing.T, kind, cluster, ns string) (map[string]doc, error) {
	t.Helper()
	filter := []any{map[string]any{"term": map[string]any{"cluster": cluster}}}
	if ns != "" {
		filter = append(filter, map[string]any{"term": map[string]any{"namespace": ns}})
	}
	body, _ := json.Marshal(map[string]any{"size": 10000, "track_total_hits": true,
		"query": map[string]any{"bool": map[string]any{"filter": filter}}})
	index := mappings.IndexName(p.prefix, kind)
	// Bounded: a refresh waits on every shard copy, and one on a hung node (a fault test's) would
	// hold the check past its own deadline.
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	if _, err := p.os.Indices.Refresh(ctx, &opensearchapi.IndicesRefreshReq{Index: []string{index}}); err != nil {
		if strings.Contains(err.Error(), "index_not_found") {
			return map[string]doc{}, nil
		}
		return nil, err
	}
	res, err := p.os.Search(ctx, &opensearchapi.SearchReq{Indices: []string{index}, Body: strings.NewReader(string(body))})
	if err != nil {
		return nil, err
	}
	out := map[string]doc{}
	for _, h := range res.Hits.Hits {
		obj, err := mappings.StoredObject(h.Source)
		if err != nil {
			return nil, fmt.Errorf("document %s: %w", h.ID, err)
		}
		src := gjson.ParseBytes(h.Source)
		out[src.Get("uid").String()] = doc{id: h.ID, cluster: src.Get("cluster").String(), namespace: src.Get("namespace").String(),
			name: src.Get("name").String(), resourceVersion: src.Get("resourceVersion").Int(), object: obj}
	}
	return out, nil
}

var kindOf = map[schema.GroupVersionResource]string{
	gvrDeployments: "Deployment", gvrPods: "Pod", gvrConfigMaps: "ConfigMap", gvrSecrets: "Secret", gvrWidgets: "Widget",
}

// indexProblems compares, per member and selected resource, the index with the member: the same
// uids, each at the member's resourceVersion, carrying the cache-source annotation.
func (p *pipeline) indexProblems(t *testing.T) []string {
	var problems []string
	for _, cluster := range p.env.Clusters {
		dyn := dynamic.NewForConfigOrDie(p.env.RESTConfig(t, cluster))
		selected := p.sel
		if selected == nil {
			selected = p.f.selected()
		}
		for gvr, ns := range selected {
			list, err := resourceIn(dyn, gvr, ns).List(t.Context(), metav1.ListOptions{})
			if err != nil {
				return []string{err.Error()}
			}
			docs, err := p.docs(t, kindOf[gvr], cluster, ns)
			if err != nil {
				return []string{err.Error()}
			}
			for _, it := range list.Items {
				d, ok := docs[string(it.GetUID())]
				switch {
				case !ok:
					problems = append(problems, fmt.Sprintf("%s %s %s/%s: not indexed", cluster, gvr.Resource, it.GetNamespace(), it.GetName()))
				case d.id != cluster+"/"+string(it.GetUID()):
					problems = append(problems, fmt.Sprintf("%s %s %s/%s: indexed as _id %s, want cluster/uid", cluster, gvr.Resource, it.GetNamespace(), it.GetName(), d.id))
				case fmt.Sprint(d.resourceVersion) != it.GetResourceVersion():
					problems = append(problems, fmt.Sprintf("%s %s %s/%s: indexed at rv %d, member at %s", cluster, gvr.Resource, it.GetNamespace(), it.GetName(), d.resourceVersion, it.GetResourceVersion()))
				case gjson.GetBytes(d.object, `metadata.annotations.resource\.karmada\.io/cached-from-cluster`).String() != cluster:
					problems = append(problems, fmt.Sprintf("%s %s %s/%s: no cached-from-cluster annotation naming %s", cluster, gvr.Resource, it.GetNamespace(), it.GetName(), cluster))
				}
				delete(docs, string(it.GetUID()))
			}
			for id, d := range docs {
				problems = append(problems, fmt.Sprintf("%s %s %s/%s (uid %s): indexed but gone from the member", cluster, gvr.Resource, d.namespace, d.name, id))
			}
		}
	}
	slices.Sort(problems)
	return problems
}

func (p *pipeline) waitIndexMatchesMembers(t *testing.T, what string, timeout time.Duration) {
	t.Helper()
	waitNoProblems(t, what+": the index does not match the members", timeout, func() []string { return p.indexProblems(t) })
}

// waitNoProblems checks every second until check finds no problem, or fails the test with what
// and the first 20 problems once timeout has passed.
func waitNoProblems(t *testing.T, what string, timeout time.Duration, check func() []string) {
	t.Helper()
	var problems []string
	deadline := time.Now().Add(timeout)
	for {
		problems = check()
		if len(problems) == 0 {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	if len(problems) > 20 {
		problems = append(problems[:20], fmt.Sprintf("... and %d more", len(problems)-20))
	}
	t.Fatalf("%s after %s:\n%s", what, timeout, strings.Join(problems, "\n"))
}

// Objects created, updated and deleted in the members appear, change and disappear in
// kubernetes-<kind>, with _id = cluster/uid and the cache-source annotation; objects deleted while the
// collector was down are gone after its restart; a 1.4 MiB ConfigMap is indexed; dotted label keys are
// searchable by pair and by existence, and `app` next to `app.kubernetes.io/name` causes no conflict.
func TestIndexerMirrorsMembers(t *testing.T) {
	env := testbed.Get(t)
	f := seedFleet(t, env)
	waitRolledOut(t, env, f.shop)
	p := startPipeline(t, env, f)
	p.waitIndexMatchesMembers(t, "after the first lists", 2*time.Minute)

	churn(t, env, f, 20)
	p.waitIndexMatchesMembers(t, "after churn", 2*time.Minute)

	// Deleted while nothing watched: only the collector's next list can tell.
	p.deleteWhileCollectorDown(t)
	p.waitIndexMatchesMembers(t, "after deletes while the collector was down", 2*time.Minute)

	// The largest objects: Kubernetes caps a ConfigMap's data at 1 MiB, so the largest ConfigMap is
	// 1 MiB of data plus annotations (about 1.2 MiB); a custom resource reaches 1.4 MiB (etcd takes
	// 1.5 MiB). Plus labels whose keys collide as dotted paths.
	cmData := strings.Repeat("0123456789abcdef", 1000*1024/16)
	notes := strings.Repeat("n", 200*1024)
	blob := strings.Repeat("fedcba9876543210", 1400*1024/16)
	cluster := env.Clusters[0]
	env.KubectlRun(t, cluster, []byte(fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: big-dashboard
  namespace: %[1]s
  labels: {app.kubernetes.io/name: grafana}
  annotations: {dashboard.example.com/notes: "%[3]s"}
data: {dashboard.json: "%[2]s"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: plain-app-label, namespace: %[1]s, labels: {app: grafana}}
data: {k: v}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: big-widget, namespace: %[1]s}
spec: {blob: "%[4]s"}
`, f.shop, cmData, notes, blob)), "apply", "--server-side", "-f", "-")
	p.waitIndexMatchesMembers(t, "after the largest objects", 2*time.Minute)
	stored := func(kind, name string) []byte {
		t.Helper()
		docs, err := p.docs(t, kind, cluster, f.shop)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			if d.name == name {
				return d.object
			}
		}
		t.Fatalf("%s %s not indexed", kind, name)
		return nil
	}
	if obj := stored("ConfigMap", "big-dashboard"); gjson.GetBytes(obj, `data.dashboard\.json`).String() != cmData || len(obj) < 1200*1024 {
		t.Fatalf("the %d-byte ConfigMap is not stored whole", len(obj))
	}
	if obj := stored("Widget", "big-widget"); gjson.GetBytes(obj, "spec.blob").String() != blob || len(obj) < 1400*1024 {
		t.Fatalf("the %d-byte Widget is not stored whole", len(obj))
	}
	// A 1.4 MiB ConfigMap no apiserver accepts, published as a collector would publish one from a
	// member whose limit is raised (the indexer does not know the limit and must not need to).
	bigCM := strings.Repeat("0123456789abcdef", 1400*1024/16)
	ev := &envelope.Event{V: envelope.Version, Type: envelope.Added, Cluster: "archive", Version: "v1", Resource: "configmaps",
		Kind: "ConfigMap", Namespace: f.shop, Name: "huge-dashboard", UID: "00000000-0000-4000-8003-000000000001", ResourceVersion: "7",
		Epoch: 1, ObservedAt: time.Now().UTC(), Object: json.RawMessage(fmt.Sprintf(
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"huge-dashboard","namespace":%q,"uid":"00000000-0000-4000-8003-000000000001","resourceVersion":"7"},"data":{"dashboard.json":%q}}`,
			f.shop, bigCM))}
	value, err := ev.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	w := &kafka.Writer{Addr: kafka.TCP(env.KafkaBrokers...), Topic: p.topic, Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll,
		BatchBytes: 2 << 20, Transport: &kafka.Transport{}}
	if err := w.WriteMessages(t.Context(), kafka.Message{Key: ev.Key(), Value: value}); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	pollUntil(t, "the 1.4 MiB ConfigMap to be indexed", time.Minute, func(context.Context) (bool, error) {
		docs, err := p.docs(t, "ConfigMap", "archive", f.shop)
		if err != nil {
			return false, err
		}
		d, ok := docs[ev.UID]
		if ok && (gjson.GetBytes(d.object, `data.dashboard\.json`).String() != bigCM || len(d.object) < 1400*1024) {
			return false, fmt.Errorf("the %d-byte ConfigMap is not stored whole", len(d.object))
		}
		return ok, nil
	})

	index := mappings.IndexName(p.prefix, "ConfigMap")
	count := func(query string) int {
		t.Helper()
		res := search(t, p.os, index, query)
		return res.Hits.Total.Value
	}
	ns := fmt.Sprintf(`{"term":{"namespace":%q}}`, f.shop)
	if n := count(`{"query":{"bool":{"filter":[` + ns + `,{"term":{"labels":"app.kubernetes.io/name=grafana"}}]}}}`); n != 1 {
		t.Errorf("label pair app.kubernetes.io/name=grafana: %d documents, want 1", n)
	}
	if n := count(`{"query":{"bool":{"filter":[` + ns + `,{"term":{"labels":"app=grafana"}}]}}}`); n != 1 {
		t.Errorf("label pair app=grafana: %d documents, want 1", n)
	}
	// Existence of the dotted key: exactly the ConfigMaps the members select with that key.
	want := 0
	for _, c := range env.Clusters {
		list, err := dynamic.NewForConfigOrDie(env.RESTConfig(t, c)).Resource(gvrConfigMaps).Namespace(f.shop).
			List(t.Context(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name"})
		if err != nil {
			t.Fatal(err)
		}
		want += len(list.Items)
	}
	if n := count(`{"query":{"bool":{"filter":[` + ns + `,{"term":{"labelKeys":"app.kubernetes.io/name"}}]}}}`); n != want {
		t.Errorf("label key app.kubernetes.io/name exists: %d documents, want %d", n, want)
	}
	if n := count(`{"query":{"bool":{"filter":[` + ns + `,{"term":{"object.metadata.labels.app.kubernetes.io/name":"grafana"}}]}}}`); n != 1 {
		t.Errorf("flat_object path metadata.labels.app.kubernetes.io/name: %d documents, want 1", n)
	}
}

// A message the indexer can never apply goes to the dead-letter topic with its reason, and the
// partition moves on: later events are indexed.
func TestIndexerDeadLettersPoisonMessages(t *testing.T) {
	env := testbed.Get(t)
	f := seedFleet(t, env)
	p := startPipeline(t, env, f)
	p.waitIndexMatchesMembers(t, "after the first lists", 2*time.Minute)

	cluster := env.Clusters[0]
	w := &kafka.Writer{Addr: kafka.TCP(env.KafkaBrokers...), Topic: p.topic, Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll, BatchTimeout: 5 * time.Millisecond}
	defer w.Close()
	// Same key as the member's ConfigMaps: the poison sits in their partition, before their next events.
	key := []byte(cluster + "//configmaps")
	poison := []kafka.Message{
		{Key: key, Value: []byte(`{"v":1,"type":"ADDED","cluster":"` + cluster + `","version":"v1","resource":"configmaps","kind":"ConfigMap"`)},                                                                      // truncated JSON
		{Key: key, Value: []byte(`{"v":99,"type":"ADDED","cluster":"` + cluster + `","version":"v1","resource":"configmaps","kind":"ConfigMap","name":"x","uid":"u","object":{}}`)},                                   // unknown envelope version
		{Key: key, Value: []byte(`{"v":1,"type":"ADDED","cluster":"` + cluster + `","version":"v1","resource":"configmaps","kind":"ConfigMap","name":"x","uid":"u","resourceVersion":"1","object":"not-an-object"}`)}, // malformed object
	}
	if err := w.WriteMessages(t.Context(), poison...); err != nil {
		t.Fatal(err)
	}
	env.KubectlRun(t, cluster, []byte(fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: after-poison, namespace: %s}\ndata: {k: v}\n", f.shop)), "apply", "-f", "-")
	p.waitIndexMatchesMembers(t, "after poison messages", time.Minute)

	conn, err := kafka.DialLeader(t.Context(), "tcp", env.KafkaBrokers[0], p.topic+".dlq", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	batch := conn.ReadBatch(1, 16<<20)
	var got [][]byte
	var reasons []string
	for range poison {
		m, err := batch.ReadMessage()
		if err != nil {
			break
		}
		got = append(got, m.Value)
		for _, h := range m.Headers {
			if strings.Contains(strings.ToLower(h.Key), "reason") {
				reasons = append(reasons, string(h.Value))
			}
		}
	}
	_ = batch.Close()
	if len(got) != len(poison) {
		t.Fatalf("dead-letter topic holds %d messages, want the %d poison messages", len(got), len(poison))
	}
	for i := range poison {
		if string(got[i]) != string(poison[i].Value) {
			t.Errorf("dead letter %d = %q, want the original message %q", i, got[i], poison[i].Value)
		}
	}
	if len(reasons) != len(poison) {
		t.Errorf("dead letters carry reasons %q, want one per message", reasons)
	}
}

// OpenSearch stopped for 30 s mid-churn, and the indexer killed with -9 while it is down: once both
// are back, the index equals the members' state — nothing committed was unwritten.
func TestIndexerSurvivesOpenSearchOutageAndKill(t *testing.T) {
	env := testbed.Get(t)
	f := seedFleet(t, env)
	p := startPipeline(t, env, f)
	p.waitIndexMatchesMembers(t, "after the first lists", 2*time.Minute)

	env.Stop(t, "opensearch")
	stopped := time.Now()
	churn(t, env, f, 10)
	p.indexer.kill()
	if wait := 30*time.Second - time.Since(stopped); wait > 0 {
		time.Sleep(wait)
	}
	env.Start(t, "opensearch")
	p.startIndexer(t)
	p.waitIndexMatchesMembers(t, "after the outage", 3*time.Minute)
}

// Replaying the whole topic (deletes older than index.gc_deletes, two SYNC markers per pair) through a
// new consumer group leaves every index exactly as it was: same _id, same version, same object.
func TestIndexerReplayIsIdempotent(t *testing.T) {
	env := testbed.Get(t)
	f := seedFleet(t, env)
	p := startPipeline(t, env, f)
	p.waitIndexMatchesMembers(t, "after the first lists", 2*time.Minute)
	churn(t, env, f, 12) // creates, updates and deletes
	if err := p.collector.stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	p.startCollector(t) // a second epoch: a second SYNC per pair
	p.waitIndexMatchesMembers(t, "before the replay", 2*time.Minute)
	waitGroupCaughtUp(t, env, p.topic, p.topic+"-indexer", 3*time.Minute)
	// The deletes' tombstones expire after index.gc_deletes (60 s).
	time.Sleep(65 * time.Second)
	before := indexSnapshot(t, env, p.prefix)
	if err := p.indexer.stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}

	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	group := p.topic + "-replay"
	startProcess(t, "replaying indexer", "indexer", "--kafka-brokers", strings.Join(env.KafkaBrokers, ","),
		"--topic", p.topic, "--group", group, "--opensearch-addresses", env.OpenSearchURL,
		"--index-prefix", p.prefix, "--listen", addr, "--batch-interval", "100ms")
	waitHTTP(t, "http://"+addr+"/readyz", 2*time.Minute)
	waitGroupCaughtUp(t, env, p.topic, group, 3*time.Minute)
	after := indexSnapshot(t, env, p.prefix)

	if len(before) == 0 {
		t.Fatal("empty index before the replay")
	}
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed by the replay:\nbefore %.300s\nafter  %.300s", k, v, after[k])
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("%s appeared with the replay: %.300s", k, after[k])
		}
	}
}

// indexSnapshot is every document of the pipeline's indices: index/_id → version and stored object.
func indexSnapshot(t *testing.T, env *testbed.Env, prefix string) map[string]string {
	t.Helper()
	url := env.OpenSearchURL + "/" + prefix + "-kubernetes-*"
	mustHTTP(t, "POST", url+"/_refresh", "")
	body := mustHTTP(t, "POST", url+"/_search", `{"size":10000,"version":true,"query":{"match_all":{}}}`)
	out := map[string]string{}
	for _, h := range gjson.GetBytes(body, "hits.hits").Array() {
		obj, err := mappings.StoredObject([]byte(h.Get("_source").Raw))
		if err != nil {
			t.Fatal(err)
		}
		alias := strings.TrimSuffix(h.Get("_index").String(), fmt.Sprintf("-v%d", mappings.Version))
		out[alias+"/"+h.Get("_id").String()] = h.Get("_version").String() + " " + string(obj)
	}
	if total := gjson.GetBytes(body, "hits.total.value").Int(); int(total) != len(out) {
		t.Fatalf("snapshot holds %d of %d documents", len(out), total)
	}
	return out
}

func mustHTTP(t *testing.T, method, url, body string) []byte {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %s %v: %s", method, url, resp.Status, err, out)
	}
	return out
}

// waitGroupCaughtUp waits until a consumer group has committed every partition up to its end.
func waitGroupCaughtUp(t *testing.T, env *testbed.Env, topic, group string, timeout time.Duration) {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(env.KafkaBrokers...), Timeout: 10 * time.Second}
	pollUntil(t, "group "+group+" to commit the whole topic", timeout, func(ctx context.Context) (bool, error) {
		req := map[string][]kafka.OffsetRequest{}
		parts := make([]int, topicPartitions)
		for i := range parts {
			parts[i] = i
			req[topic] = append(req[topic], kafka.LastOffsetOf(i))
		}
		ends, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: req})
		if err != nil {
			return false, nil
		}
		committed, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: parts}})
		if err != nil {
			return false, nil
		}
		have := map[int]int64{}
		for _, p := range committed.Topics[topic] {
			have[p.Partition] = p.CommittedOffset
		}
		for _, p := range ends.Topics[topic] {
			if p.LastOffset > 0 && have[p.Partition] < p.LastOffset {
				return false, nil
			}
		}
		return true, nil
	})
}
