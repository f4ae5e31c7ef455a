package collector

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/stream"
)

// grafanaDashboards is a ConfigMap as a Grafana sidecar reads them: one dashboard of dashboardBytes
// of JSON, a few small keys, the labels and annotations a Helm chart puts on it.
func grafanaDashboards(t *testing.T, rv string, dashboardBytes int) map[string]any {
	t.Helper()
	random := make([]byte, dashboardBytes*3/4)
	_, _ = rand.Read(random)
	return map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]any{
			"name": "grafana-dashboards", "namespace": "monitoring", "uid": "6f1c0d3e-2b7a-4c1e-9a57-3d1f0c2b8e41",
			"resourceVersion": rv, "creationTimestamp": "2026-01-12T08:30:00Z",
			"labels":      map[string]any{"app.kubernetes.io/name": "grafana", "grafana_dashboard": "1"},
			"annotations": map[string]any{"meta.helm.sh/release-name": "kube-prometheus-stack", "meta.helm.sh/release-namespace": "monitoring"},
		},
		"data": map[string]any{
			// Incompressible, as panels full of embedded images are.
			"cluster-overview.json": `{"panels":"` + base64.StdEncoding.EncodeToString(random) + `"}`,
			"folder":                "Kubernetes",
			"README.md":             "Dashboards of the platform team; edit in git, not in Grafana.",
		},
	}
}

func configMapEvent(t *testing.T, typ envelope.Type, obj map[string]any) *envelope.Event {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	meta := obj["metadata"].(map[string]any)
	return &envelope.Event{V: envelope.Version, Type: typ, Cluster: "member1", Version: "v1", Resource: "configmaps", Kind: "ConfigMap",
		Namespace: meta["namespace"].(string), Name: meta["name"].(string), UID: meta["uid"].(string), ResourceVersion: meta["resourceVersion"].(string),
		Epoch: 1767225600000001, ObservedAt: time.Now().UTC(), Object: raw}
}

