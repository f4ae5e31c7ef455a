package queryapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/registry"
)

// referencesFleet is what kubectl describe and k9s follow in two members holding the same names:
// a Pod web-1 owned by ReplicaSet web-7d on node-1 claiming data, its Events (core and
// events.k8s.io), a kubelet Event of node-1 (its uid is the Node's name), the Nodes, a claim and
// its volume.
func referencesFleet() []fakeObject {
	obj := func(cl, group, resource, ns, name, body string) fakeObject {
		meta := fmt.Sprintf(`"metadata":{"name":%q,"namespace":%q,"uid":"uid-%s-%s","resourceVersion":"300","annotations":{"resource.karmada.io/cached-from-cluster":%q}}`,
			name, ns, cl, name, cl)
		if ns == "" {
			meta = strings.Replace(meta, `"namespace":"",`, "", 1)
		}
		return fakeObject{cluster: cl, group: group, resource: resource, namespace: ns, name: name, rv: 300,
			body: strings.Replace(body, `"metadata":{}`, meta, 1)}
	}
	var objs []fakeObject
	for _, cl := range []string{"member1", "member2"} {
		objs = append(objs,
			obj(cl, "", "pods", "shop", "web-1", `{"apiVersion":"v1","kind":"Pod","metadata":{},`+
				`"spec":{"nodeName":"node-1","serviceAccountName":"web","volumes":[{"name":"cfg","configMap":{"name":"web"}},{"name":"data","persistentVolumeClaim":{"claimName":"data"}}],"containers":[{"name":"app","image":"nginx"}]},`+
				`"status":{"phase":"Running"}}`),
			obj(cl, "", "events", "shop", "web-1.18f", `{"apiVersion":"v1","kind":"Event","metadata":{},`+
				`"involvedObject":{"kind":"Pod","namespace":"shop","name":"web-1","uid":"uid-`+cl+`-web-1"},"reason":"BackOff","type":"Warning"}`),
			obj(cl, "", "events", "default", "node-1.27a", `{"apiVersion":"v1","kind":"Event","metadata":{},`+
				`"involvedObject":{"kind":"Node","name":"node-1","uid":"node-1"},"reason":"NodeReady","type":"Normal"}`),
			obj(cl, "events.k8s.io", "events", "shop", "web-1.3c1", `{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{},`+
				`"regarding":{"kind":"Pod","namespace":"shop","name":"web-1"},"related":{"kind":"Node","name":"node-1"},"reason":"Scheduled"}`),
			obj(cl, "", "nodes", "", "node-1", `{"apiVersion":"v1","kind":"Node","metadata":{}}`),
			obj(cl, "", "persistentvolumeclaims", "shop", "data", `{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{},"spec":{"volumeName":"pv-1","storageClassName":"standard"}}`),
			obj(cl, "", "persistentvolumes", "", "pv-1", `{"apiVersion":"v1","kind":"PersistentVolume","metadata":{},"spec":{"claimRef":{"kind":"PersistentVolumeClaim","namespace":"shop","name":"data"}}}`),
		)
	}
	// The Pod's owner, in member1 only.
	objs[0].body = strings.Replace(objs[0].body, `"resourceVersion":"300"`,
		`"resourceVersion":"300","ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-7d","uid":"uid-rs","controller":true}]`, 1)
	return objs
}

func newReferencesServer(t *testing.T) (string, *Server) {
	t.Helper()
	srvURL, s := newFacadeServerWithCache(t, &fakeStore{objects: referencesFleet()})
	for _, cl := range []string{"member1", "member2"} {
		for _, r := range []registry.SelectionRecord{
			{Version: "v1", Resource: "events", Kind: "Event", Namespaced: true, Singular: "event", ShortNames: []string{"ev"}},
			{Group: "events.k8s.io", Version: "v1", Resource: "events", Kind: "Event", Namespaced: true, Singular: "event", ShortNames: []string{"ev"}},
			{Version: "v1", Resource: "persistentvolumeclaims", Kind: "PersistentVolumeClaim", Namespaced: true, Singular: "persistentvolumeclaim"},
			{Version: "v1", Resource: "persistentvolumes", Kind: "PersistentVolume", Singular: "persistentvolume"},
		} {
			r.Cluster = cl
			s.catalog.apply("selection/"+cl+"/"+r.Group+"/"+r.Kind+"/", &r)
		}
	}
	return srvURL, s
}

