//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubesearch/kubesearch/internal/table"
	"github.com/kubesearch/kubesearch/tests/testbed"
)

// updateTableGolden rewrites internal/table/testdata from what member1's kube-apiserver answers, so
// that the package's golden files hold the real server's cells, not the package's own output.
var updateTableGolden = flag.Bool("table.update", false, "rewrite internal/table/testdata from the apiserver's Tables")

const (
	tableAccept   = "application/json;as=Table;v=v1;g=meta.k8s.io"
	tableTestKey  = "table.kubesearch.io/test"
	tableFinalize = "table.kubesearch.io/hold"
)

// kube-apiserver's own Table of every kind package table prints, for realistic objects in every state
// that changes a cell (crash-looping, initializing, terminating Pods, completed Jobs, load balancers,
// TLS ingresses, bound claims, ...), equals what table renders from the same objects' JSON: column
// names, types, formats, priorities, descriptions, and every cell.
func TestTableMatchesAPIServer(t *testing.T) {
	env := testbed.Get(t)
	cfg := env.RESTConfig(t, "member1")
	cfg.WarningHandler = rest.NoWarnings{} // deprecated fields are used on purpose
	cs := kubernetes.NewForConfigOrDie(cfg)
	run := uniqueName("table")
	f := &tableFixture{t: t, cs: cs, ns: run, run: run, now: time.Now()}
	started := time.Now()
	f.create()
	t.Logf("objects created and settled in %s", time.Since(started).Round(time.Millisecond))

	ns, sel := "/namespaces/"+run, tableTestKey+"="+run
	kinds := []struct{ name, group, resource, path, selector string }{
		{"pods", "", "pods", "/api/v1" + ns + "/pods", ""},
		{"deployments", "apps", "deployments", "/apis/apps/v1" + ns + "/deployments", ""},
		{"replicasets", "apps", "replicasets", "/apis/apps/v1" + ns + "/replicasets", ""},
		{"statefulsets", "apps", "statefulsets", "/apis/apps/v1" + ns + "/statefulsets", ""},
		{"daemonsets", "apps", "daemonsets", "/apis/apps/v1" + ns + "/daemonsets", ""},
		{"jobs", "batch", "jobs", "/apis/batch/v1" + ns + "/jobs", ""},
		{"cronjobs", "batch", "cronjobs", "/apis/batch/v1" + ns + "/cronjobs", ""},
		{"services", "", "services", "/api/v1" + ns + "/services", ""},
		{"ingresses", "networking.k8s.io", "ingresses", "/apis/networking.k8s.io/v1" + ns + "/ingresses", ""},
		{"configmaps", "", "configmaps", "/api/v1" + ns + "/configmaps", ""},
		{"secrets", "", "secrets", "/api/v1" + ns + "/secrets", ""},
		{"namespaces", "", "namespaces", "/api/v1/namespaces", sel},
		{"nodes", "", "nodes", "/api/v1/nodes", ""},
		{"events", "", "events", "/api/v1" + ns + "/events", ""},
		{"events.events.k8s.io", "events.k8s.io", "events", "/apis/events.k8s.io/v1" + ns + "/events", ""},
		{"persistentvolumeclaims", "", "persistentvolumeclaims", "/api/v1" + ns + "/persistentvolumeclaims", ""},
		{"serviceaccounts", "", "serviceaccounts", "/api/v1" + ns + "/serviceaccounts", ""},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			c := tableCase{name: k.name, group: k.group, resource: k.resource, path: k.path, selector: k.selector}
			compareTable(t, cs, c, table.For(k.group, k.resource))
		})
	}
	t.Run("customresources", func(t *testing.T) {
		sub := *f
		sub.t = t
		sub.compareCustomResources()
	})
	t.Run("through the facade", func(t *testing.T) {
		var cases []tableCase
		for _, k := range kinds {
			cases = append(cases, tableCase{name: k.name, group: k.group, resource: k.resource, path: k.path, selector: k.selector})
		}
		// The custom resources of the subtest above, with their CRDs cached: their printer columns.
		for _, plural := range []string{"widgets", "gadgets"} {
			resource := strings.TrimSuffix(f.crdName(plural), ".table.kubesearch.io")
			cases = append(cases, tableCase{name: plural, group: "table.kubesearch.io", resource: resource, customResource: true,
				path: "/apis/table.kubesearch.io/v1" + ns + "/" + resource})
		}
		compareFacadeTables(t, env, cs, run, cases)
	})
	t.Logf("TestTable took %s", time.Since(started).Round(time.Millisecond))
}

// tableCase is one list kube-apiserver renders as a Table; the name is that of its golden files.
type tableCase struct {
	name, group, resource, path, selector string
	customResource                        bool
	printerColumns                        []table.PrinterColumn // of a custom resource
}

