package queryapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/registry"
)

// coreEvent is a stored core v1 Event of cluster about a Pod, every field set.
func coreEvent(cluster, name, pod string, rv int) string {
	return fmt.Sprintf(`{"apiVersion":"v1","kind":"Event","metadata":{"name":%[2]q,"namespace":"shop","uid":"ev-%[1]s-%[2]s","resourceVersion":"%[4]d","creationTimestamp":"2026-11-30T10:00:00Z","annotations":{"resource.karmada.io/cached-from-cluster":%[1]q}},`+
		`"involvedObject":{"kind":"Pod","namespace":"shop","name":%[3]q,"uid":"pod-uid","apiVersion":"v1","fieldPath":"spec.containers{app}"},`+
		`"reason":"BackOff","message":"Back-off restarting %[3]s in %[1]s","source":{"component":"kubelet","host":"node-1"},`+
		`"firstTimestamp":"2026-11-30T10:00:00Z","lastTimestamp":"2026-11-30T10:05:00Z","count":7,"type":"Warning",`+
		`"eventTime":"2026-11-30T10:00:00.123456Z","series":{"count":3,"lastObservedTime":"2026-11-30T10:04:00.000001Z"},`+
		`"action":"Restarting","related":{"kind":"Node","name":"node-1"},"reportingComponent":"kubelet","reportingInstance":"node-1"}`,
		cluster, name, pod, rv)
}

// TestEventConversion: the two groups' Events hold the same fields under kube-apiserver's mapping,
// and a round trip loses nothing.
func TestEventConversion(t *testing.T) {
	stored := []byte(coreEvent("member1", "ev-1", "web-0", 10))
	v1, err := coreEventAsEventsV1(stored)
	if err != nil {
		t.Fatal(err)
	}
	var got eventsv1.Event
	if err := json.Unmarshal(v1, &got); err != nil {
		t.Fatal(err)
	}
	var in corev1.Event
	if err := json.Unmarshal(stored, &in); err != nil {
		t.Fatal(err)
	}
	want := eventsv1.Event{
		TypeMeta:   metav1.TypeMeta{APIVersion: "events.k8s.io/v1", Kind: "Event"},
		ObjectMeta: in.ObjectMeta, Regarding: in.InvolvedObject, Related: in.Related, Note: in.Message,
		Reason: "BackOff", Type: "Warning", Action: "Restarting", EventTime: in.EventTime,
		Series:              &eventsv1.EventSeries{Count: 3, LastObservedTime: in.Series.LastObservedTime},
		ReportingController: "kubelet", ReportingInstance: "node-1",
		DeprecatedSource:         corev1.EventSource{Component: "kubelet", Host: "node-1"},
		DeprecatedFirstTimestamp: in.FirstTimestamp, DeprecatedLastTimestamp: in.LastTimestamp, DeprecatedCount: 7,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events.k8s.io form:\n%s\nwant fields of\n%+v", v1, want)
	}
	if gjson.GetBytes(v1, `metadata.annotations.resource\.karmada\.io/cached-from-cluster`).Str != "member1" {
		t.Errorf("the cache annotation is lost: %s", v1)
	}
	back, err := eventsV1AsCoreEvent(v1)
	if err != nil {
		t.Fatal(err)
	}
	var again corev1.Event
	if err := json.Unmarshal(back, &again); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again, in) {
		t.Errorf("round trip:\n%s\nwant\n%s", back, stored)
	}
}

func TestEventPathIn(t *testing.T) {
	for _, c := range []struct{ group, path, want string }{
		{"", "regarding.name", "involvedObject.name"},
		{"", "reportingController", "reportingComponent"},
		{"", "deprecatedSource.host", "source.host"},
		{"", "note", "message"},
		{"", "reason", "reason"},
		{"", "regardingx.name", "regardingx.name"},
		{eventsGroup, "involvedObject.kind", "regarding.kind"},
		{eventsGroup, "source.component", "deprecatedSource.component"},
		{eventsGroup, "count", "deprecatedCount"},
		{eventsGroup, "metadata.name", "metadata.name"},
	} {
		if got := eventPathIn(c.group, c.path); got != c.want {
			t.Errorf("eventPathIn(%q, %q) = %q, want %q", c.group, c.path, got, c.want)
		}
	}
}