// TestQualifiedViewRenamesReferences: in the qualified view, what an object says of another
// object of its member names it as the view does, and nothing else is renamed.
func TestQualifiedViewRenamesReferences(t *testing.T) {
	srvURL, _ := newReferencesServer(t)
	for _, tc := range []struct {
		path string
		want map[string]string // gjson path → value
	}{
		{"/qualified/api/v1/namespaces/shop/pods/web-1_member1", map[string]string{
			"metadata.name":                                  "web-1_member1",
			"metadata.namespace":                             "shop",
			"metadata.ownerReferences.0.name":                "web-7d_member1",
			"metadata.ownerReferences.0.kind":                "ReplicaSet",
			"metadata.ownerReferences.0.uid":                 "uid-rs",
			"spec.nodeName":                                  "node-1_member1",
			"spec.volumes.1.persistentVolumeClaim.claimName": "data_member1",
			"spec.volumes.0.configMap.name":                  "web", // not followed by name: kept
			"spec.serviceAccountName":                        "web", // an identity too: kept
		}},
		{"/qualified/api/v1/namespaces/shop/events/web-1.18f_member2", map[string]string{
			"involvedObject.name":      "web-1_member2",
			"involvedObject.namespace": "shop",
			"involvedObject.uid":       "uid-member2-web-1",
		}},
		{"/qualified/api/v1/namespaces/default/events/node-1.27a_member1", map[string]string{
			"involvedObject.name": "node-1_member1",
			"involvedObject.uid":  "node-1_member1", // kubelet's uid is the Node's name
		}},
		{"/qualified/apis/events.k8s.io/v1/namespaces/shop/events/web-1.3c1_member1", map[string]string{
			"regarding.name":      "web-1_member1",
			"regarding.namespace": "shop",
			"related.name":        "node-1_member1",
		}},
		{"/qualified/api/v1/namespaces/shop/persistentvolumeclaims/data_member2", map[string]string{
			"spec.volumeName":       "pv-1_member2",
			"spec.storageClassName": "standard",
		}},
		{"/qualified/api/v1/persistentvolumes/pv-1_member1", map[string]string{
			"spec.claimRef.name":      "data_member1",
			"spec.claimRef.namespace": "shop",
		}},
		// The other views show references as stored.
		{"/clusters/member1/api/v1/namespaces/shop/pods/web-1", map[string]string{
			"metadata.ownerReferences.0.name": "web-7d", "spec.nodeName": "node-1"}},
		{"/api/v1/namespaces/default/events/node-1.27a", nil}, // in two clusters: 409
	} {
		code, _, body := fetch(t, "GET", srvURL+tc.path, "")
		if tc.want == nil {
			if code != http.StatusConflict {
				t.Errorf("GET %s: %d, want 409", tc.path, code)
			}
			continue
		}
		if code != http.StatusOK {
			t.Errorf("GET %s: %d %s", tc.path, code, body)
			continue
		}
		for path, want := range tc.want {
			if got := gjson.GetBytes(body, path).Str; got != want {
				t.Errorf("GET %s: %s = %q, want %q", tc.path, path, got, want)
			}
		}
	}
	// A list renders every item alike, and so does a Table's object.
	code, _, body := fetch(t, "GET", srvURL+"/qualified/api/v1/pods", "")
	if got := gjson.GetBytes(body, "items.#.spec.nodeName").String(); code != 200 || got != `["node-1_member1","node-1_member2"]` {
		t.Errorf("qualified pod list: %d, nodes %s", code, got)
	}
}