// compareTable GETs path as a Table with the full objects and checks that p renders each row's
// object into the server's cells. Ages are rendered at the time the request was sent and at the time
// the answer came; the server's cell must be one of the two.
func compareTable(t *testing.T, cs kubernetes.Interface, c tableCase, p *table.Printer) {
	t.Helper()
	name, path, selector := c.name, c.path, c.selector
	req := cs.CoreV1().RESTClient().Get().AbsPath(path).Param("includeObject", "Object").SetHeader("Accept", tableAccept)
	if selector != "" {
		req = req.Param("labelSelector", selector)
	}
	before := time.Now()
	body, err := req.DoRaw(t.Context())
	after := time.Now()
	if err != nil {
		t.Fatalf("GET %s as Table: %v", path, err)
	}
	var got metav1.Table
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("decode Table of %s: %v", path, err)
	}
	if len(got.Rows) == 0 {
		t.Fatalf("GET %s: no rows", path)
	}

	want := p.Columns()
	if len(want) != len(got.ColumnDefinitions) {
		t.Errorf("columns: apiserver has %d %v, table has %d %v", len(got.ColumnDefinitions), columnNames(got.ColumnDefinitions), len(want), columnNames(want))
	} else {
		for i := range want {
			g, w := got.ColumnDefinitions[i], want[i]
			if g.Name != w.Name || g.Type != w.Type || g.Format != w.Format || g.Priority != w.Priority {
				t.Errorf("column %d: apiserver %+v, table %+v", i, g, w)
			} else if g.Description != w.Description {
				t.Errorf("column %d %s: description: apiserver %q, table %q", i, g.Name, g.Description, w.Description)
			}
		}
	}

	var objects []json.RawMessage
	var cellsMatched, ageLike int
	allBefore, allAfter := true, true
	for _, row := range got.Rows {
		obj, err := storedObject(row.Object.Raw)
		if err != nil {
			t.Fatalf("row object: %v", err)
		}
		objects = append(objects, obj)
		rb, err := p.Row(obj, before)
		if err != nil {
			t.Fatalf("render %s: %v", obj, err)
		}
		ra, err := p.Row(obj, after)
		if err != nil {
			t.Fatalf("render %s: %v", obj, err)
		}
		if len(rb.Cells) != len(row.Cells) {
			t.Errorf("row %v: apiserver has %d cells, table %d", row.Cells, len(row.Cells), len(rb.Cells))
			continue
		}
		for i := range row.Cells {
			g, b, a := mustJSON(t, row.Cells[i]), mustJSON(t, rb.Cells[i]), mustJSON(t, ra.Cells[i])
			if b != a {
				ageLike++
			}
			allBefore = allBefore && g == b
			allAfter = allAfter && g == a
			if g != b && g != a {
				t.Errorf("%s row %q column %q: apiserver %s, table %s (at request) / %s (at answer)",
					name, row.Cells[0], got.ColumnDefinitions[min(i, len(got.ColumnDefinitions)-1)].Name, g, b, a)
				continue
			}
			cellsMatched++
		}
		if g, w := mustJSON(t, row.Conditions), mustJSON(t, rb.Conditions); g != w {
			t.Errorf("%s row %q conditions: apiserver %s, table %s", name, row.Cells[0], g, w)
		}
	}
	t.Logf("%s: %d rows, %d columns, %d cells equal to the apiserver's (%d of them time-dependent across the request)",
		name, len(got.Rows), len(got.ColumnDefinitions), cellsMatched, ageLike)

	if *updateTableGolden && !t.Failed() {
		now := before
		if !allBefore {
			if !allAfter {
				t.Fatalf("%s: ages changed between cells during the request; run again to update the golden file", name)
			}
			now = after
		}
		writeTableGolden(t, c, objects, now, &got)
	}
}

// storedObject is a row's object as the query API stores it: managedFields removed.
func storedObject(raw []byte) (json.RawMessage, error) {
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	if md, ok := obj["metadata"].(map[string]any); ok {
		delete(md, "managedFields")
	}
	return json.Marshal(obj)
}

func writeTableGolden(t *testing.T, c tableCase, objects []json.RawMessage, now time.Time, got *metav1.Table) {
	t.Helper()
	dir := filepath.Join(testbed.Root(), "internal", "table", "testdata")
	type row struct {
		Cells      []any                      `json:"cells"`
		Conditions []metav1.TableRowCondition `json:"conditions,omitempty"`
	}
	var rows []any
	for _, r := range got.Rows {
		rows = append(rows, row{Cells: r.Cells, Conditions: r.Conditions})
	}
	var items []any
	for _, o := range objects {
		items = append(items, o)
	}
	input := []jsonField{{"group", c.group}, {"resource", c.resource}}
	if c.customResource {
		input = append(input, jsonField{"customResource", true}, jsonField{"printerColumns", c.printerColumns})
	}
	golden := []jsonField{{"now", now}, {"columns", got.ColumnDefinitions}}
	for file, content := range map[string][]byte{
		c.name + ".json":   lineJSON(t, input, "items", items),
		c.name + ".golden": lineJSON(t, golden, "rows", rows),
	} {
		if err := os.WriteFile(filepath.Join(dir, file), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("wrote testdata/%s.json and .golden", c.name)
}

type jsonField struct {
	name  string
	value any
}

// lineJSON is an object of the fields and a list, one compact line per field and list element, so
// that the golden files diff well.
func lineJSON(t *testing.T, fields []jsonField, list string, elems []any) []byte {
	t.Helper()
	var b strings.Builder
	b.WriteString("{\n")
	for _, f := range fields {
		fmt.Fprintf(&b, "  %q: %s,\n", f.name, mustJSON(t, f.value))
	}
	fmt.Fprintf(&b, "  %q: [\n", list)
	for i, e := range elems {
		sep := ","
		if i == len(elems)-1 {
			sep = ""
		}
		fmt.Fprintf(&b, "    %s%s\n", mustJSON(t, e), sep)
	}
	b.WriteString("  ]\n}\n")
	return []byte(b.String())
}

func columnNames(cols []metav1.TableColumnDefinition) []string {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	return names
}

// mustJSON is v as compact JSON, "<none>" left readable.
func mustJSON(t *testing.T, v any) string {
	t.Helper()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// tableFixture creates the objects of one run in member1 and removes them when the test ends.
type tableFixture struct {
	t       *testing.T
	cs      kubernetes.Interface
	ns, run string
	now     time.Time
}

func (f *tableFixture) labels(extra map[string]string) map[string]string {
	l := map[string]string{tableTestKey: f.run}
	for k, v := range extra {
		l[k] = v
	}
	return l
}

func (f *tableFixture) ago(d time.Duration) metav1.Time {
	return metav1.NewTime(f.now.Add(-d).Truncate(time.Second))
}

// statusPatch is a merge patch setting status: unlike an update, it cannot conflict with the
// controllers that also write the object.
func (f *tableFixture) statusPatch(status any) []byte {
	b, err := json.Marshal(map[string]any{"status": status})
	f.check("status patch", err)
	return b
}

func (f *tableFixture) check(what string, err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatalf("%s: %v", what, err)
	}
}

func (f *tableFixture) create() {
	t, cs, ctx := f.t, f.cs, f.t.Context()
	t.Helper()
	f.deleteWhenDone()
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns, Labels: f.labels(nil)}}, metav1.CreateOptions{})
	f.check("create namespace", err)
	pollUntil(t, "default ServiceAccount of "+f.ns, time.Minute, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(f.ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	f.nodes()
	f.pods()
	f.workloads()
	f.network()
	f.config()
	f.storage()
	f.events()
	f.namespaces()
	f.settle()
}

// deleteWhenDone removes what the run created when the test ends, finalizers first. Pods are deleted
// at once: on the node without a kubelet nothing would confirm their termination.
func (f *tableFixture) deleteWhenDone() {
	f.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cs := f.cs
		unhold := []byte(`{"metadata":{"finalizers":null}}`)
		for _, ns := range []string{f.ns, f.ns + "-gone"} {
			if pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
				for _, p := range pods.Items {
					if len(p.Finalizers) > 0 {
						_, _ = cs.CoreV1().Pods(ns).Patch(ctx, p.Name, types.MergePatchType, unhold, metav1.PatchOptions{})
					}
				}
			}
			if cms, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); err == nil {
				for _, c := range cms.Items {
					if len(c.Finalizers) > 0 {
						_, _ = cs.CoreV1().ConfigMaps(ns).Patch(ctx, c.Name, types.MergePatchType, unhold, metav1.PatchOptions{})
					}
				}
			}
			if pvcs, err := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{}); err == nil {
				for _, c := range pvcs.Items {
					_, _ = cs.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, c.Name, types.MergePatchType, unhold, metav1.PatchOptions{})
				}
			}
			_ = cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}, metav1.ListOptions{})
			_ = cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		}
		sel := metav1.ListOptions{LabelSelector: tableTestKey + "=" + f.run}
		_ = cs.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, sel)
		_ = cs.CoreV1().PersistentVolumes().DeleteCollection(ctx, metav1.DeleteOptions{}, sel)
		for _, crd := range []string{f.crdName("widgets"), f.crdName("gadgets")} {
			_ = cs.CoreV1().RESTClient().Delete().AbsPath("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + crd).Do(ctx).Error()
		}
	})
}

