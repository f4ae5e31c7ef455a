package collector

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubesearch/kubesearch/internal/registry"
)

func storedRegistry(name string, generation int64, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": registry.StoreGroup + "/" + registry.StoreVersion, "kind": "ResourceRegistry",
		"metadata": map[string]any{"name": name, "uid": "uid-" + name, "generation": generation,
			"creationTimestamp": "2026-12-01T00:00:00Z"},
		"spec": spec,
	}}
}

func selectors(kinds ...string) map[string]any {
	var sels []any
	for _, k := range kinds {
		sels = append(sels, map[string]any{"apiVersion": "v1", "kind": k})
	}
	return map[string]any{"targetCluster": map[string]any{}, "resourceSelectors": sels}
}

func newFakeRegistries(objs ...*unstructured.Unstructured) (*karmadaRegistries, *dynamicfake.FakeDynamicClient) {
	ro := make([]runtime.Object, len(objs))
	for i, o := range objs {
		ro[i] = o
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{registryObjects: "ResourceRegistryList"}, ro...)
	return &karmadaRegistries{source: "karmada.kubeconfig", client: dyn.Resource(registryObjects), log: slog.New(slog.DiscardHandler)}, dyn
}

// conditionsOf decodes an object's status conditions (each as the control plane would store it).
func conditionsOf(t *testing.T, obj *unstructured.Unstructured) []metav1.Condition {
	t.Helper()
	raw, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	data, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	var out []metav1.Condition
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("conditions %s: %v", data, err)
	}
	return out
}

// TestWithAcceptedLeavesOthersAlone: a condition of another writer that metav1.Condition would not
// decode passes as it is, and ours is set beside it; written again only when it changes, its
// transition time kept while its status holds.
func TestWithAcceptedLeavesOthersAlone(t *testing.T) {
	foreign := map[string]any{"type": "Synced", "status": "True", "lastTransitionTime": "2026-12-01t00:00:00z", "reason": "x", "message": ""}
	want := metav1.Condition{Type: ConditionAccepted, Status: metav1.ConditionTrue, Reason: "Accepted", Message: "selects 1", ObservedGeneration: 2}
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	conds, changed := withAccepted([]any{foreign}, want, t0)
	if !changed || len(conds) != 2 || !reflect.DeepEqual(conds[0], foreign) {
		t.Fatalf("first write: %v %v", changed, conds)
	}
	// Read back as the API server stores it: observedGeneration a JSON number.
	data, _ := json.Marshal(conds)
	var stored []any
	_ = json.Unmarshal(data, &stored)
	if _, changed := withAccepted(stored, want, t0.Add(time.Hour)); changed {
		t.Error("the same condition written again")
	}
	want.Message = "selects 2"
	conds, changed = withAccepted(stored, want, t0.Add(time.Hour))
	if !changed || conds[1].(map[string]any)["lastTransitionTime"] != "2026-12-03T10:00:00Z" {
		t.Errorf("a new message: %v, transition time %v (the status held)", changed, conds[1])
	}
	want.Status = metav1.ConditionFalse
	conds, _ = withAccepted(stored, want, t0.Add(time.Hour))
	if conds[1].(map[string]any)["lastTransitionTime"] != "2026-12-03T11:00:00Z" {
		t.Errorf("a flip kept the transition time: %v", conds[1])
	}
}

// reportAgain reads the objects as they are now and reports verdicts on them, returning the
// statuses that were written.
func reportAgain(t *testing.T, k *karmadaRegistries, dyn *dynamicfake.FakeDynamicClient, verdicts map[string]verdict) map[string]metav1.Condition {
	t.Helper()
	dyn.ClearActions()
	objs, err := k.read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	k.report(t.Context(), objs, verdicts)
	return statusWrites(t, dyn)
}

func statusWrites(t *testing.T, dyn *dynamicfake.FakeDynamicClient) map[string]metav1.Condition {
	out := map[string]metav1.Condition{}
	for _, a := range dyn.Actions() {
		u, ok := a.(k8stesting.UpdateAction)
		if !ok || a.GetSubresource() != "status" {
			continue
		}
		obj := u.GetObject().(*unstructured.Unstructured)
		if c := meta.FindStatusCondition(conditionsOf(t, obj), ConditionAccepted); c != nil {
			out[obj.GetName()] = *c
		}
	}
	return out
}