// TestQualifiedViewTranslatesFieldSelectors: the field selectors kubectl describe sends with the
// names it read from the qualified view find what they find in the member.
func TestQualifiedViewTranslatesFieldSelectors(t *testing.T) {
	srvURL, _ := newReferencesServer(t)
	for _, tc := range []struct {
		name, path, selector string
		want                 []string // names of the items, in order
	}{
		// kubectl describe pod web-1_member1 -n shop
		{"pod's events", "/qualified/api/v1/namespaces/shop/events",
			"involvedObject.name=web-1_member1,involvedObject.namespace=shop,involvedObject.uid=uid-member1-web-1",
			[]string{"web-1.18f_member1"}},
		// kubectl describe node node-1_member2: its non-terminated Pods, its Events by uid and by name.
		{"node's pods", "/qualified/api/v1/pods", "spec.nodeName=node-1_member2,status.phase!=Succeeded,status.phase!=Failed",
			[]string{"web-1_member2"}},
		{"node's events by name as uid", "/qualified/api/v1/events",
			"involvedObject.kind=Node,involvedObject.name=node-1_member2,involvedObject.namespace=,involvedObject.uid=node-1_member2",
			[]string{"node-1.27a_member2"}},
		{"node's events by uid", "/qualified/api/v1/events",
			"involvedObject.kind=Node,involvedObject.name=node-1_member2,involvedObject.namespace=,involvedObject.uid=uid-member2-node-1",
			nil},
		{"events.k8s.io regarding", "/qualified/apis/events.k8s.io/v1/events", "regarding.name=web-1_member2", []string{"web-1.3c1_member2"}},
		{"owner", "/qualified/api/v1/pods", "metadata.ownerReferences.name=web-7d_member1", []string{"web-1_member1"}},
		{"claim", "/qualified/api/v1/pods", "spec.volumes.persistentVolumeClaim.claimName=data_member2", []string{"web-1_member2"}},
		{"volume", "/qualified/api/v1/persistentvolumeclaims", "spec.volumeName=pv-1_member1", []string{"data_member1"}},
		{"name", "/qualified/api/v1/pods", "metadata.name=web-1_member2", []string{"web-1_member2"}},
		// A name without its cluster is no name of the view.
		{"unqualified node", "/qualified/api/v1/pods", "spec.nodeName=node-1", nil},
		{"unknown cluster", "/qualified/api/v1/pods", "spec.nodeName=node-1_member9", nil},
		{"unqualified involved object", "/qualified/api/v1/events", "involvedObject.name=web-1", nil},
		{"two clusters", "/qualified/api/v1/pods", "spec.nodeName=node-1_member1,metadata.name=web-1_member2", nil},
		{"not an unqualified node", "/qualified/api/v1/pods", "spec.nodeName!=node-1", []string{"web-1_member1", "web-1_member2"}},
		{"unscheduled", "/qualified/api/v1/pods", "spec.nodeName=", nil},
		{"other fields untouched", "/qualified/api/v1/pods", "spec.serviceAccountName=web", []string{"web-1_member1", "web-1_member2"}},
		// The fleet view's selectors are the stored names.
		{"fleet", "/api/v1/pods", "spec.nodeName=node-1", []string{"web-1", "web-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, body := fetch(t, "GET", srvURL+tc.path+"?fieldSelector="+url.QueryEscape(tc.selector), "")
			if code != http.StatusOK {
				t.Fatalf("%d %s", code, body)
			}
			var got []string
			for _, n := range gjson.GetBytes(body, "items.#.metadata.name").Array() {
				got = append(got, n.Str)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("fieldSelector=%s: %q, want %q", tc.selector, got, tc.want)
			}
		})
	}
}

// TestQualifiedWatchTranslatesFieldSelectors: a watch on a reference (kubectl describe does not
// watch, informers with a field selector do) gets the events of that object in its member only,
// renamed.
func TestQualifiedWatchTranslatesFieldSelectors(t *testing.T) {
	srvURL, s := newReferencesServer(t)
	resp, err := http.Get(srvURL + "/qualified/api/v1/namespaces/shop/events?watch=1&sendInitialEvents=false&timeoutSeconds=20&fieldSelector=" +
		url.QueryEscape("involvedObject.name=web-1_member1"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch: %d", resp.StatusCode)
	}
	for i, cl := range []string{"member2", "member1"} {
		obj := fmt.Sprintf(`{"apiVersion":"v1","kind":"Event","metadata":{"name":"web-1.%d","namespace":"shop","uid":"uid-ev-%s","resourceVersion":"%d","annotations":{"resource.karmada.io/cached-from-cluster":%q}},"involvedObject":{"kind":"Pod","namespace":"shop","name":"web-1"},"reason":"BackOff"}`,
			i, cl, 400+i, cl)
		cacheOf(s).Apply(&envelope.Event{V: envelope.Version, Type: envelope.Added, Cluster: cl, Version: "v1", Resource: "events", Kind: "Event",
			Namespace: "shop", Name: fmt.Sprintf("web-1.%d", i), UID: "uid-ev-" + cl, ResourceVersion: fmt.Sprint(400 + i), Epoch: 1, Object: json.RawMessage(obj)})
	}
	var ev struct {
		Type   string
		Object json.RawMessage
	}
	if err := json.NewDecoder(resp.Body).Decode(&ev); err != nil {
		t.Fatal(err)
	}
	if name, involved := gjson.GetBytes(ev.Object, "metadata.name").Str, gjson.GetBytes(ev.Object, "involvedObject.name").Str; ev.Type != "ADDED" ||
		name != "web-1.1_member1" || involved != "web-1_member1" {
		t.Errorf("first event: %s %s about %s; want ADDED web-1.1_member1 about web-1_member1", ev.Type, name, involved)
	}
}