// ghostNode is a Node no kwok manages: its Pods keep the status the test writes.
func (f *tableFixture) ghostNode() string { return f.run + "-ghost" }

func (f *tableFixture) nodes() {
	ctx, cs := f.t.Context(), f.cs
	keepOff := []corev1.Taint{{Key: "table.kubesearch.io/ghost", Effect: corev1.TaintEffectNoSchedule}}
	ghost, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: f.ghostNode(), Labels: f.labels(map[string]string{
			"node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/etcd": "",
			"kubernetes.io/role": "master", "kubernetes.io/hostname": f.ghostNode(),
		})},
		Spec: corev1.NodeSpec{Unschedulable: true, Taints: keepOff},
	}, metav1.CreateOptions{})
	f.check("create ghost node", err)
	ghost.Status = corev1.NodeStatus{
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady",
			Message: "container runtime network not ready", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.1.0.9"}, {Type: corev1.NodeExternalIP, Address: "203.0.113.9"},
			{Type: corev1.NodeHostName, Address: f.ghostNode()}},
		NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.37.2", OSImage: "Ubuntu 24.04.1 LTS", KernelVersion: "6.8.0-49-generic",
			Architecture: "arm64", ContainerRuntimeVersion: "containerd://2.0.1", OperatingSystem: "linux"},
	}
	_, err = cs.CoreV1().Nodes().Patch(ctx, ghost.Name, types.MergePatchType, f.statusPatch(ghost.Status), metav1.PatchOptions{}, "status")
	f.check("ghost node status", err)
	_, err = cs.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: f.run + "-edge", Labels: f.labels(map[string]string{"kubernetes.io/role": "edge"})},
		Spec:       corev1.NodeSpec{Taints: keepOff},
	}, metav1.CreateOptions{})
	f.check("create edge node", err)
}

