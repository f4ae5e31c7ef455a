package collector

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/registry"
)

type recordingSink struct {
	mu     sync.Mutex
	events []*envelope.Event
}

func (r *recordingSink) Publish(_ context.Context, ev *envelope.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
	return nil
}

func (r *recordingSink) take() []*envelope.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}

func pod(ns, name, uid, rv string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{
			"namespace": ns, "name": name, "uid": uid, "resourceVersion": rv,
			"labels":        map[string]any{"app.kubernetes.io/name": "web"},
			"managedFields": []any{map[string]any{"manager": "kubectl"}},
		},
	}}
	return u
}

func newTestStore(s sink) *store {
	sc := scope{cluster: "member1", gvr: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, kind: "Pod"}
	tick := time.Unix(1_700_000_000, 0)
	ep := envelope.NewEpochs(func() time.Time { return tick }, nil)
	return newStore(context.Background(), sc, s, ep, newStatusEntry(registry.ResourceStatus{}, []string{"r"}))
}

type summary struct {
	Type  envelope.Type
	Key   string
	UID   string
	RV    string
	Epoch int64
}

func summarize(evs []*envelope.Event) []summary {
	out := make([]summary, len(evs))
	for i, e := range evs {
		k := e.Name
		if e.Namespace != "" && e.Type != envelope.Sync {
			k = e.Namespace + "/" + e.Name
		}
		rv := e.ResourceVersion
		if e.Type == envelope.Sync {
			rv = e.ListResourceVersion
		}
		out[i] = summary{e.Type, k, e.UID, rv, e.Epoch}
	}
	return out
}

// A list publishes ADDED for every object and closes with one SYNC counting them; a re-list publishes
// DELETED for the keys that vanished meanwhile and a SYNC with a newer epoch; watch events carry the
// epoch of the last completed list.
func TestStoreListWatchRelist(t *testing.T) {
	sink := &recordingSink{}
	s := newTestStore(sink)

	e1, _ := s.beginList()
	for _, p := range []*unstructured.Unstructured{pod("a", "web-1", "u1", "10"), pod("a", "web-2", "u2", "11")} {
		if err := s.listed(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Replace(nil, "12"); err != nil {
		t.Fatal(err)
	}
	got := summarize(sink.take())
	want := []summary{
		{envelope.Added, "a/web-1", "u1", "10", e1},
		{envelope.Added, "a/web-2", "u2", "11", e1},
		{envelope.Sync, "", "", "12", e1},
	}
	assertSummaries(t, "first list", got, want)

	if err := s.Update(pod("a", "web-1", "u1", "13")); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(pod("a", "web-3", "u3", "14")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(pod("a", "web-3", "u3", "15")); err != nil {
		t.Fatal(err)
	}
	assertSummaries(t, "watch", summarize(sink.take()), []summary{
		{envelope.Modified, "a/web-1", "u1", "13", e1},
		{envelope.Added, "a/web-3", "u3", "14", e1},
		{envelope.Deleted, "a/web-3", "u3", "15", e1},
	})

	// web-2 was deleted while nothing watched; web-4 appeared.
	e2, _ := s.beginList()
	if e2 <= e1 {
		t.Fatalf("epoch did not increase: %d then %d", e1, e2)
	}
	for _, p := range []*unstructured.Unstructured{pod("a", "web-1", "u1", "13"), pod("a", "web-4", "u4", "20")} {
		if err := s.listed(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Replace(nil, "21"); err != nil {
		t.Fatal(err)
	}
	evs := sink.take()
	assertSummaries(t, "re-list", summarize(evs), []summary{
		{envelope.Added, "a/web-1", "u1", "13", e2},
		{envelope.Added, "a/web-4", "u4", "20", e2},
		{envelope.Deleted, "a/web-2", "u2", "21", e2}, // at the list's resourceVersion: noticed then
		{envelope.Sync, "", "", "21", e2},
	})
	if c := evs[3].Count; c == nil || *c != 2 {
		t.Fatalf("SYNC count = %v, want 2", c)
	}
	if st := s.status.rows()[0]; st.State != registry.StateRunning || st.TotalNum != 2 || st.Epoch != e2 ||
		st.ResourceVersion != "21" || st.PublishedAt == nil {
		t.Fatalf("status after re-list = %+v, want Running, 2 objects, epoch %d, resourceVersion 21", st, e2)
	}
	if err := s.Update(pod("a", "web-4", "u4", "25")); err != nil {
		t.Fatal(err)
	}
	if st := s.status.rows()[0]; st.ResourceVersion != "25" || st.TotalNum != 2 {
		t.Fatalf("status after a watch event = %+v, want resourceVersion 25", st)
	}
}

// Objects leave the collector pruned: no managedFields, no last-applied annotation, Secret values blanked
// unless kept.
func TestStorePublishesPrunedObjects(t *testing.T) {
	sink := &recordingSink{}
	s := newTestStore(sink)
	s.beginList()
	p := pod("a", "web-1", "u1", "10")
	p.SetAnnotations(map[string]string{document.LastAppliedAnnotation: `{"huge":"copy"}`, "team": "x"})
	if err := s.listed(p); err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(sink.take()[0].Object, &obj); err != nil {
		t.Fatal(err)
	}
	meta := obj["metadata"].(map[string]any)
	if _, ok := meta["managedFields"]; ok {
		t.Error("managedFields published")
	}
	if ann := meta["annotations"].(map[string]any); len(ann) != 1 || ann["team"] != "x" {
		t.Errorf("annotations = %v, want only team=x", ann)
	}
}

func TestPruneSecrets(t *testing.T) {
	secret := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Secret",
			"metadata":   map[string]any{"name": "db", "namespace": "a"},
			"data":       map[string]any{"password": "c2VjcmV0", "tls.crt": "LS0t"},
			"stringData": map[string]any{"token": "plain"},
		}}
	}
	for _, tc := range []struct {
		name   string
		redact bool
		want   map[string]any
	}{
		{"redacted", true, map[string]any{"password": "", "tls.crt": ""}},
		{"kept", false, map[string]any{"password": "c2VjcmV0", "tls.crt": "LS0t"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := secret()
			prune(s, tc.redact)
			data, _, _ := unstructured.NestedMap(s.Object, "data")
			if len(data) != len(tc.want) {
				t.Fatalf("data = %v, want %v", data, tc.want)
			}
			for k, v := range tc.want {
				if data[k] != v {
					t.Errorf("data[%s] = %v, want %v", k, data[k], v)
				}
			}
			marked := s.GetAnnotations()[RedactedAnnotation] == "true"
			if marked != tc.redact {
				t.Errorf("annotation %s present = %v, want %v", RedactedAnnotation, marked, tc.redact)
			}
			if sd, _, _ := unstructured.NestedString(s.Object, "stringData", "token"); tc.redact && sd != "" {
				t.Errorf("stringData.token = %q, want redacted", sd)
			}
		})
	}
}

func assertSummaries(t *testing.T, what string, got, want []summary) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d events %+v, want %d %+v", what, len(got), got, len(want), want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: event %d = %+v, want %+v\nall: %+v", what, i, got[i], want[i], got)
		}
	}
}

