package document

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/table"
	"github.com/kubesearch/kubesearch/mappings"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

func loadEvent(t testing.TB, path string) *envelope.Event {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := envelope.Unmarshal(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return ev
}

// TestBuildDocumentGolden pins the whole document for realistic objects; refresh with
// go test ./indexer -run Golden -update, and review the diff.
func TestBuildDocumentGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no inputs in testdata: %v", err)
	}
	props := mappedProperties(t)
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".json")
		t.Run(name, func(t *testing.T) {
			ev := loadEvent(t, in)
			doc, err := Build(ev)
			if err != nil {
				t.Fatalf("BuildDocument: %v", err)
			}
			checkAgainstMapping(t, doc, props)
			var got bytes.Buffer
			if err := json.Indent(&got, doc, "", "  "); err != nil {
				t.Fatalf("document is not JSON: %v\n%s", err, doc)
			}
			got.WriteByte('\n')
			golden := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("document differs from %s (run with -update and review the diff):\n%s", golden, got.Bytes())
			}
		})
	}
}

// mappedProperties reads the field types from the template the indexer ships.
func mappedProperties(t testing.TB) map[string]map[string]any {
	t.Helper()
	body, err := mappings.IndexTemplate(mappings.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var tmpl struct {
		Template struct {
			Mappings struct {
				Properties map[string]map[string]any `json:"properties"`
			} `json:"mappings"`
		} `json:"template"`
	}
	if err := json.Unmarshal(body, &tmpl); err != nil {
		t.Fatal(err)
	}
	return tmpl.Template.Mappings.Properties
}

// checkAgainstMapping fails for a field the template does not map (with dynamic: false it would be
// kept but never searchable) or a value its mapped type would reject.
func checkAgainstMapping(t *testing.T, doc []byte, props map[string]map[string]any) {
	t.Helper()
	if !gjson.ValidBytes(doc) {
		t.Fatalf("document is not valid JSON:\n%s", doc)
	}
	if i := bytes.IndexByte(doc, '\n'); i >= 0 {
		t.Errorf("document has a line break at byte %d: it would split its _bulk line", i)
	}
	gjson.ParseBytes(doc).ForEach(func(k, v gjson.Result) bool {
		p, ok := props[k.Str]
		if !ok {
			t.Errorf("field %q is not in the mapping", k.Str)
			return true
		}
		typ, _ := p["type"].(string)
		values := []gjson.Result{v}
		if v.IsArray() && typ != "flat_object" && typ != "object" {
			values = v.Array()
			if len(values) == 0 {
				t.Errorf("field %q: empty arrays should be left out", k.Str)
			}
		}
		for _, e := range values {
			if err := fitsType(typ, e); err != nil {
				t.Errorf("field %q (%s): %v", k.Str, typ, err)
			}
		}
		return true
	})
}

func fitsType(typ string, v gjson.Result) error {
	switch typ {
	case "keyword", "text":
		if v.Type != gjson.String {
			return fmt.Errorf("want a string, got %s", v.Raw)
		}
	case "long", "integer":
		if v.Type != gjson.Number || float64(v.Int()) != v.Num {
			return fmt.Errorf("want an integer, got %s", v.Raw)
		}
	case "boolean":
		if !v.IsBool() {
			return fmt.Errorf("want a boolean, got %s", v.Raw)
		}
	case "date":
		if _, err := time.Parse(time.RFC3339Nano, v.Str); err != nil {
			return fmt.Errorf("want an RFC 3339 date: %v", err)
		}
	case "ip":
		if _, err := netip.ParseAddr(v.Str); err != nil {
			return fmt.Errorf("want an IP address: %v", err)
		}
	case "flat_object", "object":
		if !v.IsObject() {
			return fmt.Errorf("want an object, got %.40s", v.Raw)
		}
	default:
		return fmt.Errorf("no check for mapping type %q", typ)
	}
	return nil
}

// event returns an ADDED event for obj with the identity fields taken from it.
func event(t testing.TB, group, version, kind, obj string) *envelope.Event {
	t.Helper()
	m := gjson.Get(obj, "metadata")
	return &envelope.Event{
		V: envelope.Version, Type: envelope.Added, Cluster: "c1",
		Group: group, Version: version, Resource: strings.ToLower(kind) + "s", Kind: kind,
		Namespace: m.Get("namespace").Str, Name: m.Get("name").Str, UID: m.Get("uid").Str,
		ResourceVersion: m.Get("resourceVersion").Str, Epoch: 7,
		ObservedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Object:     json.RawMessage(obj),
	}
}

func decode(t testing.TB, data string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(data), &m); err != nil {
		t.Fatalf("%v:\n%s", err, data)
	}
	return m
}