func (f *tableFixture) pods() {
	ctx, cs := f.t.Context(), f.cs
	c := func(name string) corev1.Container {
		return corev1.Container{Name: name, Image: "registry.example.com/shop/" + name + ":1.4.2"}
	}
	running := func(name string, restarts int32) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, Image: "registry.example.com/shop/" + name + ":1.4.2", Ready: true, Started: ptr(true),
			RestartCount: restarts, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: f.ago(time.Hour)}}}
	}
	terminated := func(name, reason string, code, signal int32) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, Image: "registry.example.com/shop/" + name + ":1.4.2", Started: ptr(false),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: reason, ExitCode: code, Signal: signal,
				StartedAt: f.ago(2 * time.Hour), FinishedAt: f.ago(90 * time.Minute)}}}
	}
	waiting := func(name, reason string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, Image: "registry.example.com/shop/" + name + ":1.4.2", Started: ptr(false),
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}
	}
	restarted := func(s corev1.ContainerStatus, n int32, ago time.Duration) corev1.ContainerStatus {
		s.RestartCount = n
		s.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
			StartedAt: f.ago(ago + time.Minute), FinishedAt: f.ago(ago)}}
		return s
	}
	cond := func(typ corev1.PodConditionType, ok bool) corev1.PodCondition {
		s := corev1.ConditionFalse
		if ok {
			s = corev1.ConditionTrue
		}
		return corev1.PodCondition{Type: typ, Status: s, LastTransitionTime: f.ago(time.Hour)}
	}
	conds := func(initialized, ready bool) []corev1.PodCondition {
		return []corev1.PodCondition{cond(corev1.PodScheduled, true), cond(corev1.PodInitialized, initialized),
			cond(corev1.ContainersReady, ready), cond(corev1.PodReady, ready)}
	}
	ip := func(i int) []corev1.PodIP { return []corev1.PodIP{{IP: fmt.Sprintf("10.250.7.%d", i)}} }
	always := ptr(corev1.ContainerRestartPolicyAlways)

	type ghostPod struct {
		name    string
		spec    corev1.PodSpec
		status  corev1.PodStatus
		hold    bool // gets a finalizer and is deleted: Terminating
		unbound bool // waits for a node that never comes; only such a Pod may be nominated to one
	}
	ghosts := []ghostPod{
		{name: "api-crashloop", spec: corev1.PodSpec{Containers: []corev1.Container{c("api"), c("log-shipper")}},
			status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: conds(true, false), PodIPs: ip(11),
				ContainerStatuses: []corev1.ContainerStatus{
					restarted(waiting("api", "CrashLoopBackOff"), 7, 3*time.Minute),
					restarted(running("log-shipper", 0), 1, 50*time.Minute)}}},
		{name: "migrate-pull", spec: corev1.PodSpec{InitContainers: []corev1.Container{c("migrate"), c("seed")}, Containers: []corev1.Container{c("app")}},
			status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: conds(false, false),
				InitContainerStatuses: []corev1.ContainerStatus{waiting("migrate", "ImagePullBackOff"), waiting("seed", "PodInitializing")},
				ContainerStatuses:     []corev1.ContainerStatus{waiting("app", "PodInitializing")}}},
		{name: "migrate-progress", spec: corev1.PodSpec{InitContainers: []corev1.Container{c("migrate"), c("seed")}, Containers: []corev1.Container{c("app")}},
			status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: conds(false, false), PodIPs: ip(12),
				InitContainerStatuses: []corev1.ContainerStatus{terminated("migrate", "Completed", 0, 0), running("seed", 0)},
				ContainerStatuses:     []corev1.ContainerStatus{waiting("app", "PodInitializing")}}},
		{name: "migrate-failed", spec: corev1.PodSpec{InitContainers: []corev1.Container{c("migrate")}, Containers: []corev1.Container{c("app")}},
			status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: conds(false, false), PodIPs: ip(13),
				InitContainerStatuses: []corev1.ContainerStatus{restarted(terminated("migrate", "", 2, 0), 3, 4*time.Minute)},
				ContainerStatuses:     []corev1.ContainerStatus{waiting("app", "PodInitializing")}}},
		{name: "migrate-killed", spec: corev1.PodSpec{InitContainers: []corev1.Container{c("migrate")}, Containers: []corev1.Container{c("app")}},
			status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: conds(false, false),
				InitContainerStatuses: []corev1.ContainerStatus{terminated("migrate", "", 137, 9)}}},
		{name: "mesh-sidecar", spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "istio-proxy", Image: "docker.io/istio/proxyv2:1.24.1", RestartPolicy: always}, c("init-db")},
			Containers:     []corev1.Container{c("api")}},
			status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: conds(true, true), PodIPs: ip(14),
				InitContainerStatuses: []corev1.ContainerStatus{restarted(running("istio-proxy", 0), 2, 10*time.Minute), terminated("init-db", "Completed", 0, 0)},
				ContainerStatuses:     []corev1.ContainerStatus{restarted(running("api", 0), 1, 20*time.Minute)}}},
		{name: "mesh-sidecar-starting", spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "istio-proxy", Image: "docker.io/istio/proxyv2:1.24.1", RestartPolicy: always}, c("init-db")},
			Containers:     []corev1.Container{c("api")}},
			status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: conds(false, false), PodIPs: ip(15),
				InitContainerStatuses: []corev1.ContainerStatus{restarted(running("istio-proxy", 0), 4, 30*time.Second), running("init-db", 0)},
				ContainerStatuses:     []corev1.ContainerStatus{waiting("api", "PodInitializing")}}},
		{name: "report-done", spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{c("report"), c("upload")}},
			status: corev1.PodStatus{Phase: corev1.PodSucceeded, Conditions: conds(true, false), PodIPs: ip(16),
				ContainerStatuses: []corev1.ContainerStatus{terminated("report", "Completed", 0, 0), terminated("upload", "Completed", 0, 0)}}},
		{name: "report-error", spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{c("report"), c("upload")}},
			status: corev1.PodStatus{Phase: corev1.PodFailed, Conditions: conds(true, false),
				ContainerStatuses: []corev1.ContainerStatus{terminated("report", "Error", 1, 0), terminated("upload", "Completed", 0, 0)}}},
		{name: "batch-half-done", spec: corev1.PodSpec{Containers: []corev1.Container{c("web"), c("warmup")}},
			status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: conds(true, true), PodIPs: ip(17),
				ContainerStatuses: []corev1.ContainerStatus{running("web", 0), terminated("warmup", "Completed", 0, 0)}}},
		{name: "batch-half-notready", spec: corev1.PodSpec{Containers: []corev1.Container{c("web"), c("warmup")}},
			status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: conds(true, false), PodIPs: ip(18),
				ContainerStatuses: []corev1.ContainerStatus{running("web", 0), terminated("warmup", "Completed", 0, 0)}}},
		{name: "batch-oom", spec: corev1.PodSpec{Containers: []corev1.Container{c("fetch"), c("transform"), c("web")}},
			status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: conds(true, false), PodIPs: ip(19),
				ContainerStatuses: []corev1.ContainerStatus{terminated("fetch", "Completed", 0, 0), terminated("transform", "OOMKilled", 137, 0), running("web", 0)}}},
		{name: "worker-signal", spec: corev1.PodSpec{Containers: []corev1.Container{c("worker")}},
			status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: conds(true, false), PodIPs: ip(20),
				ContainerStatuses: []corev1.ContainerStatus{terminated("worker", "", 143, 15)}}},
		{name: "worker-exit", spec: corev1.PodSpec{Containers: []corev1.Container{c("worker")}},
			status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: conds(true, false), PodIPs: ip(21),
				ContainerStatuses: []corev1.ContainerStatus{terminated("worker", "", 3, 0)}}},
		{name: "evicted", spec: corev1.PodSpec{Containers: []corev1.Container{c("api")}},
			status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "The node was low on resource: memory.",
				ContainerStatuses: []corev1.ContainerStatus{terminated("api", "ContainerStatusUnknown", 137, 0)}}},
		{name: "nominated", unbound: true, spec: corev1.PodSpec{Containers: []corev1.Container{c("api")}},
			status: corev1.PodStatus{Phase: corev1.PodPending, NominatedNodeName: "kwok-node-2",
				Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}},
		{name: "gates", spec: corev1.PodSpec{Containers: []corev1.Container{c("api")},
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "example.com/lb-ready"}, {ConditionType: "example.com/warm"}}},
			status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: ip(22),
				Conditions: append(conds(true, false), corev1.PodCondition{Type: "example.com/lb-ready", Status: corev1.ConditionTrue},
					corev1.PodCondition{Type: "example.com/warm", Status: corev1.ConditionFalse}),
				ContainerStatuses: []corev1.ContainerStatus{running("api", 0)}}},
		{name: "api-terminating", hold: true, spec: corev1.PodSpec{Containers: []corev1.Container{c("api")}},
			status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: conds(true, true), PodIPs: ip(23),
				ContainerStatuses: []corev1.ContainerStatus{running("api", 0)}}},
		{name: "api-node-lost", hold: true, spec: corev1.PodSpec{Containers: []corev1.Container{c("api")}},
			status: corev1.PodStatus{Phase: corev1.PodRunning, Reason: "NodeLost", Message: "Node is not responding", Conditions: conds(true, true), PodIPs: ip(24),
				ContainerStatuses: []corev1.ContainerStatus{running("api", 0)}}},
		{name: "report-done-deleted", hold: true, spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{c("report")}},
			status: corev1.PodStatus{Phase: corev1.PodSucceeded, Conditions: conds(true, false),
				ContainerStatuses: []corev1.ContainerStatus{terminated("report", "Completed", 0, 0)}}},
	}
	for _, g := range ghosts {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: g.name, Labels: map[string]string{"app": g.name}}, Spec: g.spec}
		pod.Spec.NodeName = f.ghostNode()
		if g.unbound {
			pod.Spec.NodeName, pod.Spec.NodeSelector = "", map[string]string{"table.kubesearch.io/none": "x"}
		}
		if g.hold {
			pod.Finalizers = []string{tableFinalize}
		}
		created, err := cs.CoreV1().Pods(f.ns).Create(ctx, pod, metav1.CreateOptions{})
		f.check("create pod "+g.name, err)
		created.Status = g.status
		if len(g.status.PodIPs) > 0 {
			created.Status.PodIP = g.status.PodIPs[0].IP
		}
		if !g.unbound {
			created.Status.HostIP, created.Status.HostIPs = "10.1.0.9", []corev1.HostIP{{IP: "10.1.0.9"}}
			created.Status.StartTime = ptr(f.ago(2 * time.Hour))
		}
		_, err = cs.CoreV1().Pods(f.ns).Patch(ctx, g.name, types.MergePatchType, f.statusPatch(created.Status), metav1.PatchOptions{}, "status")
		f.check("status of pod "+g.name, err)
		if g.hold {
			f.check("delete pod "+g.name, cs.CoreV1().Pods(f.ns).Delete(ctx, g.name, metav1.DeleteOptions{}))
		}
	}

	// Pods the scheduler and kwok handle for real.
	kwokPods := []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "shop-web"}, Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{c("wait-db"), {Name: "envoy", Image: "docker.io/envoyproxy/envoy:v1.32.1", RestartPolicy: always}},
			Containers:     []corev1.Container{c("web"), c("metrics")},
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "example.com/lb-ready"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "gated"}, Spec: corev1.PodSpec{Containers: []corev1.Container{c("api")},
			SchedulingGates: []corev1.PodSchedulingGate{{Name: "example.com/quota"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "unschedulable"}, Spec: corev1.PodSpec{Containers: []corev1.Container{c("api")},
			NodeSelector: map[string]string{"table.kubesearch.io/none": "x"}}},
	}
	for _, p := range kwokPods {
		_, err := cs.CoreV1().Pods(f.ns).Create(ctx, p, metav1.CreateOptions{})
		f.check("create pod "+p.Name, err)
	}
}

