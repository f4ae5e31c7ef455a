package collector

import (
	"bytes"
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
	"k8s.io/apimachinery/pkg/types"
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
	read := func(objs ...*unstructured.Unstructured) []registryObject { return readObjects(t, objs...) }
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

	// With neither a memory nor a record in its status, the invalid object is not collected.
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
		storedAsJSON(t, dyn, "long")
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

// withAdmittedRecord sets an object's status.admitted as the collector writes it.
func withAdmittedRecord(obj *unstructured.Unstructured, uid string, generation int64, spec map[string]any) *unstructured.Unstructured {
	status, _ := obj.Object["status"].(map[string]any)
	if status == nil {
		status = map[string]any{}
		obj.Object["status"] = status
	}
	status[statusAdmitted] = map[string]any{"uid": uid, "generation": generation, "spec": spec}
	return obj
}

// editSpec stores a new generation of an object with spec, its status kept, as the control plane
// does for an edit.
func editSpec(t *testing.T, dyn *dynamicfake.FakeDynamicClient, name string, spec map[string]any) {
	t.Helper()
	obj, err := dyn.Resource(registryObjects).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	obj.Object["spec"] = spec
	obj.SetGeneration(obj.GetGeneration() + 1)
	if _, err := dyn.Resource(registryObjects).Update(t.Context(), obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// storedAsJSON makes the fake hold its objects as the control plane answers them: decoded from
// JSON, numbers included.
func storedAsJSON(t *testing.T, dyn *dynamicfake.FakeDynamicClient, name string) {
	t.Helper()
	stored, err := dyn.Resource(registryObjects).Get(t.Context(), name, metav1.GetOptions{})
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
	if _, err := dyn.Resource(registryObjects).Update(t.Context(), back, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// admittedWritten is the status.admitted (as JSON) of each object a status write carried, by name.
func admittedWritten(t *testing.T, dyn *dynamicfake.FakeDynamicClient) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, a := range dyn.Actions() {
		u, ok := a.(k8stesting.UpdateAction)
		if !ok || a.GetSubresource() != "status" {
			continue
		}
		obj := u.GetObject().(*unstructured.Unstructured)
		out[obj.GetName()] = admittedJSON(t, obj)
	}
	return out
}

func admittedJSON(t *testing.T, obj *unstructured.Unstructured) []byte {
	t.Helper()
	raw, ok, _ := unstructured.NestedFieldNoCopy(obj.Object, "status", statusAdmitted)
	if !ok {
		return nil
	}
	data, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func decodeRecord(t *testing.T, data []byte) registry.AdmittedGeneration {
	t.Helper()
	rec, err := registry.DecodeAdmitted(data, "status.admitted")
	if err != nil {
		t.Fatalf("status.admitted %s does not decode: %v", data, err)
	}
	return rec
}

// TestKarmadaRegistriesAdmittedInStatus: the generation a collector collects is recorded in the
// object's status beside the condition, in one write, and not written again while it holds; a
// collector without any memory of the object (a restarted one, another replica under a lease)
// reads it there when an edit is refused, keeps that generation collected, and computes the
// condition the remembering collector wrote, so it writes nothing.
func TestKarmadaRegistriesAdmittedInStatus(t *testing.T) {
	clusters := []registry.Cluster{kubeconfigClusterFor("member1")}
	k, dyn := newFakeRegistries(storedRegistry("pods", 1, selectors("Pod")))
	plan := func(objs []registryObject, last map[types.UID]registry.ResourceRegistry) ([]registry.ResourceRegistry, map[string]verdict) {
		admitted, verdicts := admitObjects(nil, objs, clusters, last)
		p, err := registry.NewPlan(admitted, clusters)
		if err != nil {
			t.Fatal(err)
		}
		describeAdmitted(verdicts, p)
		return admitted, verdicts
	}
	read := func() []registryObject {
		objs, err := k.read(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return objs
	}

	// Admitted: condition and record in one write.
	_, first := plan(read(), nil)
	dyn.ClearActions()
	k.report(t.Context(), read(), first)
	raw := admittedWritten(t, dyn)["pods"]
	if writes := statusWrites(t, dyn); len(dyn.Actions()) != 2 || len(writes) != 1 || raw == nil || writes["pods"].Status != metav1.ConditionTrue {
		t.Fatalf("wrote conditions %v, admitted %s: want Accepted=True and the admitted generation in one write", writes, raw)
	}
	if rec := decodeRecord(t, raw); rec.UID != "uid-pods" || rec.Generation != 1 || len(rec.Spec.ResourceSelectors) != 1 || rec.Spec.ResourceSelectors[0].Kind != "Pod" {
		t.Errorf("status.admitted %s, want uid-pods, generation 1 selecting Pods", raw)
	}
	// Read back as the control plane answers it (JSON): nothing to write again.
	storedAsJSON(t, dyn, "pods")
	if w := reportAgain(t, k, dyn, first); len(w) != 0 || len(dyn.Actions()) != 1 {
		t.Errorf("wrote again although the status holds (%d actions): %v", len(dyn.Actions()), w)
	}

	// An invalid edit, judged by the collector that admitted generation 1 (it remembers it).
	editSpec(t, dyn, "pods", selectors(""))
	remembering, verdicts := plan(read(), remember(first))
	if len(remembering) != 1 || remembering[0].Generation != 1 {
		t.Fatalf("remembering collector collects %+v, want generation 1", remembering)
	}
	dyn.ClearActions()
	k.report(t.Context(), read(), verdicts)
	want := verdicts["pods"].condition
	if w := statusWrites(t, dyn); w["pods"].Message != want.Message {
		t.Fatalf("remembering collector wrote %v, want %q", w, want.Message)
	}
	if got := admittedWritten(t, dyn)["pods"]; !bytes.Equal(got, raw) {
		t.Errorf("status.admitted %s written, want %s as it was: generation 1 is still the one collected", got, raw)
	}
	storedAsJSON(t, dyn, "pods")

	// A collector that never saw generation 1: the status says what was admitted.
	fresh, freshVerdicts := plan(read(), nil)
	if len(fresh) != 1 || fresh[0].Generation != 1 || fresh[0].Spec.ResourceSelectors[0].Kind != "Pod" || fresh[0].UID != "uid-pods" {
		t.Fatalf("fresh collector collects %+v, want generation 1 selecting Pods", fresh)
	}
	got := freshVerdicts["pods"].condition
	if got.Status != want.Status || got.Reason != want.Reason || got.Message != want.Message || got.ObservedGeneration != want.ObservedGeneration {
		t.Errorf("fresh collector's condition %+v, want the remembering one's %+v", got, want)
	}
	if !strings.Contains(got.Message, "generation 1, admitted before, is collected still") {
		t.Errorf("condition %q", got.Message)
	}
	if w := reportAgain(t, k, dyn, freshVerdicts); len(dyn.Actions()) != 1 {
		t.Errorf("the fresh collector rewrote the remembering one's status: %v (%d actions)", w, len(dyn.Actions()))
	}

	// Fixed: the new generation is collected and recorded.
	editSpec(t, dyn, "pods", selectors("ConfigMap"))
	_, fixed := plan(read(), nil)
	dyn.ClearActions()
	k.report(t.Context(), read(), fixed)
	if rec := decodeRecord(t, admittedWritten(t, dyn)["pods"]); rec.Generation != 3 || rec.Spec.ResourceSelectors[0].Kind != "ConfigMap" {
		t.Errorf("after the fix, status.admitted %+v, want generation 3 selecting ConfigMaps", rec)
	}
}

// TestKarmadaRegistriesAdmittedNewerInMemory: a record not written yet (its write lost to a
// conflict) is bridged by the collector's memory when that holds a newer generation than the
// status, and written there, so that every collector reads it next.
func TestKarmadaRegistriesAdmittedNewerInMemory(t *testing.T) {
	clusters := []registry.Cluster{kubeconfigClusterFor("member1")}
	k, dyn := newFakeRegistries(withAdmittedRecord(storedRegistry("pods", 3, selectors("")), "uid-pods", 1, selectors("Pod")))
	objs, err := k.read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	remembered := registry.ResourceRegistry{ObjectMeta: metav1.ObjectMeta{Name: "pods", UID: "uid-pods", Generation: 2},
		Spec: registry.ResourceRegistrySpec{ResourceSelectors: []registry.ResourceSelector{{APIVersion: "v1", Kind: "ConfigMap"}}}}
	admitted, verdicts := admitObjects(nil, objs, clusters, map[types.UID]registry.ResourceRegistry{"uid-pods": remembered})
	if len(admitted) != 1 || admitted[0].Generation != 2 {
		t.Fatalf("admitted %+v, want the remembered generation 2", admitted)
	}
	dyn.ClearActions()
	k.report(t.Context(), objs, verdicts)
	if rec := decodeRecord(t, admittedWritten(t, dyn)["pods"]); rec.Generation != 2 || rec.Spec.ResourceSelectors[0].Kind != "ConfigMap" {
		t.Errorf("status.admitted written %+v, want generation 2", rec)
	}

	// An older memory than the status: the status.
	remembered.Generation = 1
	admitted, _ = admitObjects(nil, objs, clusters, map[types.UID]registry.ResourceRegistry{"uid-pods": remembered})
	if len(admitted) != 1 || admitted[0].Spec.ResourceSelectors[0].Kind != "Pod" {
		t.Errorf("admitted %+v, want the status's generation 1 (Pods)", admitted)
	}
}

// TestKarmadaRegistriesAdmittedIgnored: a status.admitted that cannot be the object's earlier
// generation is never collected, and the collector says why: recorded for another uid (an object
// deleted and created again under its name, its status restored), of a generation the object has
// not reached, or undecodable. One that decodes but is invalid (planted by whoever may write the
// status) is judged as a spec is, and refused, the condition saying so: a status writer can make a
// refused object collect only what the object itself could.
func TestKarmadaRegistriesAdmittedIgnored(t *testing.T) {
	clusters := []registry.Cluster{kubeconfigClusterFor("member1")}
	undecodable := selectors("Pod")
	undecodable["resourceSelector"] = []any{}
	for _, tt := range []struct {
		name      string
		obj       *unstructured.Unstructured
		logged    string // in the warning, "" for none
		condition string
	}{
		{name: "another uid", obj: withAdmittedRecord(storedRegistry("pods", 2, selectors("")), "uid-before", 1, selectors("Pod")),
			logged: `recorded for uid \"uid-before\", not this object's \"uid-pods\"`, condition: "not collected: spec.resourceSelectors[0].kind: Required value"},
		{name: "a generation ahead", obj: withAdmittedRecord(storedRegistry("pods", 2, selectors("")), "uid-pods", 3, selectors("Pod")),
			logged: "generation 3, which the object (generation 2) has not had", condition: "not collected: spec.resourceSelectors[0].kind"},
		{name: "the current generation", obj: withAdmittedRecord(storedRegistry("pods", 2, selectors("")), "uid-pods", 2, selectors("Pod")),
			condition: "not collected: spec.resourceSelectors[0].kind"},
		{name: "undecodable", obj: withAdmittedRecord(storedRegistry("pods", 2, selectors("")), "uid-pods", 1, undecodable),
			logged: `unknown field \"spec.resourceSelector\"`, condition: "not collected: spec.resourceSelectors[0].kind"},
		{name: "not an object", obj: func() *unstructured.Unstructured {
			o := storedRegistry("pods", 2, selectors(""))
			o.Object["status"] = map[string]any{statusAdmitted: "generation 1"}
			return o
		}(), logged: "status.admitted", condition: "not collected: spec.resourceSelectors[0].kind"},
		{name: "planted invalid", obj: withAdmittedRecord(storedRegistry("pods", 2, selectors("")), "uid-pods", 1, selectors("Pod", "")),
			condition: "generation 2 not collected: spec.resourceSelectors[0].kind: Required value: e.g. Deployment; generation 1, admitted before, is not collected either: spec.resourceSelectors[1].kind: Required value"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var logs strings.Builder
			k, dyn := newFakeRegistries(tt.obj)
			k.log = slog.New(slog.NewTextHandler(&logs, nil))
			objs, err := k.read(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			admitted, verdicts := admitObjects(nil, objs, clusters, nil)
			if len(admitted) != 0 {
				t.Errorf("admitted %+v, want nothing", admitted)
			}
			if c := verdicts["pods"].condition; c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, tt.condition) {
				t.Errorf("condition %+v, want a refusal saying %q", c, tt.condition)
			}
			k.warnIgnored(objs, verdicts)
			switch {
			case tt.logged == "" && logs.Len() > 0:
				t.Errorf("logged %s", logs.String())
			case tt.logged != "" && (!strings.Contains(logs.String(), "status.admitted ignored") || !strings.Contains(logs.String(), tt.logged)):
				t.Errorf("log %q, want the record ignored because %q", logs.String(), tt.logged)
			}
			// The record is left as it is: nothing collected, nothing to record.
			dyn.ClearActions()
			k.report(t.Context(), objs, verdicts)
			if got, was := admittedWritten(t, dyn)["pods"], admittedJSON(t, tt.obj); !bytes.Equal(got, was) {
				t.Errorf("status.admitted %s written over %s", got, was)
			}
		})
	}
}

// TestKarmadaRegistriesAdmittedDigest: a record decides a plan only for an object the plan in force
// refuses, so only such a record's change makes the next check plan again; a record written for an
// admitted object (every admission writes one) does not.
func TestKarmadaRegistriesAdmittedDigest(t *testing.T) {
	clusters := []registry.Cluster{kubeconfigClusterFor("member1")}
	read := func(objs ...*unstructured.Unstructured) []registryObject { return readObjects(t, objs...) }
	var base [32]byte
	good := read(storedRegistry("pods", 2, selectors("Pod")))
	_, verdicts := admitObjects(nil, good, clusters, nil)
	recorded := read(withAdmittedRecord(storedRegistry("pods", 2, selectors("Pod")), "uid-pods", 2, selectors("Pod")))
	if admittedDigest(base, good, verdicts) != admittedDigest(base, recorded, verdicts) {
		t.Error("the record written for an admitted object changed the digest")
	}

	bad := read(storedRegistry("pods", 2, selectors("")))
	_, verdicts = admitObjects(nil, bad, clusters, nil)
	planted := read(withAdmittedRecord(storedRegistry("pods", 2, selectors("")), "uid-pods", 1, selectors("Pod")))
	if admittedDigest(base, bad, verdicts) == admittedDigest(base, planted, verdicts) {
		t.Error("a record written for a refused object left the digest as it was")
	}
}

// TestKarmadaRegistriesAdmittedPruned: a control plane whose CRD predates status.admitted drops it
// from every status written. The collector says so once, and does not write the record alone again
// at every check (which it would forever, the record never read back), only beside a condition.
func TestKarmadaRegistriesAdmittedPruned(t *testing.T) {
	k, dyn := newFakeRegistries(storedRegistry("pods", 1, selectors("Pod")))
	var logs strings.Builder
	k.log = slog.New(slog.NewTextHandler(&logs, nil))
	dyn.PrependReactor("update", registryObjects.Resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" {
			obj := a.(k8stesting.UpdateAction).GetObject().(*unstructured.Unstructured)
			unstructured.RemoveNestedField(obj.Object, "status", statusAdmitted)
		}
		return false, nil, nil
	})
	objs, err := k.read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	_, verdicts := admitObjects(nil, objs, []registry.Cluster{kubeconfigClusterFor("member1")}, nil)
	k.report(t.Context(), objs, verdicts)
	if !strings.Contains(logs.String(), "drops status.admitted") {
		t.Errorf("no warning that the record is dropped: %s", logs.String())
	}
	if w := reportAgain(t, k, dyn, verdicts); len(dyn.Actions()) != 1 {
		t.Errorf("wrote the dropped record again (%d actions): %v", len(dyn.Actions()), w)
	}
}

// TestKarmadaRegistriesAdmittedUndecodableEdit: an edit that does not even decode (a field
// kubesearch does not know) keeps the recorded generation collected as an invalid one does, in a
// collector that never saw it.
func TestKarmadaRegistriesAdmittedUndecodableEdit(t *testing.T) {
	spec := selectors("Pod")
	spec["resourceSelector"] = []any{}
	k, _ := newFakeRegistries(withAdmittedRecord(storedRegistry("pods", 2, spec), "uid-pods", 1, selectors("ConfigMap")))
	objs, err := k.read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	admitted, verdicts := admitObjects(nil, objs, []registry.Cluster{kubeconfigClusterFor("member1")}, nil)
	if len(admitted) != 1 || admitted[0].Generation != 1 || admitted[0].Spec.ResourceSelectors[0].Kind != "ConfigMap" {
		t.Fatalf("admitted %+v, want the recorded generation 1", admitted)
	}
	if c := verdicts["pods"].condition; !strings.Contains(c.Message, `unknown field "spec.resourceSelector"`) ||
		!strings.Contains(c.Message, "generation 1, admitted before, is collected still") {
		t.Errorf("condition %q", c.Message)
	}
}

// readObjects is what a collector reading objs from the control plane makes of them.
func readObjects(t *testing.T, objs ...*unstructured.Unstructured) []registryObject {
	t.Helper()
	k, _ := newFakeRegistries(objs...)
	out, err := k.read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return out
}