// A re-list (after a restart or an expired watch) publishes every object again, but an unchanged
// object keeps its change time: its managedFields' latest time when this process never saw it
// change, the time a watch saw its last change when it did. Only a changed object is "changed since".
func TestStoreChangeTimesSurviveRelists(t *testing.T) {
	sink := &recordingSink{}
	s := newTestStore(sink)
	withManaged := func(p *unstructured.Unstructured, times ...string) *unstructured.Unstructured {
		var mf []any
		for _, ts := range times {
			mf = append(mf, map[string]any{"manager": "m", "operation": "Update", "time": ts})
		}
		p.Object["metadata"].(map[string]any)["managedFields"] = mf
		p.Object["metadata"].(map[string]any)["creationTimestamp"] = "2026-01-01T00:00:00Z"
		return p
	}
	list := func(objs ...*unstructured.Unstructured) map[string]time.Time {
		t.Helper()
		s.beginList()
		for _, p := range objs {
			if err := s.listed(p); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Replace(nil, "99"); err != nil {
			t.Fatal(err)
		}
		out := map[string]time.Time{}
		for _, e := range sink.take() {
			if e.Type == envelope.Added {
				out[e.Name] = e.ChangedAt
			}
		}
		return out
	}
	at := func(s string) time.Time { v, _ := time.Parse(time.RFC3339, s); return v }

	// A fresh process: the objects' own times (the latest entry); without any, the time it is seen.
	seen := time.Now()
	got := list(withManaged(pod("a", "web-1", "u1", "10"), "2026-03-01T10:00:00Z", "2026-05-01T10:00:00Z"),
		withManaged(pod("a", "web-2", "u2", "11"), "2026-02-01T10:00:00Z"), pod("a", "bare", "u3", "12"))
	if !got["web-1"].Equal(at("2026-05-01T10:00:00Z")) || !got["web-2"].Equal(at("2026-02-01T10:00:00Z")) || got["bare"].Before(seen.Truncate(time.Microsecond)) {
		t.Fatalf("first list change times: %v", got)
	}
	bareSeen := got["bare"]

	// web-2 changes under a watch; then everything is re-listed.
	before := time.Now()
	if err := s.Update(withManaged(pod("a", "web-2", "u2", "13"), "2026-02-01T10:00:00Z")); err != nil {
		t.Fatal(err)
	}
	watched := sink.take()[0].ChangedAt
	if watched.Before(before) {
		t.Fatalf("watch event change time %v is before the change was seen (%v)", watched, before)
	}
	got = list(withManaged(pod("a", "web-1", "u1", "10"), "2026-03-01T10:00:00Z", "2026-05-01T10:00:00Z"),
		withManaged(pod("a", "web-2", "u2", "13"), "2026-02-01T10:00:00Z"), pod("a", "bare", "u3", "12"))
	if !got["bare"].Equal(bareSeen) {
		t.Errorf("unchanged bare object re-listed with change time %v, want the first sighting's %v", got["bare"], bareSeen)
	}
	if !got["web-1"].Equal(at("2026-05-01T10:00:00Z")) {
		t.Errorf("unchanged web-1 re-listed with change time %v, want its own 2026-05-01T10:00:00Z", got["web-1"])
	}
	if !got["web-2"].Equal(watched.Truncate(time.Microsecond)) {
		t.Errorf("web-2 re-listed with change time %v, want the watch's %v", got["web-2"], watched)
	}
}