func (f *tableFixture) podTemplate(app string, containers ...string) corev1.PodTemplateSpec {
	var cs []corev1.Container
	for _, c := range containers {
		cs = append(cs, corev1.Container{Name: c, Image: "registry.example.com/shop/" + c + ":2.0.1"})
	}
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}}, Spec: corev1.PodSpec{Containers: cs}}
}

func (f *tableFixture) workloads() {
	ctx, cs, ns := f.t.Context(), f.cs, f.ns
	sel := func(app string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	}
	for _, d := range []*appsv1.Deployment{
		{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(3)), Selector: sel("web"),
			Template: f.podTemplate("web", "nginx", "metrics")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "cache"}, Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "cache"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"cache", "db"}}}},
			Template: func() corev1.PodTemplateSpec {
				p := f.podTemplate("cache", "redis")
				p.Labels["tier"] = "cache"
				return p
			}()}},
		{ObjectMeta: metav1.ObjectMeta{Name: "stuck"}, Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(2)), Selector: sel("stuck"),
			Template: func() corev1.PodTemplateSpec {
				p := f.podTemplate("stuck", "api")
				p.Spec.NodeSelector = map[string]string{"table.kubesearch.io/none": "x"}
				return p
			}()}},
	} {
		_, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
		f.check("create deployment "+d.Name, err)
	}
	_, err := cs.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "legacy"},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr(int32(2)), Selector: sel("legacy"), Template: f.podTemplate("legacy", "app")}}, metav1.CreateOptions{})
	f.check("create replicaset", err)
	_, err = cs.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr(int32(2)), ServiceName: "db", Selector: sel("db"), Template: f.podTemplate("db", "postgres", "exporter")}}, metav1.CreateOptions{})
	f.check("create statefulset", err)
	agent := f.podTemplate("agent", "agent")
	agent.Spec.NodeSelector = map[string]string{"type": "kwok"}
	none := f.podTemplate("none", "agent")
	none.Spec.NodeSelector = map[string]string{"table.kubesearch.io/none": "x", "kubernetes.io/os": "linux"}
	for name, tmpl := range map[string]corev1.PodTemplateSpec{"agent": agent, "none": none} {
		_, err = cs.AppsV1().DaemonSets(ns).Create(ctx, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.DaemonSetSpec{Selector: sel(tmpl.Labels["app"]), Template: tmpl}}, metav1.CreateOptions{})
		f.check("create daemonset "+name, err)
	}
	job := func(name string, completions, parallelism *int32, suspend bool, nodeSelector map[string]string) *batchv1.Job {
		tmpl := f.podTemplate(name, "task", "sidecar")
		tmpl.Labels = nil
		tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
		tmpl.Spec.NodeSelector = nodeSelector
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: batchv1.JobSpec{Completions: completions,
			Parallelism: parallelism, Suspend: ptr(suspend), Template: tmpl}}
	}
	for _, j := range []*batchv1.Job{
		job("backup", ptr(int32(2)), ptr(int32(1)), false, nil),
		job("fanout", nil, ptr(int32(3)), false, nil),
		job("paused", nil, nil, true, nil),
		job("waiting", ptr(int32(1)), nil, false, map[string]string{"table.kubesearch.io/none": "x"}),
	} {
		_, err := cs.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{})
		f.check("create job "+j.Name, err)
	}
	cron := func(name, schedule string, tz *string, suspend *bool) *batchv1.CronJob {
		tmpl := f.podTemplate(name, "report")
		tmpl.Labels = nil
		tmpl.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
		return &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: batchv1.CronJobSpec{Schedule: schedule, TimeZone: tz,
			Suspend: suspend, JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tmpl}}}}
	}
	for _, c := range []*batchv1.CronJob{
		cron("nightly", "0 3 * * *", ptr("Europe/Berlin"), nil),
		cron("every-minute", "*/1 * * * *", nil, ptr(true)),
		cron("yearly", "@yearly", nil, ptr(false)),
	} {
		created, err := cs.BatchV1().CronJobs(ns).Create(ctx, c, metav1.CreateOptions{})
		f.check("create cronjob "+c.Name, err)
		if c.Name == "yearly" {
			created.Status.LastScheduleTime = ptr(f.ago(26 * time.Hour))
			_, err = cs.BatchV1().CronJobs(ns).Patch(ctx, c.Name, types.MergePatchType, f.statusPatch(created.Status), metav1.PatchOptions{}, "status")
			f.check("status of cronjob", err)
		}
	}
}

