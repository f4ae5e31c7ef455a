package collector

import (
	"encoding/json"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// readRawItem publishes exactly what the decoding path does (prune, apiVersion and kind set,
// changedAt), compared as decoded JSON, for the shapes list items come in.
func TestReadRawItemEqualsTheDecodingPath(t *testing.T) {
	managed := `"managedFields":[{"manager":"kubectl","operation":"Update","time":"2026-11-30T10:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{}}},` +
		`{"manager":"kubelet","operation":"Update","time":"2026-11-30T12:30:00Z","subresource":"status"}]`
	lastApplied := `"kubectl.kubernetes.io/last-applied-configuration":"{\"apiVersion\":\"v1\",\"kind\":\"Pod\"}\n"`
	for _, c := range []struct {
		name, item string
	}{
		{"pod with managedFields and annotations", `{"metadata":{"name":"web-0","namespace":"shop","uid":"u1","resourceVersion":"42",` +
			`"creationTimestamp":"2026-11-30T09:00:00Z","labels":{"app.kubernetes.io/name":"web","topology.kubernetes.io/zone":"eu-1a"},` +
			`"annotations":{` + lastApplied + `,"prometheus.io/scrape":"true"},` + managed + `},` +
			`"spec":{"containers":[{"name":"app","image":"nginx:1.27"}]},"status":{"phase":"Running"}}`},
		{"only the last-applied annotation", `{"metadata":{"name":"a","namespace":"shop","uid":"u2","resourceVersion":"7","annotations":{` + lastApplied + `}},"data":{"k":"v"}}`},
		{"last-applied annotation last", `{"metadata":{"name":"a","uid":"u3","resourceVersion":"7","annotations":{"x":"1",` + lastApplied + `}}}`},
		{"managedFields first in metadata", `{"metadata":{` + managed + `,"name":"n1","uid":"u4","resourceVersion":"9","deletionTimestamp":"2026-12-01T00:00:00Z"}}`},
		{"no managedFields, empty annotations", `{"metadata":{"name":"n2","uid":"u5","resourceVersion":"1","annotations":{}},"spec":{}}`},
		{"metadata last, nested metadata in the spec", `{"spec":{"template":{"metadata":{"managedFields":[],"annotations":{` + lastApplied + `}}}},` +
			`"metadata":{"name":"d","namespace":"ns","uid":"u6","resourceVersion":"3",` + managed + `}}`},
		{"custom resource with its apiVersion and kind", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"ns","uid":"u7","resourceVersion":"5",` + managed + `},"spec":{"size":3}}`},
		{"whitespace", " {\n \"metadata\" : { \"name\" : \"s\", \"uid\":\"u8\", \"resourceVersion\":\"2\", " + managed + " } , \"spec\" : { } }"},
	} {
		t.Run(c.name, func(t *testing.T) {
			apiVersion, kind := "v1", "Pod"
			if c.name == "custom resource with its apiVersion and kind" {
				apiVersion, kind = "example.com/v1", "Widget"
			}
			it, ok := readRawItem(c.item, apiVersion, kind, false)
			if !ok {
				t.Fatal("readRawItem refused the item")
			}
			obj := &unstructured.Unstructured{}
			if err := utiljson.Unmarshal([]byte(c.item), &obj.Object); err != nil {
				t.Fatal(err)
			}
			obj.SetAPIVersion(apiVersion)
			obj.SetKind(kind)
			wantChanged := changedAt(obj)
			prune(obj, false)
			var got map[string]any
			if err := json.Unmarshal(it.object, &got); err != nil {
				t.Fatalf("published object is not JSON: %v\n%s", err, it.object)
			}
			want := map[string]any{}
			b, _ := json.Marshal(obj.Object)
			_ = json.Unmarshal(b, &want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("object:\n got %s\nwant %s", it.object, b)
			}
			if !it.changed.Equal(wantChanged) {
				t.Errorf("changed %v, want %v", it.changed, wantChanged)
			}
			if it.ns != obj.GetNamespace() || it.name != obj.GetName() || it.uid != string(obj.GetUID()) || it.rv != obj.GetResourceVersion() {
				t.Errorf("identity %s/%s %s %s", it.ns, it.name, it.uid, it.rv)
			}
		})
	}
}

// What only the decoding path can do is left to it.
func TestReadRawItemRefuses(t *testing.T) {
	for name, c := range map[string]struct {
		item   string
		redact bool
	}{
		"a Secret to redact":    {`{"metadata":{"name":"s"},"data":{"k":"dg=="}}`, true},
		"another kind":          {`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`, false},
		"apiVersion alone":      {`{"apiVersion":"v1","metadata":{"name":"c"}}`, false},
		"no metadata":           {`{"spec":{}}`, false},
		"metadata not a object": {`{"metadata":"x"}`, false},
	} {
		if _, ok := readRawItem(c.item, "v1", "Pod", c.redact); ok {
			t.Errorf("%s: accepted", name)
		}
	}
}

func BenchmarkListItem(b *testing.B) {
	item := []byte(`{"metadata":{"name":"web-0","namespace":"shop","uid":"u1","resourceVersion":"42","creationTimestamp":"2026-11-30T09:00:00Z",` +
		`"labels":{"app.kubernetes.io/name":"web"},"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}","x":"y"},` +
		`"managedFields":[{"manager":"kubectl","operation":"Update","time":"2026-11-30T10:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{}}}}]},` +
		`"spec":{"containers":[{"name":"app","image":"nginx:1.27","ports":[{"containerPort":80}],"env":[{"name":"A","value":"1"},{"name":"B","value":"2"}]}]},` +
		`"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}`)
	b.Run("raw", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := readRawItem(string(item), "v1", "Pod", false); !ok {
				b.Fatal("refused")
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			obj := &unstructured.Unstructured{}
			if err := utiljson.Unmarshal(item, &obj.Object); err != nil {
				b.Fatal(err)
			}
			obj.SetAPIVersion("v1")
			obj.SetKind("Pod")
			_ = changedAt(obj)
			prune(obj, false)
			if _, err := json.Marshal(obj.Object); err != nil {
				b.Fatal(err)
			}
		}
	})
}