// TestBuildDocumentStoredObject checks the rewrite of the object: exactly the cache annotation set
// and managedFields and the last-applied annotation gone, every other byte's meaning kept.
func TestBuildDocumentStoredObject(t *testing.T) {
	tests := []struct {
		name string
		obj  string
		// want is the stored object
		want string
	}{{
		name: "no annotations",
		obj:  `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","uid":"u1"},"data":{"k":"v"}}`,
		want: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","uid":"u1","annotations":{"resource.karmada.io/cached-from-cluster":"c1"}},"data":{"k":"v"}}`,
	}, {
		name: "null annotations",
		obj:  `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"annotations":null,"name":"a","namespace":"n","uid":"u1"}}`,
		want: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"annotations":{"resource.karmada.io/cached-from-cluster":"c1"},"name":"a","namespace":"n","uid":"u1"}}`,
	}, {
		name: "empty annotations",
		obj:  `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","uid":"u1","annotations":{}}}`,
		want: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","uid":"u1","annotations":{"resource.karmada.io/cached-from-cluster":"c1"}}}`,
	}, {
		name: "cache annotation from elsewhere is replaced, last-applied and managedFields dropped",
		obj: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","uid":"u1",
			"managedFields":[{"manager":"kubectl","fieldsV1":{"f:data":{}}}],
			"annotations":{"a.example.com/x":"1","resource.karmada.io/cached-from-cluster":"other",
			"kubectl.kubernetes.io/last-applied-configuration":"{}"}}}`,
		want: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","uid":"u1",
			"annotations":{"a.example.com/x":"1","resource.karmada.io/cached-from-cluster":"c1"}}}`,
	}, {
		name: "apiVersion and kind filled in from the envelope",
		obj:  `{"metadata":{"name":"a","namespace":"n","uid":"u1"}}`,
		want: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","uid":"u1","annotations":{"resource.karmada.io/cached-from-cluster":"c1"}}}`,
	}, {
		name: "whitespace, escapes and unicode survive",
		obj: " \n{ \"apiVersion\" : \"v1\", \"kind\":\"ConfigMap\",\n \"metadata\" : { \"name\":\"a\", \"namespace\":\"n\", \"uid\":\"u1\",\n" +
			" \"labels\": {\"q\\\"uote\":\"caf\\u00e9\"} },\n \"data\": {\"k\": \"line\\nnext \\u2028 ü\"} }\n ",
		want: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","uid":"u1","labels":{"q\"uote":"café"},"annotations":{"resource.karmada.io/cached-from-cluster":"c1"}},"data":{"k":"line\nnext ` + "\u2028" + ` ü"}}`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := Build(event(t, "", "v1", "ConfigMap", tt.obj))
			if err != nil {
				t.Fatalf("BuildDocument: %v", err)
			}
			checkAgainstMapping(t, doc, mappedProperties(t))
			stored, err := mappings.StoredObject(doc)
			if err != nil {
				t.Fatal(err)
			}
			got, want := decode(t, string(stored)), decode(t, tt.want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("stored object\n got: %s\nwant: %s", stored, tt.want)
			}
			keys := gjson.GetBytes(doc, "annotationKeys").Array()
			var ann []string
			for _, k := range keys {
				ann = append(ann, k.Str)
			}
			var wantAnn []string
			gjson.Get(tt.want, "metadata.annotations").ForEach(func(k, _ gjson.Result) bool {
				wantAnn = append(wantAnn, k.Str)
				return true
			})
			if !reflect.DeepEqual(ann, wantAnn) {
				t.Errorf("annotationKeys = %q, want the stored object's %q", ann, wantAnn)
			}
		})
	}
}

func TestBuildDocumentFields(t *testing.T) {
	tests := []struct {
		name                 string
		group, version, kind string
		obj                  string
		want                 map[string]string // gjson path on the document -> raw JSON
		absent               []string
	}{{
		name: "cluster-scoped object has no namespace; non-integer resourceVersion is 0",
		kind: "Namespace", version: "v1",
		obj:    `{"metadata":{"name":"shop","uid":"u1","resourceVersion":"a1b2"},"status":{"phase":"Active"}}`,
		want:   map[string]string{"name": `"shop"`, "resourceVersion": `0`, "phase": `"Active"`, "group": `""`, "apiVersion": `"v1"`},
		absent: []string{"namespace", "labels", "labelKeys", "creationTimestamp", "conditions"},
	}, {
		name: "label keys with dots and slashes, and the plain key they would clash with in an object mapping",
		kind: "ConfigMap", version: "v1",
		obj: `{"metadata":{"name":"a","namespace":"n","uid":"u1","labels":{"app":"web","app.kubernetes.io/name":"web","tier":""}}}`,
		want: map[string]string{
			"labels":    `["app=web","app.kubernetes.io/name=web","tier="]`,
			"labelKeys": `["app","app.kubernetes.io/name","tier"]`,
		},
	}, {
		name: "headless Service has no clusterIP; dual-stack one has two",
		kind: "Service", version: "v1",
		obj:    `{"metadata":{"name":"a","namespace":"n","uid":"u1"},"spec":{"type":"ClusterIP","clusterIP":"None","clusterIPs":["None"]}}`,
		want:   map[string]string{"type": `"ClusterIP"`},
		absent: []string{"clusterIP"},
	}, {
		name: "dual-stack Service",
		kind: "Service", version: "v1",
		obj:  `{"metadata":{"name":"a","namespace":"n","uid":"u1"},"spec":{"type":"LoadBalancer","clusterIP":"10.96.0.10","clusterIPs":["10.96.0.10","fd00::a"]}}`,
		want: map[string]string{"type": `"LoadBalancer"`, "clusterIP": `["10.96.0.10","fd00::a"]`},
	}, {
		name: "pending Pod: not ready, no restarts, no IPs",
		kind: "Pod", version: "v1",
		obj:    `{"metadata":{"name":"p","namespace":"n","uid":"u1"},"spec":{"containers":[{"name":"a","image":"busybox"},{"name":"b","image":"busybox"}]},"status":{"phase":"Pending","qosClass":"BestEffort"}}`,
		want:   map[string]string{"ready": `false`, "restarts": `0`, "images": `["busybox"]`, "containerNames": `["a","b"]`, "phase": `"Pending"`},
		absent: []string{"podIP", "hostIP", "nodeName"},
	}, {
		name:  "a custom resource called Pod gets no Pod fields",
		group: "example.com", kind: "Pod", version: "v1",
		obj:    `{"metadata":{"name":"p","namespace":"n","uid":"u1"},"spec":{"nodeName":"x","containers":[{"name":"a","image":"busybox"}]}}`,
		want:   map[string]string{"apiVersion": `"example.com/v1"`},
		absent: []string{"nodeName", "images", "ready", "restarts"},
	}, {
		name: "Node",
		kind: "Node", version: "v1",
		obj: `{"metadata":{"name":"w1","uid":"u1","labels":{"kubernetes.io/hostname":"w1"}},"spec":{"unschedulable":true},
			"status":{"nodeInfo":{"kubeletVersion":"v1.34.3"},"conditions":[{"type":"MemoryPressure","status":"False"},{"type":"Ready","status":"Unknown"}]}}`,
		want: map[string]string{"ready": `false`, "unschedulable": `true`, "kubeletVersion": `"v1.34.3"`,
			"conditions": `["MemoryPressure=False","Ready=Unknown"]`},
	}, {
		name:  "DaemonSet counts come from its own status fields",
		group: "apps", kind: "DaemonSet", version: "v1",
		obj: `{"metadata":{"name":"d","namespace":"n","uid":"u1"},"spec":{"template":{"spec":{"containers":[{"name":"agent","image":"agent:1"}]}}},
			"status":{"desiredNumberScheduled":5,"numberReady":4,"numberAvailable":3,"updatedNumberScheduled":5}}`,
		want: map[string]string{"replicas": `5`, "readyReplicas": `4`, "availableReplicas": `3`, "updatedReplicas": `5`, "images": `["agent:1"]`},
	}, {
		name:  "scaled-to-zero Deployment reports zero counts the API server left out",
		group: "apps", kind: "Deployment", version: "v1",
		obj:  `{"metadata":{"name":"d","namespace":"n","uid":"u1"},"spec":{"replicas":0},"status":{}}`,
		want: map[string]string{"replicas": `0`, "readyReplicas": `0`, "availableReplicas": `0`, "updatedReplicas": `0`},
	}, {
		name:  "CronJob images come from its job template",
		group: "batch", kind: "CronJob", version: "v1",
		obj:  `{"metadata":{"name":"c","namespace":"n","uid":"u1"},"spec":{"jobTemplate":{"spec":{"template":{"spec":{"containers":[{"name":"backup","image":"backup:3"}]}}}}}}`,
		want: map[string]string{"images": `["backup:3"]`, "containerNames": `["backup"]`},
	}, {
		name:  "warning Event",
		group: "events.k8s.io", kind: "Event", version: "v1",
		obj:  `{"metadata":{"name":"e","namespace":"n","uid":"u1"},"type":"Warning","reason":"BackOff"}`,
		want: map[string]string{"type": `"Warning"`, "reason": `"BackOff"`},
	}, {
		name: "owners",
		kind: "Pod", version: "v1",
		obj: `{"metadata":{"name":"p","namespace":"n","uid":"u1","ownerReferences":[
			{"kind":"ReplicaSet","name":"rs1","uid":"o1"},{"kind":"ReplicaSet","name":"rs2","uid":"o2"}]}}`,
		want: map[string]string{"ownerUIDs": `["o1","o2"]`, "ownerKinds": `["ReplicaSet"]`, "ownerRefs": `["ReplicaSet/rs1","ReplicaSet/rs2"]`},
	}, {
		name: "deletion in progress",
		kind: "ConfigMap", version: "v1",
		obj:  `{"metadata":{"name":"a","namespace":"n","uid":"u1","creationTimestamp":"2026-01-01T00:00:00Z","deletionTimestamp":"2026-01-02T00:00:00Z"}}`,
		want: map[string]string{"creationTimestamp": `"2026-01-01T00:00:00Z"`, "deletionTimestamp": `"2026-01-02T00:00:00Z"`, "lastChangedAt": `"2026-01-02T03:04:05.000Z"`, "epoch": `7`},
	}}
	props := mappedProperties(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := Build(event(t, tt.group, tt.version, tt.kind, tt.obj))
			if err != nil {
				t.Fatalf("BuildDocument: %v", err)
			}
			checkAgainstMapping(t, doc, props)
			for path, want := range tt.want {
				if got := gjson.GetBytes(doc, path).Raw; got != want {
					t.Errorf("%s = %s, want %s", path, got, want)
				}
			}
			for _, path := range tt.absent {
				if r := gjson.GetBytes(doc, path); r.Exists() {
					t.Errorf("%s = %s, want it absent", path, r.Raw)
				}
			}
		})
	}
}

func TestBuildDocumentTrimsLongLeaves(t *testing.T) {
	long := strings.Repeat("x", 40<<10)
	obj := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dash","namespace":"n","uid":"u1"},` +
		`"data":{"small.json":"{}","dashboard.json":"` + long + `","list":["a","` + long + `","b"]}}`
	ev := event(t, "", "v1", "ConfigMap", obj)
	doc, err := Build(ev)
	if err != nil {
		t.Fatalf("BuildDocument: %v", err)
	}
	checkAgainstMapping(t, doc, mappedProperties(t))

	indexed := gjson.GetBytes(doc, "object")
	if got := indexed.Get(`data.dashboard\.json`); got.Exists() {
		t.Errorf("object.data.dashboard.json is still indexed (%d bytes)", len(got.Str))
	}
	if got := indexed.Get("data.list").Raw; got != `["a","b"]` {
		t.Errorf("object.data.list = %s, want the short elements", got)
	}
	if got := indexed.Get(`data.small\.json`).Str; got != "{}" {
		t.Errorf("object.data.small.json = %q, want it kept", got)
	}
	// Every term flat_object would make must fit Lucene's limit.
	var walk func(path string, v gjson.Result)
	walk = func(path string, v gjson.Result) {
		switch {
		case v.IsObject():
			v.ForEach(func(k, val gjson.Result) bool {
				walk(path+"."+k.Str, val)
				return true
			})
		case v.IsArray():
			v.ForEach(func(_, val gjson.Result) bool {
				walk(path, val)
				return true
			})
		default:
			if n := len(path) + 1 + len(v.String()); n > maxTermBytes {
				t.Errorf("term %s=... is %d bytes", path, n)
			}
		}
	}
	walk("object", indexed)

	if got := gjson.GetBytes(doc, "trimmedPaths").Raw; got != `["data.dashboard.json","data.list"]` {
		t.Errorf("trimmedPaths = %s", got)
	}
	stored, err := mappings.StoredObject(doc)
	if err != nil {
		t.Fatal(err)
	}
	want := decode(t, obj)
	want["metadata"].(map[string]any)["annotations"] = map[string]any{CachedFromClusterAnnotation: "c1"}
	if got := decode(t, string(stored)); !reflect.DeepEqual(got, want) {
		t.Errorf("stored object lost data: %.300s", stored)
	}
}