func (f *tableFixture) network() {
	ctx, cs, ns := f.t.Context(), f.cs, f.ns
	port := func(name string, p int32, proto corev1.Protocol) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Port: p, Protocol: proto, TargetPort: intstr.FromInt32(p)}
	}
	web := map[string]string{"app": "web"}
	for _, s := range []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{Selector: web,
			Ports: []corev1.ServicePort{port("http", 80, corev1.ProtocolTCP), port("https", 443, corev1.ProtocolTCP)}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": "db"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "dns"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: web, ExternalIPs: []string{"198.51.100.53"},
			Ports: []corev1.ServicePort{port("dns", 53, corev1.ProtocolUDP), port("dns-tcp", 53, corev1.ProtocolTCP), port("sctp", 9899, corev1.ProtocolSCTP)}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "edge"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: web,
			ExternalIPs: []string{"198.51.100.7"}, Ports: []corev1.ServicePort{port("https", 443, corev1.ProtocolTCP)}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "edge-lb-only"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: web,
			Ports: []corev1.ServicePort{port("https", 443, corev1.ProtocolTCP)}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "edge-pending"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: web,
			Ports: []corev1.ServicePort{port("http", 80, corev1.ProtocolTCP)}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "payments-db"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.payments.example.com"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "metrics"}, Spec: corev1.ServiceSpec{ExternalIPs: []string{"198.51.100.8", "198.51.100.9"},
			Ports: []corev1.ServicePort{port("metrics", 9090, corev1.ProtocolTCP)}}},
	} {
		created, err := cs.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{})
		f.check("create service "+s.Name, err)
		var lb []corev1.LoadBalancerIngress
		switch s.Name {
		case "edge":
			lb = []corev1.LoadBalancerIngress{{IP: "203.0.113.10"}, {Hostname: "edge.example.com"}, {IP: "203.0.113.10", Hostname: "x.example.com"}}
		case "edge-lb-only":
			lb = []corev1.LoadBalancerIngress{{IP: "203.0.113.12"}, {IP: "203.0.113.11"}, {Hostname: "a-very-long-load-balancer-name.elb.example.com"}}
		}
		if lb != nil {
			created.Status.LoadBalancer.Ingress = lb
			_, err = cs.CoreV1().Services(ns).Patch(ctx, s.Name, types.MergePatchType, f.statusPatch(created.Status), metav1.PatchOptions{}, "status")
			f.check("status of service "+s.Name, err)
		}
	}

	prefix := networkingv1.PathTypePrefix
	backend := networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}
	rule := func(host string) networkingv1.IngressRule {
		return networkingv1.IngressRule{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefix, Backend: backend}}}}}
	}
	for _, in := range []*networkingv1.Ingress{
		{ObjectMeta: metav1.ObjectMeta{Name: "shop"}, Spec: networkingv1.IngressSpec{IngressClassName: ptr("nginx"),
			TLS:   []networkingv1.IngressTLS{{Hosts: []string{"shop.example.com"}, SecretName: "shop-tls"}},
			Rules: []networkingv1.IngressRule{rule("shop.example.com"), rule(""), rule("api.example.com"), rule("admin.example.com"), rule("static.example.com")}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "fallback"}, Spec: networkingv1.IngressSpec{DefaultBackend: &backend}},
		{ObjectMeta: metav1.ObjectMeta{Name: "docs"}, Spec: networkingv1.IngressSpec{IngressClassName: ptr("traefik"),
			Rules: []networkingv1.IngressRule{rule("docs.example.com"), rule("wiki.example.com")}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "three"}, Spec: networkingv1.IngressSpec{
			Rules: []networkingv1.IngressRule{rule("a.example.com"), rule(""), rule("b.example.com"), rule("c.example.com")}}},
	} {
		created, err := cs.NetworkingV1().Ingresses(ns).Create(ctx, in, metav1.CreateOptions{})
		f.check("create ingress "+in.Name, err)
		if in.Name == "shop" || in.Name == "docs" {
			created.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "203.0.113.20"}, {Hostname: "ingress.example.com"}, {IP: "203.0.113.19"}}
			_, err = cs.NetworkingV1().Ingresses(ns).Patch(ctx, in.Name, types.MergePatchType, f.statusPatch(created.Status), metav1.PatchOptions{}, "status")
			f.check("status of ingress "+in.Name, err)
		}
	}
}

func (f *tableFixture) config() {
	ctx, cs, ns := f.t.Context(), f.cs, f.ns
	for _, c := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: "app-config"}, Data: map[string]string{"app.yaml": "port: 8080\n", "LOG_LEVEL": "info", "FEATURES": "a,b"},
			BinaryData: map[string][]byte{"logo.png": {0x89, 0x50, 0x4e, 0x47}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "empty"}},
	} {
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, c, metav1.CreateOptions{})
		f.check("create configmap "+c.Name, err)
	}
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "db-credentials"}, StringData: map[string]string{"username": "shop", "password": "s3cr3t"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "shop-tls"}, Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": []byte("-"), "tls.key": []byte("-")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "registry"}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{".dockerconfigjson": []byte(`{"auths":{"registry.example.com":{"auth":"c2hvcDpzM2NyM3Q="}}}`)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "nothing"}},
	} {
		_, err := cs.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{})
		f.check("create secret "+s.Name, err)
	}
	_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder"},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "registry"}}}, metav1.CreateOptions{})
	f.check("create serviceaccount", err)
}