// eventsFacade is a facade whose members collect Events in group (core or events.k8s.io), two
// Events each about web-0 and web-1 with the same names in both members.
func eventsFacade(t *testing.T, group string) (string, *Server) {
	t.Helper()
	st := &fakeStore{}
	for _, cl := range []string{"member1", "member2"} {
		for i, pod := range []string{"web-0", "web-1"} {
			body := coreEvent(cl, "ev-"+pod, pod, 100+i)
			if group == eventsGroup {
				b, err := coreEventAsEventsV1([]byte(body))
				if err != nil {
					t.Fatal(err)
				}
				body = string(b)
			}
			st.objects = append(st.objects, fakeObject{cluster: cl, group: group, resource: "events", namespace: "shop", name: "ev-" + pod, rv: int64(100 + i), body: body})
		}
	}
	u, s := newFacadeServerWithCache(t, st)
	for _, cl := range []string{"member1", "member2"} {
		s.catalog.apply("selection/"+cl+"/"+group+"/Event/", &registry.SelectionRecord{Cluster: cl, Group: group, Version: "v1",
			Resource: "events", Kind: "Event", Namespaced: true, Singular: "event", ShortNames: []string{"ev"}})
	}
	return u, s
}

// TestEventsServedInBothGroups: whichever group the members collect, both groups' discovery lists
// Events, and LIST, GET, field selectors (named as the group asked names them), the qualified view
// and Tables answer in the group asked, from the same documents.
func TestEventsServedInBothGroups(t *testing.T) {
	for _, collected := range []string{"", eventsGroup} {
		t.Run("collected in "+groupResource(apiResource{Group: collected, Resource: "events"}), func(t *testing.T) {
			u, _ := eventsFacade(t, collected)
			_, _, body := fetch(t, "GET", u+"/apis/events.k8s.io/v1", "")
			if gjson.GetBytes(body, `resources.#(name=="events").kind`).Str != "Event" {
				t.Errorf("/apis/events.k8s.io/v1: %s", body)
			}
			_, _, body = fetch(t, "GET", u+"/api/v1", "")
			if gjson.GetBytes(body, `resources.#(name=="events").kind`).Str != "Event" {
				t.Errorf("/api/v1: %s", body)
			}
			_, _, body = fetch(t, "GET", u+"/apis", aggregatedContentType)
			if !strings.Contains(string(body), `"events.k8s.io"`) {
				t.Errorf("aggregated /apis lacks events.k8s.io: %s", body)
			}
			for _, c := range []struct {
				path, name, ref string
			}{
				{"/api/v1/namespaces/shop/events", "involvedObject.name", "involvedObject.name"},
				{"/apis/events.k8s.io/v1/namespaces/shop/events", "regarding.name", "regarding.name"},
			} {
				wantAPI := "v1"
				if strings.HasPrefix(c.path, "/apis/") {
					wantAPI = "events.k8s.io/v1"
				}
				code, _, body := fetch(t, "GET", u+c.path+"?fieldSelector="+url.QueryEscape(c.name+"=web-1"), "")
				items := gjson.GetBytes(body, "items").Array()
				if code != 200 || gjson.GetBytes(body, "apiVersion").Str != wantAPI || len(items) != 2 {
					t.Fatalf("%s %s=web-1: %d %s", c.path, c.name, code, body)
				}
				for _, it := range items {
					if it.Get("apiVersion").Str != wantAPI || it.Get(c.ref).Str != "web-1" || it.Get("reason").Str != "BackOff" {
						t.Errorf("%s: item %s", c.path, it.Raw)
					}
				}
				// GET by a name both members have: 409; through one member's view: the object.
				code, _, body = fetch(t, "GET", u+"/clusters/member2"+c.path+"/ev-web-0", "")
				if code != 200 || gjson.GetBytes(body, "apiVersion").Str != wantAPI || gjson.GetBytes(body, c.ref).Str != "web-0" ||
					!strings.Contains(gjson.GetBytes(body, "note").Str+gjson.GetBytes(body, "message").Str, "in member2") {
					t.Errorf("GET %s/ev-web-0 of member2: %d %s", c.path, code, body)
				}
				// The qualified view renames the reference and finds it by its qualified name.
				code, _, body = fetch(t, "GET", u+"/qualified"+c.path+"?fieldSelector="+url.QueryEscape(c.name+"=web-1_member2"), "")
				items = gjson.GetBytes(body, "items").Array()
				if code != 200 || len(items) != 1 || items[0].Get(c.ref).Str != "web-1_member2" || items[0].Get("metadata.name").Str != "ev-web-1_member2" {
					t.Errorf("qualified %s %s=web-1_member2: %d %s", c.path, c.name, code, body)
				}
				// Tables of either group print the Event's columns.
				code, _, body = fetch(t, "GET", u+c.path, "application/json;as=Table;v=v1;g=meta.k8s.io")
				if code != 200 || gjson.GetBytes(body, "columnDefinitions.#.name").String() != `["Cluster","Last Seen","Type","Reason","Object","Subobject","Source","Message","First Seen","Count","Name"]` ||
					gjson.GetBytes(body, "rows.0.cells.4").Str != "pod/web-0" || gjson.GetBytes(body, "rows.0.cells.6").Str != "kubelet, node-1" {
					t.Errorf("Table of %s: %d %s", c.path, code, body)
				}
			}
			// kube-apiserver's labels of each group: reason, type, source (a core Event's
			// source.component), reportingController.
			for _, c := range []struct {
				path, selector string
				want           int
			}{
				{"/api/v1/events", "reason=BackOff,type=Warning", 4},
				{"/api/v1/events", "source=kubelet", 4},
				{"/api/v1/events", "source=nosuch", 0},
				{"/api/v1/events", "reportingComponent=kubelet,involvedObject.kind=Pod", 4},
				{"/apis/events.k8s.io/v1/events", "reportingController=kubelet,regarding.kind=Pod", 4},
				{"/apis/events.k8s.io/v1/events", "type!=Warning", 0},
			} {
				code, _, body := fetch(t, "GET", u+c.path+"?fieldSelector="+url.QueryEscape(c.selector), "")
				if n := len(gjson.GetBytes(body, "items").Array()); code != 200 || n != c.want {
					t.Errorf("%s?fieldSelector=%s: %d, %d items, want %d: %.300s", c.path, c.selector, code, n, c.want, body)
				}
			}
		})
	}
}