// manyKeysConfigMap is a ConfigMap of n short values: big, but with nothing to trim.
func manyKeysConfigMap(n int) string {
	var b strings.Builder
	b.WriteString(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big","namespace":"n","uid":"u1"},"data":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"key-%d":"%s"`, i, strings.Repeat("v", 100))
	}
	b.WriteString(`}}`)
	return b.String()
}

func TestBuildDocumentLargeObjectWithoutLongLeaves(t *testing.T) {
	doc, err := Build(event(t, "", "v1", "ConfigMap", manyKeysConfigMap(2000)))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{mappings.FieldFullObject, mappings.FieldTrimmedPaths} {
		if gjson.GetBytes(doc, f).Exists() {
			t.Errorf("%s present although no leaf is too long", f)
		}
	}
	if n := len(gjson.GetBytes(doc, "object.data").Map()); n != 2000 {
		t.Errorf("object.data has %d keys, want 2000", n)
	}
}

func TestBuildDocumentErrors(t *testing.T) {
	const good = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","uid":"u1","resourceVersion":"5"}}`
	tests := []struct {
		name   string
		mutate func(ev *envelope.Event)
		want   string
	}{
		{"deleted event", func(ev *envelope.Event) { ev.Type = envelope.Deleted }, "DELETED event"},
		{"sync event", func(ev *envelope.Event) { ev.Type = envelope.Sync }, "SYNC event"},
		{"no object", func(ev *envelope.Event) { ev.Object = nil }, "not valid JSON"},
		{"not JSON", func(ev *envelope.Event) { ev.Object = json.RawMessage(`{"metadata":`) }, "not valid JSON"},
		{"array", func(ev *envelope.Event) { ev.Object = json.RawMessage(`[1]`) }, "not a JSON object"},
		{"no metadata", func(ev *envelope.Event) { ev.Object = json.RawMessage(`{"kind":"ConfigMap"}`) }, "metadata: missing"},
		{"metadata not an object", func(ev *envelope.Event) { ev.Object = json.RawMessage(`{"metadata":"x"}`) }, "metadata: missing or not an object"},
		{"no uid", func(ev *envelope.Event) {
			ev.Object = json.RawMessage(`{"metadata":{"name":"a","namespace":"n"}}`)
		}, "metadata.uid: missing"},
		{"uid differs", func(ev *envelope.Event) { ev.UID = "u2" }, `metadata.uid "u1" differs from the event's "u2"`},
		{"name differs", func(ev *envelope.Event) { ev.Name = "b" }, `metadata.name "a" differs`},
		{"namespace differs", func(ev *envelope.Event) { ev.Namespace = "" }, `metadata.namespace "n" differs`},
		{"kind differs", func(ev *envelope.Event) { ev.Kind = "Secret" }, `kind "ConfigMap" differs`},
		{"apiVersion differs", func(ev *envelope.Event) { ev.Group = "apps" }, `apiVersion "v1" differs`},
		{"resourceVersion differs", func(ev *envelope.Event) { ev.ResourceVersion = "6" }, `resourceVersion "5" differs`},
		{"no kind anywhere", func(ev *envelope.Event) {
			ev.Kind = ""
			ev.Object = json.RawMessage(`{"metadata":{"name":"a","namespace":"n","uid":"u1"}}`)
		}, "kind: missing"},
		{"annotations not an object", func(ev *envelope.Event) {
			ev.Object = json.RawMessage(`{"metadata":{"name":"a","namespace":"n","uid":"u1","annotations":"x"}}`)
		}, "metadata.annotations: not an object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := event(t, "", "v1", "ConfigMap", good)
			tt.mutate(ev)
			doc, err := Build(ev)
			if err == nil {
				t.Fatalf("BuildDocument succeeded: %s", doc)
			}
			if !errors.Is(err, ErrMalformed) || !errors.Is(err, envelope.ErrMalformed) {
				t.Errorf("error %q matches neither ErrMalformed nor envelope.ErrMalformed", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
			if !strings.Contains(err.Error(), `cluster "c1"`) {
				t.Errorf("error %q does not name the cluster", err)
			}
		})
	}
	t.Run("nil event", func(t *testing.T) {
		if _, err := Build(nil); !errors.Is(err, ErrMalformed) {
			t.Errorf("error = %v, want ErrMalformed", err)
		}
	})
}

func TestAppendEscaped(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uote\back`, "tab\tnl\ncr\r\x01\x1f", "ü€😀", "bad\xffutf8", "\u2028"} {
		got := AppendString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Errorf("AppendString(%q) = %s: not JSON: %v", s, got, err)
			continue
		}
		want, _ := json.Marshal(s)
		var wantBack string
		_ = json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Errorf("AppendString(%q) decodes to %q, want %q", s, back, wantBack)
		}
	}
}

// benchPod is the Pod from testdata grown to about 15 KB with the env vars, volumes and
// annotations real workloads carry.
func benchPod(b *testing.B) *envelope.Event {
	b.Helper()
	ev := loadEvent(b, filepath.Join("testdata", "pod.json"))
	var obj map[string]any
	if err := json.Unmarshal(ev.Object, &obj); err != nil {
		b.Fatal(err)
	}
	spec := obj["spec"].(map[string]any)
	for _, c := range spec["containers"].([]any) {
		c := c.(map[string]any)
		env, _ := c["env"].([]any)
		for i := range 75 {
			env = append(env, map[string]any{"name": fmt.Sprintf("FEATURE_FLAG_%02d", i), "value": "enabled-for-some-tenants"})
		}
		c["env"] = env
	}
	ann := obj["metadata"].(map[string]any)["annotations"].(map[string]any)
	ann["checksum/config"] = strings.Repeat("ab", 32)
	ann["checksum/secret"] = strings.Repeat("cd", 32)
	data, err := json.Marshal(obj)
	if err != nil {
		b.Fatal(err)
	}
	ev.Object = data
	return ev
}

func bigConfigMap(size int) *envelope.Event {
	obj := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dashboards","namespace":"monitoring","uid":"u1",` +
		`"labels":{"grafana_dashboard":"1"}},"data":{"fleet.json":"` + strings.Repeat("x", size) + `"}}`
	return &envelope.Event{
		V: envelope.Version, Type: envelope.Modified, Cluster: "c1", Version: "v1", Resource: "configmaps",
		Kind: "ConfigMap", Namespace: "monitoring", Name: "dashboards", UID: "u1", Epoch: 1,
		ObservedAt: time.Now(), Object: json.RawMessage(obj),
	}
}

func BenchmarkBuild(b *testing.B) {
	for _, bc := range []struct {
		name string
		ev   func(*testing.B) *envelope.Event
	}{
		{"pod-15KiB", benchPod},
		{"configmap-1.5MiB-one-long-value", func(*testing.B) *envelope.Event { return bigConfigMap(1536 << 10) }},
		{"configmap-1.4MiB-short-values", func(b *testing.B) *envelope.Event {
			return event(b, "", "v1", "ConfigMap", manyKeysConfigMap(13000))
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ev := bc.ev(b)
			b.SetBytes(int64(len(ev.Object)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Build(ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestCompact(t *testing.T) {
	for _, in := range []string{
		"{\n  \"a\" : \"keep  spaces\",\n\t\"b\": [1, 2 ,\r\n 3]\n}",
		`{"q": "quote \" and  backslash \\", "next" : "x"}`,
		`{"u": "\u00e9 \\\" ", "e": {}, "n": null}`,
		`{}`,
	} {
		got := compact([]byte(in))
		var want bytes.Buffer
		if err := json.Compact(&want, []byte(in)); err != nil {
			t.Fatalf("bad test input %q: %v", in, err)
		}
		if string(got) != want.String() {
			t.Errorf("compact(%q) = %q, want %q", in, got, want.String())
		}
	}
}

// lastChangedAt is the event's change time, not the time it was observed: a re-list observes every
// object anew, and only the objects that changed may look changed. An event from a collector that
// does not say falls back to the observation time.
func TestBuildDocumentLastChangedAt(t *testing.T) {
	obj := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","uid":"u","resourceVersion":"5"}}`
	for _, tt := range []struct {
		name    string
		changed time.Time
		want    string
	}{
		{"changedAt", time.Date(2025, 6, 7, 8, 9, 10, 0, time.UTC), "2025-06-07T08:09:10.000Z"},
		{"observedAt", time.Time{}, "2026-01-02T03:04:05.000Z"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ev := event(t, "", "v1", "ConfigMap", obj)
			ev.ChangedAt = tt.changed
			doc, err := Build(ev)
			if err != nil {
				t.Fatal(err)
			}
			if got := gjson.GetBytes(doc, "lastChangedAt").Str; got != tt.want {
				t.Errorf("lastChangedAt = %s, want %s", got, tt.want)
			}
			re, err := Rebuild(doc)
			if err != nil {
				t.Fatal(err)
			}
			if got := gjson.GetBytes(re, "lastChangedAt").Str; got != tt.want {
				t.Errorf("rebuilt lastChangedAt = %s, want %s", got, tt.want)
			}
		})
	}
}

// BenchmarkDecodeAndBuild measures what the indexer's consumer does for each message before any
// request: decode the envelope and build the document. About half of it is envelope.Unmarshal
// (encoding/json).
func BenchmarkDecodeAndBuild(b *testing.B) {
	value, err := benchPod(b).Marshal()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(value)))
	b.ReportAllocs()
	for b.Loop() {
		ev, err := envelope.Unmarshal(value)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := BuildDecoded(ev); err != nil {
			b.Fatal(err)
		}
	}
}

// The document's status is the STATUS cell of the object's Table row (internal/table), so
// sort=status orders what the search page shows; kinds without a Status column, and custom
// resources, have none.
func TestBuildDocumentStatusIsTheTableCell(t *testing.T) {
	crashLoop := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"api-7d9f8c6b5-x2x9q","namespace":"shop","uid":"u1","resourceVersion":"5"},
		"spec":{"containers":[{"name":"api","image":"ghcr.io/acme/api:3.2","env":[{"name":"A","value":"b"}]},{"name":"envoy","image":"envoy:v1"}]},
		"status":{"phase":"Running","conditions":[{"type":"Ready","status":"False"}],"containerStatuses":[
			{"name":"api","ready":false,"restartCount":7,"state":{"waiting":{"reason":"CrashLoopBackOff","message":"back-off 5m0s"}},
			 "lastState":{"terminated":{"exitCode":1,"reason":"Error","finishedAt":"2026-01-01T00:00:00Z"}}},
			{"name":"envoy","ready":true,"restartCount":0,"state":{"running":{"startedAt":"2026-01-01T00:00:00Z"}}}]}}`
	tests := []struct {
		name                 string
		group, version, kind string
		resource             string
		obj                  string
		want                 string // "" for no status field
	}{
		{"CrashLoopBackOff Pod", "", "v1", "Pod", "pods", crashLoop, "CrashLoopBackOff"},
		{"completed Pod", "", "v1", "Pod", "pods", `{"metadata":{"name":"a","namespace":"n","uid":"u1"},"spec":{"containers":[{"name":"c"}]},
			"status":{"phase":"Succeeded","containerStatuses":[{"name":"c","state":{"terminated":{"exitCode":0,"reason":"Completed"}}}]}}`, "Completed"},
		{"cordoned Node", "", "v1", "Node", "nodes", `{"metadata":{"name":"n1","uid":"u1"},"spec":{"unschedulable":true},
			"status":{"conditions":[{"type":"Ready","status":"False"}],"images":[{"names":["x"],"sizeBytes":1}]}}`, "NotReady,SchedulingDisabled"},
		{"suspended Job", "batch", "v1", "Job", "jobs", `{"metadata":{"name":"j","namespace":"n","uid":"u1"},
			"status":{"conditions":[{"type":"Suspended","status":"True"}]}}`, "Suspended"},
		{"Deployment: no Status column", "apps", "v1", "Deployment", "deployments", `{"metadata":{"name":"d","namespace":"n","uid":"u1"},
			"spec":{"replicas":2},"status":{"readyReplicas":1}}`, ""},
		{"a custom resource called pods: its columns are its CRD's", "example.com", "v1", "Pod", "pods",
			strings.Replace(crashLoop, `"apiVersion":"v1"`, `"apiVersion":"example.com/v1"`, 1), ""},
		{"a Pod whose status has no phase: an empty cell is no status", "", "v1", "Pod", "pods", `{"metadata":{"name":"a","namespace":"n","uid":"u1"}}`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := event(t, tc.group, tc.version, tc.kind, tc.obj)
			ev.Resource = tc.resource
			doc, err := Build(ev)
			if err != nil {
				t.Fatal(err)
			}
			got := gjson.GetBytes(doc, FieldStatus)
			if tc.want == "" {
				if got.Exists() {
					t.Errorf("status %s, want none", got.Raw)
				}
				return
			}
			if got.Str != tc.want {
				t.Errorf("status %s, want %q", got.Raw, tc.want)
			}
			// The same value as the Table row's Status cell, the one the page shows.
			p, ok := table.Lookup(tc.group, tc.resource)
			if !ok {
				t.Fatalf("no printer for %s", tc.resource)
			}
			row, err := p.Row([]byte(tc.obj), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			col := slices.IndexFunc(p.Columns(), func(c metav1.TableColumnDefinition) bool { return c.Name == table.StatusColumn })
			if col < 0 || row.Cells[col] != got.Str {
				t.Errorf("status %q; the Table row's Status cell (column %d) is %v", got.Str, col, row.Cells)
			}
		})
	}
}

// The document holds the sort keys of the object's Table columns (table.Printer.SortKeys); a
// custom resource, whose columns are its CRD's, holds none, nor does an object its printer
// cannot decode (its Table row fails too), whose document is still written.
func TestBuildDocumentColumns(t *testing.T) {
	pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","namespace":"n","uid":"u1"},"spec":{"nodeName":"node-1","containers":[{"name":"c"}]},
		"status":{"phase":"Running","containerStatuses":[{"name":"c","ready":true,"restartCount":12,"state":{"running":{}}}]}}`
	for _, tc := range []struct {
		name, group, obj string
		want             map[string]string // nil: no columns
	}{
		{"Pod", "", pod, map[string]string{"node": "node-1"}},
		{"a custom resource called pods", "example.com", strings.Replace(pod, `"apiVersion":"v1"`, `"apiVersion":"example.com/v1"`, 1), nil},
		{"a Pod its printer cannot decode", "", strings.Replace(pod, `"restartCount":12`, `"restartCount":"twelve"`, 1), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := event(t, tc.group, "v1", "Pod", tc.obj)
			ev.Resource = "pods"
			doc, err := Build(ev)
			if err != nil {
				t.Fatal(err)
			}
			got := gjson.GetBytes(doc, FieldColumns)
			if tc.want == nil {
				if got.Exists() {
					t.Errorf("columns %s, want none", got.Raw)
				}
				return
			}
			for id, v := range tc.want {
				if s := got.Get(id).Str; s != v {
					t.Errorf("columns.%s = %q, want %q (%s)", id, s, v, got.Raw)
				}
			}
			p, _ := table.Lookup("", "pods")
			keys, _ := p.SortKeys([]byte(tc.obj))
			if n := len(got.Map()); n != len(keys) || got.Get("restarts").Str != keys[1].Value {
				t.Errorf("columns %s, the printer's keys %v", got.Raw, keys)
			}
		})
	}
}