func (f *tableFixture) storage() {
	ctx, cs, ns := f.t.Context(), f.cs, f.ns
	pv := f.run + "-pv"
	_, err := cs.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pv, Labels: f.labels(nil)},
		Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany, corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/" + f.run}},
			StorageClassName:       "manual", ClaimRef: &corev1.ObjectReference{Namespace: ns, Name: "data-bound"}},
	}, metav1.CreateOptions{})
	f.check("create persistentvolume", err)
	claim := func(name string, class *string, size string, modes ...corev1.PersistentVolumeAccessMode) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: class, AccessModes: modes,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}}}
	}
	bound := claim("data-bound", ptr("manual"), "8Gi", corev1.ReadWriteOnce)
	bound.Spec.VolumeName = pv
	legacy := claim("data-legacy", nil, "1500Mi", corev1.ReadOnlyMany)
	legacy.Annotations = map[string]string{corev1.BetaStorageClassAnnotation: "slow"}
	legacy.Spec.VolumeMode = ptr(corev1.PersistentVolumeBlock)
	gold := claim("data-gold", ptr("fast"), "5Gi", corev1.ReadWriteOncePod)
	gold.Spec.VolumeAttributesClassName = ptr("gold")
	held := claim("data-held", ptr("fast"), "1Gi", corev1.ReadWriteOnce)
	held.Finalizers = []string{tableFinalize}
	for _, c := range []*corev1.PersistentVolumeClaim{bound, legacy, gold, held, claim("data-default", nil, "2Gi", corev1.ReadWriteOnce)} {
		_, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, c, metav1.CreateOptions{})
		f.check("create persistentvolumeclaim "+c.Name, err)
	}
	f.check("delete persistentvolumeclaim", cs.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "data-held", metav1.DeleteOptions{}))
}

func (f *tableFixture) events() {
	ctx, cs, ns := f.t.Context(), f.cs, f.ns
	pod := corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "api-crashloop", APIVersion: "v1", FieldPath: "spec.containers{api}"}
	for _, e := range []*corev1.Event{
		{ObjectMeta: metav1.ObjectMeta{Name: "api-crashloop.backoff"}, InvolvedObject: pod, Reason: "BackOff", Type: corev1.EventTypeWarning,
			Message: "  Back-off restarting failed container api in pod api-crashloop\n", Count: 42, FirstTimestamp: f.ago(time.Hour),
			LastTimestamp: f.ago(2 * time.Minute), Source: corev1.EventSource{Component: "kubelet", Host: "kwok-node-1"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "web.synced"}, InvolvedObject: corev1.ObjectReference{Kind: "Deployment", Namespace: ns, Name: "web", APIVersion: "apps/v1"},
			Reason: "Synced", Type: corev1.EventTypeNormal, Message: "Deployment synced",
			EventTime: metav1.NewMicroTime(f.now.Add(-30 * time.Minute)), Series: &corev1.EventSeries{Count: 5, LastObservedTime: metav1.NewMicroTime(f.now.Add(-10 * time.Second))},
			ReportingController: "example.com/operator", ReportingInstance: "operator-7f9d", Action: "Reconcile"},
		{ObjectMeta: metav1.ObjectMeta{Name: "namespace.checked"}, InvolvedObject: corev1.ObjectReference{Kind: "Namespace", Namespace: ns, Name: ns, APIVersion: "v1"},
			Reason: "Checked", Type: corev1.EventTypeNormal, Message: "quota checked", EventTime: metav1.NewMicroTime(f.now.Add(-90 * time.Second)),
			ReportingController: "table-test", ReportingInstance: "table-test-1", Action: "Check"},
		{ObjectMeta: metav1.ObjectMeta{Name: "fleet.kindonly"}, InvolvedObject: corev1.ObjectReference{Kind: "Cluster", Namespace: ns},
			Reason: "Upgraded", Type: corev1.EventTypeNormal, Message: "control plane upgraded", FirstTimestamp: f.ago(3 * time.Hour),
			Source: corev1.EventSource{Component: "fleet-manager"}},
	} {
		_, err := cs.CoreV1().Events(ns).Create(ctx, e, metav1.CreateOptions{})
		f.check("create event "+e.Name, err)
	}
	_, err := cs.EventsV1().Events(ns).Create(ctx, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "db.scaled"},
		EventTime: metav1.NewMicroTime(f.now.Add(-5 * time.Minute)), ReportingController: "example.com/autoscaler", ReportingInstance: "autoscaler-0",
		Action: "Scale", Reason: "Scaled", Type: corev1.EventTypeNormal, Note: "scaled db to 2 replicas",
		Regarding: corev1.ObjectReference{Kind: "StatefulSet", Namespace: ns, Name: "db", APIVersion: "apps/v1"}}, metav1.CreateOptions{})
	f.check("create events.k8s.io event", err)
}

// namespaces adds a namespace that stays Terminating: a finalizer holds one of its ConfigMaps.
func (f *tableFixture) namespaces() {
	ctx, cs := f.t.Context(), f.cs
	gone := f.ns + "-gone"
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gone, Labels: f.labels(nil)}}, metav1.CreateOptions{})
	f.check("create namespace", err)
	_, err = cs.CoreV1().ConfigMaps(gone).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{tableFinalize}}}, metav1.CreateOptions{})
	f.check("create held configmap", err)
	f.check("delete namespace", cs.CoreV1().Namespaces().Delete(ctx, gone, metav1.DeleteOptions{}))
}

// settle waits for the states the controllers and kwok reach: rolled-out workloads, finished Jobs,
// a bound claim, the scheduler's verdict on the Pods it cannot place.
func (f *tableFixture) settle() {
	cs, ns := f.cs, f.ns
	pollUntil(f.t, "workloads settled", 3*time.Minute, func(ctx context.Context) (bool, error) {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil || d.Status.AvailableReplicas != 3 {
			return false, nil
		}
		s, err := cs.AppsV1().StatefulSets(ns).Get(ctx, "db", metav1.GetOptions{})
		if err != nil || s.Status.ReadyReplicas != 2 {
			return false, nil
		}
		ds, err := cs.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
		if err != nil || ds.Status.NumberAvailable == 0 || ds.Status.NumberAvailable != ds.Status.DesiredNumberScheduled {
			return false, nil
		}
		rs, err := cs.AppsV1().ReplicaSets(ns).Get(ctx, "legacy", metav1.GetOptions{})
		if err != nil || rs.Status.ReadyReplicas != 2 {
			return false, nil
		}
		for _, name := range []string{"backup", "fanout"} {
			j, err := cs.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil || j.Status.CompletionTime == nil {
				return false, nil
			}
		}
		c, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-bound", metav1.GetOptions{})
		if err != nil || c.Status.Phase != corev1.ClaimBound {
			return false, nil
		}
		for _, name := range []string{"gated", "unschedulable"} {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil || len(p.Status.Conditions) == 0 {
				return false, nil
			}
		}
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "shop-web", metav1.GetOptions{})
		if err != nil || p.Status.Phase != corev1.PodRunning {
			return false, nil
		}
		n, err := cs.CoreV1().Namespaces().Get(ctx, ns+"-gone", metav1.GetOptions{})
		return err == nil && n.Status.Phase == corev1.NamespaceTerminating, nil
	})
}