// TestEventsWatchedInTheOtherGroup: a watch of the group not collected gets the collected group's
// events, converted.
func TestEventsWatchedInTheOtherGroup(t *testing.T) {
	u, s := eventsFacade(t, "")
	ev := coreEvent("member1", "ev-new", "web-2", 600)
	cacheOf(s).Apply(&envelope.Event{V: envelope.Version, Type: envelope.Added, Cluster: "member1", Version: "v1", Resource: "events", Kind: "Event",
		Namespace: "shop", Name: "ev-new", UID: "ev-member1-ev-new", ResourceVersion: "600", Epoch: 1, Object: json.RawMessage(ev)})
	got := make(chan []string, 1)
	go func() {
		resp, err := http.Get(u + "/clusters/member1/apis/events.k8s.io/v1/namespaces/shop/events?watch=1&resourceVersion=599&fieldSelector=" + url.QueryEscape("regarding.name=web-2"))
		if err != nil {
			t.Error(err)
			got <- nil
			return
		}
		defer resp.Body.Close()
		var lines []string
		dec := json.NewDecoder(resp.Body)
		for len(lines) < 1 {
			var e struct {
				Type   string          `json:"type"`
				Object json.RawMessage `json:"object"`
			}
			if err := dec.Decode(&e); err != nil {
				t.Error(err)
				break
			}
			lines = append(lines, e.Type+" "+gjson.GetBytes(e.Object, "apiVersion").Str+" "+gjson.GetBytes(e.Object, "regarding.name").Str+" "+gjson.GetBytes(e.Object, "note").Str)
		}
		got <- lines
	}()
	select {
	case lines := <-got:
		if want := "ADDED events.k8s.io/v1 web-2 Back-off restarting web-2 in member1"; len(lines) != 1 || lines[0] != want {
			t.Errorf("watch saw %q, want %q", lines, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
}

// TestEventsScopeOfTheGroupAsked: a subject is judged for the group it asks for, as RBAC judges
// it: its grant of events.k8s.io reads the core documents served there, a grant of core Events
// alone reads nothing through events.k8s.io.
func TestEventsScopeOfTheGroupAsked(t *testing.T) {
	res := apiResource{Group: eventsGroup, Version: "v1", Resource: "events", Kind: "Event", Namespaced: true, from: &storedForm{version: "v1"}}
	q := &query.Query{Resources: []query.Resource{{Resource: "events", Group: eventsGroup}},
		Fields: []query.Requirement{{Key: "regarding.name", Op: query.Equals, Values: []string{"web-0"}}},
		Scope: &query.Scope{Grants: []query.Grant{
			{Namespaces: []string{"shop"}, Resources: []query.Resource{{Resource: "events", Group: eventsGroup}, {Resource: "pods"}}},
			{Namespaces: []string{"payments"}, Resources: []query.Resource{{Resource: "events"}}},
			{Namespaces: []string{"all"}},
		}}}
	res.storedQuery(q)
	if q.Resources[0] != (query.Resource{Resource: "events"}) || q.Fields[0].Key != "involvedObject.name" {
		t.Errorf("stored query: resources %v, fields %v", q.Resources, q.Fields)
	}
	for _, c := range []struct {
		ns   string
		want bool
	}{{"shop", true}, {"payments", false}, {"all", true}, {"other", false}} {
		if got := q.Scope.Allows("member1", c.ns, "", "events"); got != c.want {
			t.Errorf("core Event documents in %s visible: %v, want %v", c.ns, got, c.want)
		}
	}
	if !q.Scope.Allows("member1", "shop", "", "pods") {
		t.Error("the grant's other resources are lost")
	}
}