// A ConfigMap over the default message size limit (a 2 MiB dashboard; the API server takes up to
// 3 MiB in a request) is indexed without its large key: the ADDED and MODIFIED carry every other
// field and key, annotated with what was left out, and the DELETED carries the metadata. What the
// indexer (document.BuildDecoded) and the query API's watch cache (document.Object) read from an
// event accepts each form. Before, all three were dropped: the ConfigMap was missing from the index,
// and once indexed at a smaller size, its deletion never reached it.
func TestPublisherTruncatesALargeConfigMap(t *testing.T) {
	const limit = stream.DefaultMaxMessageBytes
	k := newPubHarness(t)
	p, _ := k.publisher(t, publisherOptions{MaxMessageBytes: limit})
	var reported []droppedEvent
	p.dropped = func(ev droppedEvent) { reported = append(reported, ev) }
	evs := []*envelope.Event{
		configMapEvent(t, envelope.Added, grafanaDashboards(t, "48213", 2<<20)),
		configMapEvent(t, envelope.Modified, grafanaDashboards(t, "48300", 2<<20+100<<10)),
		configMapEvent(t, envelope.Deleted, grafanaDashboards(t, "48400", 2<<20+100<<10)),
	}
	for _, ev := range evs {
		v, err := ev.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if m := (stream.Message{Key: ev.Key(), Value: v}); m.Size() <= limit {
			t.Fatalf("the %s event is %d bytes, within the limit: the test proves nothing", ev.Type, m.Size())
		}
		if err := p.Publish(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
	}
	p.close()
	k.waitRun(t, 30*time.Second)

	msgs := k.read(t, "events")
	if len(msgs) != 3 {
		t.Fatalf("the topic holds %d events, want 3", len(msgs))
	}
	for i, m := range msgs {
		ev := decoded(t, m)
		t.Run(string(ev.Type), func(t *testing.T) {
			if ev.Type != evs[i].Type || ev.UID != evs[i].UID || ev.ResourceVersion != evs[i].ResourceVersion || m.Size() > limit {
				t.Fatalf("published %s %s rv %s in %d bytes, want the %s at rv %s within %d", ev.Type, ev.UID, ev.ResourceVersion, m.Size(),
					evs[i].Type, evs[i].ResourceVersion, limit)
			}
			if annotation(t, ev, TruncatedAnnotation) != "true" {
				t.Errorf("no %s annotation", TruncatedAnnotation)
			}
			obj, err := document.Object(ev) // what the watch cache serves
			if err != nil {
				t.Fatalf("the watch cache refuses it: %v", err)
			}
			for path, want := range map[string]string{
				"metadata.labels.grafana_dashboard":                              "1",
				`metadata.annotations.meta\.helm\.sh/release-name`:               "kube-prometheus-stack",
				`metadata.annotations.resource\.karmada\.io/cached-from-cluster`: "member1",
			} {
				if got := gjson.GetBytes(obj, path).String(); got != want {
					t.Errorf("%s = %q, want %q", path, got, want)
				}
			}
			if ev.Type == envelope.Deleted {
				if got := annotation(t, ev, TruncatedFieldsAnnotation); got != "data" || hasField(t, ev, "data") {
					t.Errorf("the DELETED carries data or lists %q, want the metadata and \"data\" listed", got)
				}
				return
			}
			if got := annotation(t, ev, TruncatedFieldsAnnotation); got != "data.cluster-overview.json" {
				t.Errorf("%s = %q, want data.cluster-overview.json", TruncatedFieldsAnnotation, got)
			}
			data := gjson.GetBytes(ev.Object, "data")
			if data.Get("folder").Str != "Kubernetes" || !data.Get("README\\.md").Exists() || data.Get("cluster-overview\\.json").Exists() {
				t.Errorf("data holds %s, want every key but the dashboard", data.Raw)
			}
			doc, err := document.BuildDecoded(ev) // what the indexer writes
			if err != nil {
				t.Fatalf("the indexer refuses it: %v", err)
			}
			if got := gjson.GetBytes(doc, "name").Str; got != "grafana-dashboards" {
				t.Errorf("document name %q", got)
			}
			if !strings.Contains(string(doc), TruncatedFieldsAnnotation) {
				t.Errorf("the document does not say it is truncated")
			}
		})
	}
	if letters := k.read(t, "events.dlq"); len(letters) != 0 || len(reported) != 0 {
		t.Errorf("%d dead letters, %v reported: every event was published", len(letters), reported)
	}
	if got := oversizedCounts(t, p); !onlyCount(got, "member1/configmaps/truncated", 3) {
		t.Errorf("oversized = %v, want member1/configmaps/truncated: 3", got)
	}
}

// An object whose metadata alone is over the limit cannot be indexed in any form: its ADDED is
// published as a DELETED without object, so no older state of it stays searchable, and recorded as
// an unpublished object (dead letter, /status, error log). Its DELETED goes out without object
// too, and is no failure: the deletion lands.
func TestPublisherDeletesWhatDoesNotFitEvenTruncated(t *testing.T) {
	const limit = 16 << 10
	k := newPubHarness(t)
	p, logs := k.publisher(t, publisherOptions{MaxMessageBytes: limit})
	var reported []droppedEvent
	p.dropped = func(ev droppedEvent) { reported = append(reported, ev) }
	obj := grafanaDashboards(t, "7", 1<<10)
	obj["metadata"].(map[string]any)["annotations"].(map[string]any)["example.com/notes"] = strings.Repeat("n", 40<<10)
	added := configMapEvent(t, envelope.Added, obj)
	obj["metadata"].(map[string]any)["resourceVersion"] = "9"
	deleted := configMapEvent(t, envelope.Deleted, obj)
	for _, ev := range []*envelope.Event{added, pubEvent("member1", "after", 0), deleted} {
		if err := p.Publish(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
	}
	p.close()
	k.waitRun(t, 30*time.Second)

	msgs := k.read(t, "events")
	var got []string
	for _, m := range msgs {
		ev := decoded(t, m)
		got = append(got, fmt.Sprintf("%s %s rv=%s object=%d", ev.Type, ev.Name, ev.ResourceVersion, len(ev.Object)))
	}
	if len(got) != 3 || got[0] != "DELETED grafana-dashboards rv=7 object=0" || !strings.HasPrefix(got[1], "ADDED after ") ||
		got[2] != "DELETED grafana-dashboards rv=9 object=0" {
		t.Fatalf("the topic holds %q, want the ADDED as a DELETED without object, the next event, the DELETED without object", got)
	}
	assertTooLargeLetter(t, k.read(t, "events.dlq"), added)
	if len(reported) != 1 || reported[0].name != "grafana-dashboards" || !strings.Contains(reported[0].reason, "published as DELETED") {
		t.Errorf("reported %+v, want the ADDED once, saying it was published as DELETED", reported)
	}
	if got := oversizedCounts(t, p); len(got) != 2 || got["member1/configmaps/deleted"] != 1 || got["member1/configmaps/truncated"] != 1 {
		t.Errorf("oversized = %v, want one deleted (the ADDED) and one truncated (the DELETED)", got)
	}
	if !strings.Contains(logs.String(), "object published as DELETED") {
		t.Errorf("no error log for the object out of the index:\n%s", logs)
	}
}

// The list of what was left out is bounded, whatever the names.
func TestTruncatedFieldsList(t *testing.T) {
	var many []string
	for i := range 500 {
		many = append(many, fmt.Sprintf("data.key-<%03d>", i))
	}
	got := fieldList(many)
	if v, _ := json.Marshal(got); len(v) > maxTruncatedFields || !strings.HasSuffix(got, ",…") || !strings.HasPrefix(got, "data.key-<000>,data.key-<001>") {
		t.Errorf("fieldList of 500 names: %d bytes as JSON: %q", len(v), got)
	}
	if got := fieldList([]string{"data", "spec"}); got != "data,spec" {
		t.Errorf("fieldList(data, spec) = %q", got)
	}
}