func (f *tableFixture) crdName(plural string) string {
	return strings.ReplaceAll(f.run, "-", "") + plural + ".table.kubesearch.io"
}

// compareCustomResources serves two CRDs, one with additionalPrinterColumns of every type and one
// without, and compares their Tables with ForCRD's.
func (f *tableFixture) compareCustomResources() {
	t, cs := f.t, f.cs
	rc := cs.CoreV1().RESTClient()
	group := "table.kubesearch.io"
	schema := json.RawMessage(`{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}`)
	columns := []table.PrinterColumn{
		{Name: "Phase", Type: "string", JSONPath: ".status.phase"},
		{Name: "Replicas", Type: "integer", Format: "int32", Description: "Desired replicas", JSONPath: ".spec.replicas"},
		{Name: "Ratio", Type: "number", JSONPath: ".status.ratio"},
		{Name: "Enabled", Type: "boolean", JSONPath: ".spec.enabled"},
		{Name: "Endpoint", Type: "string", Priority: 1, JSONPath: ".status.endpoints[0].url"},
		{Name: "Labels", Type: "string", Priority: 1, JSONPath: ".metadata.labels"},
		{Name: "Sizes", Type: "string", Priority: 1, JSONPath: ".spec.sizes"},
		{Name: "Count", Type: "string", JSONPath: ".spec.replicas"},
		{Name: "Big", Type: "string", Priority: 1, JSONPath: ".spec.big"},
		{Name: "Ready", Type: "string", JSONPath: `.status.conditions[?(@.type=="Ready")].status`},
		{Name: "Synced", Type: "date", JSONPath: ".status.lastSync"},
		{Name: "Broken", Type: "date", JSONPath: ".status.phase"},
		{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
	}
	for _, c := range []struct {
		plural  string
		columns []table.PrinterColumn
	}{{"widgets", columns}, {"gadgets", nil}} {
		crd := f.crdName(c.plural)
		plural := strings.TrimSuffix(crd, "."+group)
		version := map[string]any{"name": "v1", "served": true, "storage": true, "schema": schema}
		if c.columns != nil {
			version["additionalPrinterColumns"] = c.columns
		}
		body, _ := json.Marshal(map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": crd, "labels": f.labels(nil)},
			"spec": map[string]any{"group": group, "scope": "Namespaced", "versions": []any{version},
				"names": map[string]any{"plural": plural, "singular": strings.TrimSuffix(plural, "s"), "kind": "T" + strings.TrimSuffix(plural, "s")}}})
		err := rc.Post().AbsPath("/apis/apiextensions.k8s.io/v1/customresourcedefinitions").Body(body).SetHeader("Content-Type", "application/json").Do(t.Context()).Error()
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create CRD %s: %v", crd, err)
		}
		// Read the columns back as the query API would find them in the CRD.
		var served []table.PrinterColumn
		pollUntil(t, "CRD "+crd+" established", time.Minute, func(ctx context.Context) (bool, error) {
			raw, err := rc.Get().AbsPath("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + crd).DoRaw(ctx)
			if err != nil {
				return false, nil
			}
			var got struct {
				Spec struct {
					Versions []struct {
						AdditionalPrinterColumns []table.PrinterColumn `json:"additionalPrinterColumns"`
					} `json:"versions"`
				} `json:"spec"`
				Status struct {
					Conditions []metav1.Condition `json:"conditions"`
				} `json:"status"`
			}
			if err := json.Unmarshal(raw, &got); err != nil {
				return false, err
			}
			served = got.Spec.Versions[0].AdditionalPrinterColumns
			return conditionTrue(got.Status.Conditions, "Established"), nil
		})
		path := "/apis/" + group + "/v1/namespaces/" + f.ns + "/" + plural
		kind := "T" + strings.TrimSuffix(plural, "s")
		for i, obj := range []string{
			`{"spec":{"replicas":3,"enabled":true,"sizes":[1,2.5,"x"],"big":12345678901234567890},"status":{"phase":"Ready","ratio":0.75,"lastSync":"` + f.ago(7*time.Minute).UTC().Format(time.RFC3339) + `",
			  "endpoints":[{"url":"https://a.example.com"},{"url":"https://b.example.com"}],"conditions":[{"type":"Synced","status":"True"},{"type":"Ready","status":"False"}]}}`,
			`{"spec":{"replicas":2.0,"enabled":"yes"},"status":{"phase":3,"ratio":2,"lastSync":"not a date"}}`,
			`{"metadata":{"labels":{"tier":"gold","app":"w"}},"spec":{"replicas":null}}`,
			`{}`,
		} {
			var o map[string]any
			f.check("fixture", json.Unmarshal([]byte(obj), &o))
			md, _ := o["metadata"].(map[string]any)
			if md == nil {
				md = map[string]any{}
			}
			md["name"] = fmt.Sprintf("%s-%d", c.plural, i)
			o["metadata"], o["apiVersion"], o["kind"] = md, group+"/v1", kind
			b, _ := json.Marshal(o)
			pollUntil(t, "create custom resource", time.Minute, func(ctx context.Context) (bool, error) {
				err := rc.Post().AbsPath(path).Body(b).SetHeader("Content-Type", "application/json").Do(ctx).Error()
				return err == nil || apierrors.IsAlreadyExists(err), nil // the new resource may not be served yet
			})
		}
		t.Run(c.plural, func(t *testing.T) {
			p, err := table.ForCRD(served)
			if err != nil {
				t.Fatal(err)
			}
			compareTable(t, cs, tableCase{name: "crd-" + c.plural, group: group, resource: plural, path: path, customResource: true, printerColumns: served}, p)
		})
	}
}

func conditionTrue(conds []metav1.Condition, typ string) bool {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}
