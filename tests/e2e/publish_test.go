//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/tidwall/gjson"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/stream"
	"github.com/kubesearch/kubesearch/tests/testbed"
)

// A topic whose max.message.bytes (64 KiB) is far below the collector's flag (2 MiB), and a ConfigMap
// larger than that: the collector learns the topic's limit, publishes that ConfigMap without its data
// (annotated kubesearch.io/truncated), counts it, and goes on publishing — the ConfigMap just under
// the limit, and a change made afterwards, arrive whole; the large ConfigMap's deletion arrives too.
// A ConfigMap whose annotations alone are over the limit is published as a DELETED without object
// and dead-lettered under its key in <topic>.dlq. A Secret over the limit even when redacted (its
// size in the names of its data keys, which redaction keeps) is published with the keys that fit,
// and neither its value nor a published Secret's is anywhere in the topic, the dead-letter topic or
// the collector's log.
func TestCollectorTruncatesEventsOverTheTopicLimit(t *testing.T) {
	const topicLimit = 64 << 10
	env := testbed.Get(t)
	cluster := env.Clusters[0]
	cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, cluster))
	ns := uniqueName("oversized")
	if _, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	configMap := func(name, data string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"blob": data}}
	}
	// Random text for the huge one, so compression cannot save it and the old collector looped on the
	// broker's MESSAGE_TOO_LARGE. Sizes are the data's; the event adds about 1 KiB.
	random := make([]byte, 75<<10)
	_, _ = rand.Read(random)
	hugeMetadata := configMap("huge-metadata", "m")
	hugeMetadata.Annotations = map[string]string{"example.com/notes": strings.Repeat("n", 70<<10)}
	for _, cm := range []*corev1.ConfigMap{
		configMap("small", "s"), configMap("huge", base64.StdEncoding.EncodeToString(random)), configMap("just-under", strings.Repeat("x", topicLimit-3<<10)),
		hugeMetadata,
	} {
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	secretValue := uniqueName("hunter2-do-not-leak")
	// Redaction keeps a Secret's data keys and drops every annotation that is not known to be
	// harmless, so the huge Secret's bulk is in random key names: 400 of 240 characters, ~100 KiB.
	hugeData := map[string]string{"password": secretValue + "-huge"}
	for i := 0; len(hugeData) <= 400; i++ {
		hugeData[base64.RawURLEncoding.EncodeToString(random[i*180:(i+1)*180])] = "x"
	}
	for _, sec := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "small-secret", Namespace: ns}, Data: map[string][]byte{"password": []byte(secretValue)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "huge-secret", Namespace: ns}, StringData: hugeData},
	} {
		if _, err := cs.CoreV1().Secrets(ns).Create(t.Context(), sec, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	topic := uniqueName("collector-oversized")
	client := &kafka.Client{Addr: kafka.TCP(env.KafkaBrokers...), Timeout: 30 * time.Second}
	resp, err := client.CreateTopics(t.Context(), &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
		Topic: topic, NumPartitions: topicPartitions, ReplicationFactor: -1,
		ConfigEntries: []kafka.ConfigEntry{{ConfigName: "max.message.bytes", ConfigValue: fmt.Sprint(topicLimit)}},
	}}})
	if err == nil {
		err = resp.Errors[topic]
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	waitTopicReady(t, env.KafkaBrokers, topic, topicPartitions)
	log := &eventLog{t: t, brokers: env.KafkaBrokers, topic: topic, next: map[int]int64{}}

	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "configmaps.yaml"), fmt.Sprintf(`apiVersion: search.karmada.io/v1alpha1
kind: ResourceRegistry
metadata: {name: oversized}
spec:
  targetCluster: {clusterNames: [%s]}
  resourceSelectors:
  - {apiVersion: v1, kind: ConfigMap, namespace: %[2]s}
  - {apiVersion: v1, kind: Secret, namespace: %[2]s}
`, cluster, ns))
	collector, base := startCollector(t, env, dir, topic)
	waitHTTP(t, base+"/readyz", 2*time.Minute)

	named := func(evs []*envelope.Event, typ envelope.Type, name string) *envelope.Event {
		i := slices.IndexFunc(evs, func(ev *envelope.Event) bool { return ev.Type == typ && ev.Name == name && ev.Namespace == ns })
		if i < 0 {
			return nil
		}
		return evs[i]
	}
	evs := log.waitFor(t, "the SYNCs of the first lists", time.Minute, func(evs []*envelope.Event) bool {
		return slices.ContainsFunc(evs, func(ev *envelope.Event) bool { return ev.Type == envelope.Sync && ev.Resource == "configmaps" }) &&
			slices.ContainsFunc(evs, func(ev *envelope.Event) bool { return ev.Type == envelope.Sync && ev.Resource == "secrets" })
	})
	if named(evs, envelope.Added, "small-secret") == nil {
		t.Error("the small Secret was not published")
	}
	truncated := func(ev *envelope.Event, fields string) {
		t.Helper()
		if ev == nil {
			t.Error("not published")
			return
		}
		ann := gjson.GetBytes(ev.Object, "metadata.annotations")
		if ann.Get(`kubesearch\.io/truncated`).Str != "true" || !strings.HasPrefix(ann.Get(`kubesearch\.io/truncated-fields`).Str, fields) {
			t.Errorf("%s published without the truncation annotations: %s", ev.Name, ann.Raw)
		}
		if len(ev.Object) > topicLimit {
			t.Errorf("%s published with a %d-byte object", ev.Name, len(ev.Object))
		}
	}
	truncated(named(evs, envelope.Added, "huge-secret"), "data.")
	if named(evs, envelope.Added, "small") == nil {
		t.Error("the small ConfigMap was not published")
	}
	if ev := named(evs, envelope.Added, "just-under"); ev == nil {
		t.Error("the ConfigMap just under the topic's limit was not published")
	} else if n := len(ev.Object); n < topicLimit-4<<10 {
		t.Errorf("the ConfigMap just under the limit is %d bytes, not near %d: the test data is wrong", n, topicLimit)
	}
	truncated(named(evs, envelope.Added, "huge"), "data")
	if named(evs, envelope.Added, "huge-metadata") != nil {
		t.Error("the ConfigMap whose metadata is over the topic's limit was published as ADDED")
	}
	if ev := named(evs, envelope.Deleted, "huge-metadata"); ev == nil || len(ev.Object) != 0 {
		t.Error("the ConfigMap whose metadata is over the topic's limit was not published as a DELETED without object")
	}

	// The stream goes on, and the large ConfigMap's deletion lands.
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(t.Context(), configMap("later", "l"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().ConfigMaps(ns).Delete(t.Context(), "huge", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	evs = log.waitFor(t, "the ConfigMap created after the truncation, and the large one's deletion", 30*time.Second, func(evs []*envelope.Event) bool {
		return named(evs, envelope.Added, "later") != nil && named(evs, envelope.Deleted, "huge") != nil
	})
	truncated(named(evs, envelope.Deleted, "huge"), "data")

	letters := readDeadLetters(t, env.KafkaBrokers, topic+".dlq")
	var found bool
	for _, m := range letters {
		h := map[string]string{}
		for _, x := range m.Headers {
			h[x.Key] = string(x.Value)
		}
		if h["kubesearch-dlq-name"] == "huge-secret" || h["kubesearch-dlq-name"] == "huge" {
			t.Errorf("a dead letter for %s, which was published truncated", h["kubesearch-dlq-name"])
		}
		if h["kubesearch-dlq-name"] != "huge-metadata" {
			continue
		}
		found = true
		if want := cluster + "//configmaps"; string(m.Key) != want {
			t.Errorf("dead letter key %q, want %q", m.Key, want)
		}
		if h["kubesearch-dlq-reason"] != "message-too-large" || h["kubesearch-dlq-namespace"] != ns || h["kubesearch-dlq-topic"] != topic || h["kubesearch-dlq-value-dropped"] != "true" {
			t.Errorf("dead letter headers %v", h)
		}
	}
	if !found {
		t.Fatalf("no dead letter for the ConfigMap of huge metadata in %s.dlq (%d letters)", topic, len(letters))
	}
	// Every byte of the topic and the dead-letter topic (keys, headers, values), and the log.
	var all []stream.Message
	all = append(all, letters...)
	for p := range topicPartitions {
		all = append(all, readPartition(t, env.KafkaBrokers, topic, p)...)
	}
	var text strings.Builder
	for _, m := range all {
		text.Write(m.Key)
		text.Write(m.Value)
		for _, x := range m.Headers {
			text.WriteString(x.Key)
			text.Write(x.Value)
		}
	}
	text.WriteString(collector.output())
	if !strings.Contains(text.String(), `"password":""`) || !strings.Contains(text.String(), "small-secret") {
		t.Error("the published Secret's redacted event is not in what was read: the search for its value would miss it")
	}
	for _, v := range []string{secretValue, secretValue + "-huge"} {
		for _, needle := range []string{v, base64.StdEncoding.EncodeToString([]byte(v))} {
			if strings.Contains(text.String(), needle) {
				t.Errorf("the Secret's value %q is in the topic, the dead-letter topic or the collector's log", needle)
			}
		}
	}

	metrics := httpGet(t, base+"/metrics")
	// The huge ConfigMap's ADDED and DELETED, the huge Secret's ADDED, the ADDED of huge metadata.
	if n := metricSum(metrics, "kubesearch_collector_oversized_events_total"); n != 4 {
		t.Errorf("oversized events counted %v, want 4", n)
	}
	for _, want := range []string{
		fmt.Sprintf(`kubesearch_collector_oversized_events_total{cluster=%q,outcome="truncated",resource="configmaps"} 2`, cluster),
		fmt.Sprintf(`kubesearch_collector_oversized_events_total{cluster=%q,outcome="deleted",resource="configmaps"} 1`, cluster),
		fmt.Sprintf(`kubesearch_collector_oversized_events_total{cluster=%q,outcome="truncated",resource="secrets"} 1`, cluster),
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("no %s in the metrics", want)
		}
	}
	if out := collector.output(); !strings.Contains(out, "topicLimit=65536") && !strings.Contains(out, `"topicLimit":65536`) {
		t.Errorf("the collector did not log the topic's lower limit")
	}
}

// readDeadLetters reads what the single partition of a dead-letter topic holds.
func readDeadLetters(t *testing.T, brokers []string, topic string) []stream.Message {
	t.Helper()
	return readPartition(t, brokers, topic, 0)
}

// readPartition reads what one partition of a topic holds.
func readPartition(t *testing.T, brokers []string, topic string, partition int) []stream.Message {
	t.Helper()
	client := stream.NewClient(brokers, stream.Connection{}, nil)
	defer client.Close()
	msgs, err := client.ReadPartition(t.Context(), topic, partition)
	if err != nil {
		t.Fatalf("read %s/%d: %v", topic, partition, err)
	}
	return msgs
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	_, body := facadeGet(t, url)
	return string(body)
}

// facadeGet is the status and body of a GET of url.
func facadeGet(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}
