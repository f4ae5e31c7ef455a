package queryapi

import (
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// testdata/openapi holds kube-apiserver v1.37.2's OpenAPI v3 documents (api/openapi-spec/v3 of
// k8s.io/kubernetes) trimmed to the schemas of Pod, Event and Node (api/v1) and of Event
// (events.k8s.io/v1), descriptions and validation dropped: what field paths need of them.
func readOpenAPI(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/openapi/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSchemaPaths(t *testing.T) {
	idx := newSchemaIndex(readOpenAPI(t, "api_v1.json"))
	pod := idx.kind(schema.GroupVersionKind{Version: "v1", Kind: "Pod"})
	event := idx.kind(schema.GroupVersionKind{Version: "v1", Kind: "Event"})
	if pod == nil || event == nil {
		t.Fatal("no Pod or Event in the document")
	}
	for _, c := range []struct {
		kind *schemaNode
		path string
		want bool
	}{
		{pod, "spec.nodeName", true},
		{pod, "status.phase", true},
		{pod, "metadata.name", true},
		{pod, "spec.containers.image", true},                  // through an array
		{pod, "metadata.labels.app.kubernetes.io/name", true}, // a map key with dots
		{pod, "metadata.annotations.resource.karmada.io/cached-from-cluster", true},
		{pod, "spec.containers.resources.limits.nvidia.com/gpu", true}, // a map of Quantities
		{pod, "spec.volumes.persistentVolumeClaim.claimName", true},
		{pod, "metadata.ownerReferences.name", true},
		{pod, "spec.nodNames", false}, // the typo
		{pod, "spec.containers.imagex", false},
		{pod, "status.phase.x", false},                        // below a string
		{pod, "spec.containers.ports.containerPort.x", false}, // below an integer
		{pod, "spec.containers.resources.limits.cpu.x", true}, // a map's key may hold dots
		{pod, "spec", true},
		{event, "involvedObject.name", true},
		{event, "source.component", true},
		{event, "regarding.name", false},
		{event, "series.lastObservedTime", true},
	} {
		if got := c.kind.has(c.path); got != c.want {
			t.Errorf("has(%q) = %v, want %v", c.path, got, c.want)
		}
	}
	if newSchemaIndex([]byte("not json")) != nil {
		t.Error("a document that is not JSON gives an index")
	}
}

// A CRD's schema: fields it keeps unknown take any path; a recursive schema is walked.
func TestSchemaPathsOfACustomResource(t *testing.T) {
	doc := `{"components":{"schemas":{
	  "com.example.v1.Widget":{"type":"object","x-kubernetes-group-version-kind":[{"group":"example.com","version":"v1","kind":"Widget"}],
	    "properties":{"metadata":{"allOf":[{"$ref":"#/components/schemas/meta"}]},
	      "spec":{"type":"object","properties":{"size":{"type":"string"},"extra":{"type":"object","x-kubernetes-preserve-unknown-fields":true},
	        "tree":{"$ref":"#/components/schemas/node"},"port":{"x-kubernetes-int-or-string":true}}}}},
	  "meta":{"type":"object","properties":{"name":{"type":"string"},"labels":{"type":"object","additionalProperties":{"type":"string"}}}},
	  "node":{"type":"object","properties":{"value":{"type":"string"},"children":{"type":"array","items":{"$ref":"#/components/schemas/node"}}}},
	  "com.example.v1.Gadget":{"type":"object","x-kubernetes-preserve-unknown-fields":true,"x-kubernetes-group-version-kind":[{"group":"example.com","version":"v1","kind":"Gadget"}]}
	}}}`
	idx := newSchemaIndex([]byte(doc))
	w := idx.kind(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"})
	for path, want := range map[string]bool{
		"spec.size": true, "spec.sizes": false, "spec.extra.anything.at.all": true, "spec.tree.children.children.value": true,
		"spec.tree.children.valu": false, "metadata.labels.a.b/c": true, "spec.port": true, "spec.port.x": false,
	} {
		if got := w.has(path); got != want {
			t.Errorf("Widget has(%q) = %v, want %v", path, got, want)
		}
	}
	if g := idx.kind(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Gadget"}); !g.has("spec.whatever") {
		t.Error("a schema keeping unknown fields refuses a path")
	}
}

// TestFieldSelectorsAsTheMembersAccept: a field selector on a path the kind does not have is a 400
// naming it, as kube-apiserver answers "field label not supported", in the facade (each group of
// Events by its own names) and in the REST search; kube-apiserver's labels and any path of the
// kind's schema are accepted; a kind of which no member relayed a schema accepts any path.
func TestFieldSelectorsAsTheMembersAccept(t *testing.T) {
	u, s := eventsFacade(t, "")
	for _, cl := range []string{"member1", "member2"} {
		s.catalog.applyOpenAPI(cl, "api/v1", "hash-v1", readOpenAPI(t, "api_v1.json"))
		s.catalog.applyOpenAPI(cl, "apis/events.k8s.io/v1", "hash-events", readOpenAPI(t, "apis_events.k8s.io_v1.json"))
	}
	for _, c := range []struct {
		path, selector string
		bad            string // the label named in the 400, "" for a 200
	}{
		{"/api/v1/pods", "spec.nodNames=x", "spec.nodNames"},
		{"/api/v1/pods", "spec.nodeName=x,status.phase!=Running", ""},
		{"/api/v1/pods", "spec.containers.image=nginx:1.27", ""},
		{"/api/v1/pods", "metadata.labels.app.kubernetes.io/name=web", ""},
		{"/api/v1/pods", "status.phase=Running,spec.containers.imag=x", "spec.containers.imag"},
		{"/clusters/member1/api/v1/namespaces/shop/pods", "spec.nodNames=x", "spec.nodNames"},
		{"/qualified/api/v1/pods", "spec.nodNames=x", "spec.nodNames"},
		{"/api/v1/events", "involvedObject.name=web-0,source=kubelet,reportingComponent=kubelet", ""},
		{"/api/v1/events", "regarding.name=web-0", "regarding.name"},
		{"/apis/events.k8s.io/v1/events", "regarding.name=web-0,reportingController=kubelet,deprecatedSource.host=node-1", ""},
		{"/apis/events.k8s.io/v1/events", "involvedObject.name=web-0", "involvedObject.name"},
		{"/api/v1/namespaces/shop/configmaps", "data.nosuch=x", ""}, // no schema relayed
		{"/api/v1/pods?watch=1&timeoutSeconds=1", "spec.nodNames=x", "spec.nodNames"},
	} {
		sep := "?"
		if strings.Contains(c.path, "?") {
			sep = "&"
		}
		code, _, body := fetch(t, "GET", u+c.path+sep+"fieldSelector="+url.QueryEscape(c.selector), "")
		msg := gjson.GetBytes(body, "message").Str
		switch {
		case c.bad == "" && code != 200:
			t.Errorf("%s %s: %d %s", c.path, c.selector, code, body)
		case c.bad != "" && (code != 400 || !strings.Contains(msg, "field label not supported: "+c.bad) || gjson.GetBytes(body, "kind").Str != "Status" ||
			gjson.GetBytes(body, "details.causes.0.field").Str != "fieldSelector"):
			t.Errorf("%s %s: %d %s, want a 400 naming %s", c.path, c.selector, code, body, c.bad)
		}
	}
	for _, c := range []struct {
		params string
		bad    string
	}{
		{"resources=pods&fieldSelector=spec.nodNames%3Dx", "spec.nodNames"},
		{"resources=pods.core&fieldSelector=spec.nodeName%3Dx", ""},
		{"resources=pods,events&fieldSelector=spec.nodNames%3Dx", "spec.nodNames"},
		{"resources=pods,events&fieldSelector=involvedObject.name%3Dx", ""},     // a path of one of the kinds
		{"fieldSelector=spec.nodNames%3Dx", ""},                                 // every kind: configmaps have no schema here
		{"resources=pods,configmaps&fieldSelector=spec.nodNames%3Dx", ""},       // configmaps: no schema
		{"resources=events&fieldSelector=regarding.name%3Dx", "regarding.name"}, // stored in the core group
	} {
		code, _, body := fetch(t, "GET", u+"/v1alpha1/search?"+c.params, "")
		msg := gjson.GetBytes(body, "message").Str
		switch {
		case c.bad == "" && code != 200:
			t.Errorf("search %s: %d %s", c.params, code, body)
		case c.bad != "" && (code != 400 || !strings.Contains(msg, "field label not supported: "+c.bad)):
			t.Errorf("search %s: %d %s, want a 400 naming %s", c.params, code, body, c.bad)
		}
	}
}