// TestKarmadaRegistriesStatus: each object's verdict is written into its status once — accepted with
// the members it selects, rejected with the field at fault, undecodable with the unknown field — and
// not again while it holds; an object edited since the plan waits for the next plan.
func TestKarmadaRegistriesStatus(t *testing.T) {
	undecodable := storedRegistry("typo", 1, selectors("Pod"))
	undecodable.Object["spec"].(map[string]any)["resourceSelector"] = []any{}
	k, dyn := newFakeRegistries(
		storedRegistry("pods", 2, selectors("Pod")),
		storedRegistry("no-kind", 1, selectors("")),
		undecodable,
	)
	ctx := context.Background()
	objs, err := k.read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	clusters := []registry.Cluster{kubeconfigClusterFor("member1"), kubeconfigClusterFor("member2")}
	admitted, verdicts := admitObjects(nil, objs, clusters, nil)
	if len(admitted) != 1 || admitted[0].Name != "pods" {
		t.Fatalf("admitted %v, want pods only", admitted)
	}
	plan, err := registry.NewPlan(admitted, clusters)
	if err != nil {
		t.Fatal(err)
	}
	describeAdmitted(verdicts, plan)
	k.report(ctx, objs, verdicts)

	got := statusWrites(t, dyn)
	for name, want := range map[string]struct {
		status     metav1.ConditionStatus
		generation int64
		message    string
	}{
		"pods":    {metav1.ConditionTrue, 2, "selects resources of 2 member clusters: member1, member2"},
		"no-kind": {metav1.ConditionFalse, 1, "not collected: spec.resourceSelectors[0].kind: Required value"},
		"typo":    {metav1.ConditionFalse, 1, `not collected: ResourceRegistry typo: unknown field "spec.resourceSelector"`},
	} {
		c, ok := got[name]
		if !ok {
			t.Errorf("%s: no status written", name)
			continue
		}
		if c.Status != want.status || c.ObservedGeneration != want.generation || !strings.Contains(c.Message, want.message) || c.LastTransitionTime.IsZero() {
			t.Errorf("%s: condition %+v, want status %s, generation %d, a transition time and a message containing %q", name, c, want.status, want.generation, want.message)
		}
	}

	// Written already: nothing to write again.
	if w := reportAgain(t, k, dyn, verdicts); len(w) != 0 {
		t.Errorf("wrote statuses again although they hold: %v", w)
	}

	// Edited since the plan (a new generation): its verdict is not for it.
	edited := storedRegistry("pods", 3, selectors("ConfigMap"))
	if _, err := dyn.Resource(registryObjects).Update(ctx, edited, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if w := reportAgain(t, k, dyn, verdicts); len(w) != 0 {
		t.Errorf("wrote the last plan's verdict over a newer generation: %v", w)
	}
}

// TestKarmadaRegistriesInvalidEdit: an edit that makes an admitted object invalid keeps its earlier
// generation collected, as an invalid edit of a file keeps the file's last valid content, and the
// status says both; once the object is valid again, its new generation is in.
func TestKarmadaRegistriesInvalidEdit(t *testing.T) {
	clusters := []registry.Cluster{kubeconfigClusterFor("member1")}
	read := func(objs ...*unstructured.Unstructured) []registryObject {
		k, _ := newFakeRegistries(objs...)
		out, err := k.read(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	_, first := admitObjects(nil, read(storedRegistry("pods", 1, selectors("Pod"))), clusters, nil)

	admitted, verdicts := admitObjects(nil, read(storedRegistry("pods", 2, selectors(""))), clusters, remember(first))
	if len(admitted) != 1 || admitted[0].Generation != 1 || admitted[0].Spec.ResourceSelectors[0].Kind != "Pod" {
		t.Fatalf("admitted %+v, want generation 1 still", admitted)
	}
	c := verdicts["pods"].condition
	if c.Status != metav1.ConditionFalse || c.ObservedGeneration != 2 ||
		!strings.Contains(c.Message, "generation 2 not collected: spec.resourceSelectors[0].kind: Required value") ||
		!strings.Contains(c.Message, "generation 1, admitted before, is collected still") {
		t.Errorf("condition %+v", c)
	}

	// Still invalid at the next check: generation 1 stays (remember keeps what is in effect).
	admitted, _ = admitObjects(nil, read(storedRegistry("pods", 2, selectors(""))), clusters, remember(verdicts))
	if len(admitted) != 1 || admitted[0].Generation != 1 {
		t.Errorf("second check admitted %+v, want generation 1 still", admitted)
	}

	// Fixed: the new generation.
	admitted, verdicts = admitObjects(nil, read(storedRegistry("pods", 3, selectors("ConfigMap"))), clusters, remember(verdicts))
	if len(admitted) != 1 || admitted[0].Generation != 3 || verdicts["pods"].condition.Status != metav1.ConditionTrue {
		t.Errorf("after the fix: admitted %+v, verdict %+v", admitted, verdicts["pods"])
	}

	// Without a memory (a restart), the invalid object is not collected.
	admitted, _ = admitObjects(nil, read(storedRegistry("pods", 2, selectors(""))), clusters, nil)
	if len(admitted) != 0 {
		t.Errorf("without an earlier generation: admitted %+v", admitted)
	}
}

// TestKarmadaRegistriesWatch: a change of any object is a signal to check now.
func TestKarmadaRegistriesWatch(t *testing.T) {
	k, dyn := newFakeRegistries(storedRegistry("pods", 1, selectors("Pod")))
	ctx, cancel := context.WithCancel(context.Background())
	changed := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		k.watch(ctx, changed)
	}()
	defer func() {
		cancel()
		<-done
	}()
	// The fake records the watch before it opens it, so an object created just after may go unseen:
	// create one every 100 ms until a signal comes.
	deadline := time.After(10 * time.Second)
	for i := 0; ; i++ {
		if _, err := dyn.Resource(registryObjects).Create(ctx, storedRegistry(fmt.Sprintf("configmaps-%d", i), 1, selectors("ConfigMap")), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-changed:
			return
		case <-deadline:
			t.Fatal("no signal after objects were created")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func kubeconfigClusterFor(name string) registry.Cluster {
	return registry.Cluster{Name: name, Kubeconfig: "/etc/kubesearch/kubeconfig", Context: name}
}

func TestOptionsKarmadaRegistries(t *testing.T) {
	for _, tt := range []struct {
		name     string
		o        Options
		wantErrs []string
	}{
		{name: "objects without files", o: Options{KarmadaKubeconfig: "k", KarmadaRegistries: true}},
		{name: "objects and files", o: Options{KarmadaKubeconfig: "k", KarmadaRegistries: true, Registry: "r"}},
		{name: "neither", o: Options{KarmadaKubeconfig: "k"}, wantErrs: []string{"--registry: required (or --karmada-registries)"}},
		{name: "objects without a control plane", o: Options{ClustersFile: "c", KarmadaRegistries: true},
			wantErrs: []string{"--karmada-registries: needs --karmada-kubeconfig"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.o
			o.Brokers = []string{"b"}
			o.SetDefaults()
			err := o.Validate()
			if len(tt.wantErrs) == 0 && err != nil {
				t.Errorf("Validate() = %v, want nil", err)
			}
			for _, want := range tt.wantErrs {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("Validate() = %v, want %q", err, want)
				}
			}
		})
	}
}

// TestKarmadaRegistriesLongMessageRoundTrips: a refusal's message is bounded to what a Condition
// holds at a character's boundary, so that the status written is the status read back. A message
// cut inside a character is stored with U+FFFD in its place (the control plane's JSON), differs from
// the verdict at every check, and is written again and again: each write a watch event, each event
// another check, with no end.
func TestKarmadaRegistriesLongMessageRoundTrips(t *testing.T) {
	for _, prefix := range []string{"", "x", "xy"} {
		kind := prefix + strings.Repeat("é", 20000) // echoed in the refusal: more than 32 KiB
		k, dyn := newFakeRegistries(storedRegistry("long", 1, selectors(kind)))
		ctx := context.Background()
		objs, err := k.read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, verdicts := admitObjects(nil, objs, []registry.Cluster{kubeconfigClusterFor("member1")}, nil)
		msg := verdicts["long"].condition.Message
		if !utf8.ValidString(msg) || len(msg) > 32<<10 {
			t.Errorf("prefix %q: message of %d bytes, valid UTF-8 %v: want valid, at most 32 KiB", prefix, len(msg), utf8.ValidString(msg))
		}
		k.report(ctx, objs, verdicts)
		// The control plane stores the status as JSON and answers it so.
		stored, err := dyn.Resource(registryObjects).Get(ctx, "long", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		data, err := stored.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		back := &unstructured.Unstructured{}
		if err := back.UnmarshalJSON(data); err != nil {
			t.Fatal(err)
		}
		if _, err := dyn.Resource(registryObjects).Update(ctx, back, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if w := reportAgain(t, k, dyn, verdicts); len(w) != 0 {
			t.Errorf("prefix %q: the status read back differs from the verdict: written again", prefix)
		}
	}
}

// TestKarmadaRegistriesWatchIgnoresStatus: a status written (a collector's own, or another
// replica's), or a label, is no signal to check: only what decides what is collected is (an object
// added or deleted, a new generation, the Secret data annotation).
func TestKarmadaRegistriesWatchIgnoresStatus(t *testing.T) {
	k, _ := newFakeRegistries()
	fw := watch.NewFakeWithChanSize(16, false)
	obj := func(generation int64, edit func(*unstructured.Unstructured)) *unstructured.Unstructured {
		o := storedRegistry("pods", generation, selectors("Pod"))
		if edit != nil {
			edit(o)
		}
		return o
	}
	withStatus := func(o *unstructured.Unstructured) {
		o.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Accepted", "status": "True"}}}
	}
	labelled := func(o *unstructured.Unstructured) { o.SetLabels(map[string]string{"team": "a"}) }
	secretData := func(o *unstructured.Unstructured) {
		o.SetAnnotations(map[string]string{registry.SecretDataAnnotation: registry.SecretDataInclude})
	}
	steps := []struct {
		typ    watch.EventType
		obj    *unstructured.Unstructured
		signal bool
	}{
		{watch.Added, obj(1, nil), true},
		{watch.Modified, obj(1, withStatus), false},
		{watch.Modified, obj(1, labelled), false},
		{watch.Modified, obj(2, nil), true},
		{watch.Modified, obj(2, secretData), true},
		{watch.Modified, obj(2, secretData), false},
		{watch.Deleted, obj(2, secretData), true},
		{watch.Added, obj(2, secretData), true},
	}
	want := 0
	seen := seenObjects{}
	for j, s := range steps {
		if got := seen.changes(watch.Event{Type: s.typ, Object: s.obj.DeepCopy()}); got != s.signal {
			t.Errorf("event %d (%s, generation %d): signal %v, want %v", j, s.typ, s.obj.GetGeneration(), got, s.signal)
		}
		if s.signal {
			want++
		}
		fw.Action(s.typ, s.obj)
	}
	fw.Stop()
	// The same through a watch.
	signals := 0
	k.drain(context.Background(), fw, "", seenObjects{}, func() { signals++ })
	if signals != want {
		t.Errorf("drain signalled %d times, want %d", signals, want)
	}
}

// TestKarmadaRegistriesStatusNotDecoded: the status is not read, so a status the control plane
// accepts but kubesearch's types do not (a lastTransitionTime in the lower case RFC 3339 allows and
// the CRD's date-time format takes), written by anyone who may write the status alone, does not
// make the object undecodable, refused, and its documents purged.
func TestKarmadaRegistriesStatusNotDecoded(t *testing.T) {
	obj := storedRegistry("pods", 1, selectors("Pod"))
	obj.Object["status"] = map[string]any{"conditions": []any{map[string]any{
		"type": "Accepted", "status": "True", "reason": "Accepted", "message": "x", "lastTransitionTime": "2026-12-01t00:00:00z"}}}
	k, _ := newFakeRegistries(obj)
	objs, err := k.read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	admitted, verdicts := admitObjects(nil, objs, []registry.Cluster{kubeconfigClusterFor("member1")}, nil)
	if len(admitted) != 1 || verdicts["pods"].condition.Status != metav1.ConditionTrue {
		t.Errorf("admitted %d, verdict %+v: want pods admitted", len(admitted), verdicts["pods"].condition)
	}
}
