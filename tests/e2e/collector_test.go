//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/tests/testbed"
)

// pairKey identifies one selected resource of one cluster in the event stream.
type pairKey struct {
	cluster string
	gr      schema.GroupResource
}

func pairOf(ev *envelope.Event) pairKey {
	return pairKey{ev.Cluster, schema.GroupResource{Group: ev.Group, Resource: ev.Resource}}
}

func startCollector(t *testing.T, env *testbed.Env, registries, topic string, extra ...string) (*process, string) {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	args := append([]string{"collector", "--registry", registries, "--kubeconfig", env.Kubeconfig,
		"--kafka-brokers", strings.Join(env.KafkaBrokers, ","), "--topic", topic, "--listen", addr,
		"--reload-interval", "1s", "--discovery-interval", "5s", "--page-size", "7"}, extra...)
	p := startProcess(t, "collector", args...)
	return p, "http://" + addr
}

// syncsOf returns the SYNC markers per pair, in stream order.
func syncsOf(evs []*envelope.Event) map[pairKey][]*envelope.Event {
	out := map[pairKey][]*envelope.Event{}
	for _, ev := range evs {
		if ev.Type == envelope.Sync {
			out[pairOf(ev)] = append(out[pairOf(ev)], ev)
		}
	}
	return out
}

func allSynced(env *testbed.Env, f fleet, minSyncs int) func([]*envelope.Event) bool {
	return func(evs []*envelope.Event) bool {
		syncs := syncsOf(evs)
		for _, c := range env.Clusters {
			for gvr := range f.selected() {
				if len(syncs[pairKey{c, gvr.GroupResource()}]) < minSyncs {
					return false
				}
			}
		}
		return true
	}
}

// The first list of every selected pair publishes exactly the objects the member holds at the list's
// resourceVersion, then one SYNC counting them; unselected kinds and namespaces publish nothing; after
// churn, the stream converges to the members' state.
func TestCollectorPublishesFleet(t *testing.T) {
	env := testbed.Get(t)
	f := seedFleet(t, env)
	waitRolledOut(t, env, f.shop)
	topic := uniqueName("collector-fleet")
	log := tailTopic(t, env.KafkaBrokers, topic)
	_, base := startCollector(t, env, f.registries(t), topic)
	waitHTTP(t, base+"/readyz", 2*time.Minute)
	evs := log.waitFor(t, "a SYNC of every selected pair", 2*time.Minute, allSynced(env, f, 1))

	for _, cluster := range env.Clusters {
		dyn := dynamic.NewForConfigOrDie(env.RESTConfig(t, cluster))
		for gvr, ns := range f.selected() {
			pk := pairKey{cluster, gvr.GroupResource()}
			t.Run(fmt.Sprintf("%s/%s", cluster, gvr.Resource), func(t *testing.T) {
				first := syncsOf(evs)[pk][0]
				var added []string
				for _, ev := range evs {
					if pairOf(ev) == pk && ev.Epoch == first.Epoch && ev.Type == envelope.Added {
						added = append(added, ev.UID)
						if ns != "" && ev.Namespace != ns {
							t.Errorf("ADDED %s/%s outside the selected namespace %s", ev.Namespace, ev.Name, ns)
						}
					}
					if pairOf(ev) == pk && ev.Type == envelope.Sync && ev.Epoch == first.Epoch && ev != first {
						t.Errorf("a second SYNC for epoch %d", ev.Epoch)
					}
				}
				// The member's own answer at exactly the list's resourceVersion.
				truth, err := resourceIn(dyn, gvr, ns).List(t.Context(), metav1.ListOptions{
					ResourceVersion: first.ListResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
				if err != nil {
					t.Fatalf("list at %s: %v", first.ListResourceVersion, err)
				}
				var want []string
				for _, it := range truth.Items {
					want = append(want, string(it.GetUID()))
				}
				slices.Sort(added)
				slices.Sort(want)
				if !slices.Equal(added, want) {
					t.Fatalf("first epoch ADDED %d uids, member lists %d at rv %s:\n got %v\nwant %v", len(added), len(want), first.ListResourceVersion, added, want)
				}
				if first.Count == nil || *first.Count != len(want) {
					t.Fatalf("SYNC count %v, want %d", first.Count, len(want))
				}
				if len(want) == 0 {
					t.Fatalf("the fleet has no %s in %s: the test data is wrong", gvr.Resource, cluster)
				}
			})
		}
	}
	for _, ev := range evs {
		if _, ok := f.selected()[schema.GroupVersionResource{Group: ev.Group, Version: ev.Version, Resource: ev.Resource}]; !ok {
			t.Fatalf("event for unselected resource %s/%s/%s", ev.Group, ev.Version, ev.Resource)
		}
		if ev.Resource == "secrets" && ev.Type != envelope.Sync && (strings.Contains(string(ev.Object), "aHVudGVyMg") || !strings.Contains(string(ev.Object), `"password":""`)) {
			t.Fatalf("secret published without redaction: %s", ev.Object)
		}
		if strings.Contains(string(ev.Object), `"managedFields"`) {
			t.Fatalf("%s %s/%s published with managedFields", ev.Resource, ev.Namespace, ev.Name)
		}
	}

	churn(t, env, f, 30)
	assertConverged(t, env, f, log, 2*time.Minute)
}

// churn creates, updates and deletes objects of the selected kinds in every member.
func churn(t *testing.T, env *testbed.Env, f fleet, rounds int) {
	t.Helper()
	for i := range rounds {
		for _, cluster := range env.Clusters {
			dyn := dynamic.NewForConfigOrDie(env.RESTConfig(t, cluster))
			cms := dyn.Resource(gvrConfigMaps).Namespace(f.shop)
			name := fmt.Sprintf("churn-%d", i)
			env.KubectlRun(t, cluster, []byte(fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: %s, labels: {app.kubernetes.io/name: churn}}\ndata: {round: \"%d\"}\n", name, f.shop, i)), "apply", "-f", "-")
			env.KubectlRun(t, cluster, nil, "-n", f.shop, "label", "configmap", fmt.Sprintf("web-config-%d", i%5), fmt.Sprintf("churn.example.com/round=%d", i), "--overwrite")
			if i%3 == 2 {
				_ = cms.Delete(t.Context(), fmt.Sprintf("churn-%d", i-1), metav1.DeleteOptions{})
			}
			if i%10 == 5 {
				env.KubectlRun(t, cluster, nil, "-n", f.shop, "scale", "deployment/web", fmt.Sprintf("--replicas=%d", 1+i%4))
				env.KubectlRun(t, cluster, nil, "-n", f.shop, "annotate", "widget/widget-0", fmt.Sprintf("round=%d", i), "--overwrite")
			}
		}
	}
}

// assertConverged waits until the stream tells each member's current state: every object's last
// record carries its current resourceVersion, and every uid that is gone ends in DELETED or is missing
// from a later epoch's SYNC.
func assertConverged(t *testing.T, env *testbed.Env, f fleet, log *eventLog, timeout time.Duration) {
	t.Helper()
	var problems []string
	deadline := time.Now().Add(timeout)
	for {
		problems = convergenceProblems(t, env, f, log.snapshot())
		if len(problems) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	if len(problems) > 0 {
		if len(problems) > 20 {
			problems = append(problems[:20], fmt.Sprintf("... and %d more", len(problems)-20))
		}
		t.Fatalf("the stream did not converge to the members' state within %s:\n%s", timeout, strings.Join(problems, "\n"))
	}
}

func convergenceProblems(t *testing.T, env *testbed.Env, f fleet, evs []*envelope.Event) []string {
	lastByUID := map[string]*envelope.Event{}
	syncs := syncsOf(evs)
	for _, ev := range evs {
		if ev.UID != "" {
			lastByUID[ev.Cluster+"/"+ev.UID] = ev
		}
	}
	var problems []string
	current := map[string]bool{}
	for _, cluster := range env.Clusters {
		dyn := dynamic.NewForConfigOrDie(env.RESTConfig(t, cluster))
		for gvr, ns := range f.selected() {
			list, err := resourceIn(dyn, gvr, ns).List(t.Context(), metav1.ListOptions{})
			if err != nil {
				return []string{fmt.Sprintf("list %s in %s: %v", gvr.Resource, cluster, err)}
			}
			for _, it := range list.Items {
				k := cluster + "/" + string(it.GetUID())
				current[k] = true
				ev := lastByUID[k]
				switch {
				case ev == nil:
					problems = append(problems, fmt.Sprintf("%s %s %s/%s: never published", cluster, gvr.Resource, it.GetNamespace(), it.GetName()))
				case ev.Type == envelope.Deleted || ev.ResourceVersion != it.GetResourceVersion():
					problems = append(problems, fmt.Sprintf("%s %s %s/%s: last record %s rv %s, member has rv %s", cluster, gvr.Resource, it.GetNamespace(), it.GetName(), ev.Type, ev.ResourceVersion, it.GetResourceVersion()))
				}
			}
		}
	}
	for k, ev := range lastByUID {
		if current[k] || ev.Type == envelope.Deleted {
			continue
		}
		later := slices.ContainsFunc(syncs[pairOf(ev)], func(s *envelope.Event) bool { return s.Epoch > ev.Epoch })
		if !later {
			problems = append(problems, fmt.Sprintf("%s %s %s/%s (uid %s): gone from the member, but its last record is %s and no later epoch's SYNC excludes it", ev.Cluster, ev.Resource, ev.Namespace, ev.Name, ev.UID, ev.Type))
		}
	}
	slices.Sort(problems)
	return problems
}

func resourceIn(dyn dynamic.Interface, gvr schema.GroupVersionResource, ns string) dynamic.ResourceInterface {
	if ns == "" {
		return dyn.Resource(gvr)
	}
	return dyn.Resource(gvr).Namespace(ns)
}

// A collector paused past its watch, while objects are deleted and the member's etcd is compacted,
// re-lists on SIGCONT: DELETED for what vanished, then a new SYNC. A real watch only expires after
// 5–10 minutes (client-go's minimum watch timeout), so the test ends the watch the way an expiry
// does — the member's apiserver drops it — by restarting that apiserver while the collector is paused;
// the compaction makes the old resourceVersion unservable by etcd as well.
func TestCollectorRelistsAfterPauseAndCompaction(t *testing.T) {
	env := testbed.Get(t)
	f := seedFleet(t, env)
	topic := uniqueName("collector-pause")
	log := tailTopic(t, env.KafkaBrokers, topic)
	p, base := startCollector(t, env, f.registries(t), topic)
	waitHTTP(t, base+"/readyz", 2*time.Minute)
	log.waitFor(t, "first SYNCs", 2*time.Minute, allSynced(env, f, 1))

	cluster := env.Clusters[0]
	pk := pairKey{cluster, gvrConfigMaps.GroupResource()}
	before := len(syncsOf(log.snapshot())[pk])
	dyn := dynamic.NewForConfigOrDie(env.RESTConfig(t, cluster))
	victims := []string{"web-config-1", "web-config-3"}
	var victimUIDs []string
	for _, name := range victims {
		cm, err := dyn.Resource(gvrConfigMaps).Namespace(f.shop).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		victimUIDs = append(victimUIDs, string(cm.GetUID()))
	}

	p.signal(syscall.SIGSTOP)
	// The watch ends first, so the deletes cannot reach the collector through it.
	env.Restart(t, cluster+"-apiserver")
	for _, name := range victims {
		if err := dyn.Resource(gvrConfigMaps).Namespace(f.shop).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	env.CompactEtcd(t, cluster)
	p.signal(syscall.SIGCONT)

	evs := log.waitFor(t, "a new SYNC of the paused pair", 2*time.Minute, func(evs []*envelope.Event) bool {
		return len(syncsOf(evs)[pk]) > before
	})
	newSync := syncsOf(evs)[pk][before]
	for _, uid := range victimUIDs {
		idx := slices.IndexFunc(evs, func(ev *envelope.Event) bool { return ev.UID == uid && ev.Type == envelope.Deleted })
		if idx < 0 {
			t.Fatalf("no DELETED for %s, deleted while the collector was paused", uid)
		}
		if evs[idx].Epoch != newSync.Epoch {
			t.Fatalf("DELETED of %s has epoch %d, want the re-list's %d", uid, evs[idx].Epoch, newSync.Epoch)
		}
	}
	assertConverged(t, env, f, log, time.Minute)
}

// A member's apiserver killed mid-churn, then Kafka killed mid-churn, each with a one-event publish
// buffer: nothing is lost, the stream converges.
func TestCollectorSurvivesApiserverAndKafkaKills(t *testing.T) {
	env := testbed.Get(t)
	f := seedFleet(t, env)
	topic := uniqueName("collector-faults")
	log := tailTopic(t, env.KafkaBrokers, topic)
	_, base := startCollector(t, env, f.registries(t), topic, "--publish-buffer", "1", "--publish-batch", "1")
	waitHTTP(t, base+"/readyz", 2*time.Minute)
	log.waitFor(t, "first SYNCs", 2*time.Minute, allSynced(env, f, 1))

	cluster := env.Clusters[1]
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(2 * time.Second)
		env.Kill(t, cluster+"-apiserver")
		time.Sleep(3 * time.Second)
		env.Start(t, cluster+"-apiserver")
	}()
	churnTolerant(t, env, f, 15)
	<-done
	assertConverged(t, env, f, log, 3*time.Minute)

	done = make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(2 * time.Second)
		env.Kill(t, "kafka")
		time.Sleep(5 * time.Second)
		env.Start(t, "kafka")
	}()
	churnTolerant(t, env, f, 15)
	<-done
	assertConverged(t, env, f, log, 3*time.Minute)
}

// churnTolerant churns like churn but keeps going when a member is briefly down.
func churnTolerant(t *testing.T, env *testbed.Env, f fleet, rounds int) {
	t.Helper()
	for i := range rounds {
		for _, cluster := range env.Clusters {
			manifest := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fault-%d, namespace: %s}\ndata: {round: \"%d\"}\n", i, f.shop, i)
			cmd := exec.CommandContext(t.Context(), env.Kubectl, "--kubeconfig", env.Kubeconfig, "--context", cluster, "apply", "--request-timeout=5s", "-f", "-")
			cmd.Stdin = strings.NewReader(manifest)
			_ = cmd.Run() // the member may be down right now: that is the point
			if i%2 == 1 {
				del := exec.CommandContext(t.Context(), env.Kubectl, "--kubeconfig", env.Kubeconfig, "--context", cluster, "-n", f.shop, "delete", "configmap", fmt.Sprintf("fault-%d", i-1), "--request-timeout=5s", "--ignore-not-found")
				_ = del.Run()
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// A selector added to a registry file starts its collection (a SYNC appears); removed again, its
// documents are PURGEd. The collector never restarts.
func TestCollectorReloadsRegistries(t *testing.T) {
	env := testbed.Get(t)
	f := seedFleet(t, env)
	dir := f.registries(t)
	topic := uniqueName("collector-reload")
	log := tailTopic(t, env.KafkaBrokers, topic)
	_, base := startCollector(t, env, dir, topic)
	waitHTTP(t, base+"/readyz", 2*time.Minute)
	log.waitFor(t, "first SYNCs", 2*time.Minute, allSynced(env, f, 1))

	services := fmt.Sprintf(`apiVersion: search.karmada.io/v1alpha1
kind: ResourceRegistry
metadata: {name: fleet-services}
spec:
  targetCluster: {clusterNames: [%s]}
  resourceSelectors:
  - {apiVersion: v1, kind: ServiceAccount, namespace: %s}
`, env.Clusters[0], f.payments)
	writeFile(t, filepath.Join(dir, "services.yaml"), services)
	pk := pairKey{env.Clusters[0], schema.GroupResource{Resource: "serviceaccounts"}}
	log.waitFor(t, "a SYNC of the added selection", time.Minute, func(evs []*envelope.Event) bool {
		return len(syncsOf(evs)[pk]) == 1
	})
	for _, ev := range log.snapshot() {
		if ev.Resource == "serviceaccounts" && (ev.Cluster != env.Clusters[0] || (ev.Type != envelope.Sync && ev.Namespace != f.payments)) {
			t.Fatalf("serviceaccount event outside the selection: %s %s/%s in %s", ev.Type, ev.Namespace, ev.Name, ev.Cluster)
		}
	}

	if err := os.Remove(filepath.Join(dir, "services.yaml")); err != nil {
		t.Fatal(err)
	}
	evs := log.waitFor(t, "a PURGE of the removed selection", time.Minute, func(evs []*envelope.Event) bool {
		return slices.ContainsFunc(evs, func(ev *envelope.Event) bool { return ev.Type == envelope.Purge })
	})
	purge := evs[slices.IndexFunc(evs, func(ev *envelope.Event) bool { return ev.Type == envelope.Purge })]
	if purge.Cluster != env.Clusters[0] || purge.Kind != "ServiceAccount" || purge.Resource != "serviceaccounts" || purge.Namespace != f.payments {
		t.Fatalf("PURGE = %+v, want ServiceAccount of %s in namespace %s", purge, env.Clusters[0], f.payments)
	}
}

// Invalid configuration files stop the collector at start with every error, each naming its field.
func TestCollectorRejectsInvalidConfiguration(t *testing.T) {
	env := testbed.Get(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "bad.yaml"), `apiVersion: search.karmada.io/v1alpha1
kind: ResourceRegistry
metadata: {name: Bad_Name}
spec:
  targetCluster:
    fieldSelector:
      matchExpressions:
      - {key: planet, operator: In, values: [earth]}
  resourceSelectors:
  - {apiVersion: apps/v1/extra, kind: Deployment}
  - {apiVersion: v1, kind: ConfigMap, namespace: "Not A Namespace"}
`)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubesearchBinary(t), "collector", "--registry", dir, "--kubeconfig", env.Kubeconfig,
		"--kafka-brokers", strings.Join(env.KafkaBrokers, ","), "--listen", "")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err == nil || !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("collector accepted an invalid registry (err %v):\n%s", err, out)
	}
	for _, want := range []string{"metadata.name", "spec.resourceSelectors[0].apiVersion", "spec.resourceSelectors[1].namespace", "spec.targetCluster.fieldSelector"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("error output does not name %s:\n%s", want, out)
		}
	}
}

// A kind no member serves yet is reported Failed with the reason; once its CRD is installed in one
// member, the next discovery starts its collection there, and only there.
func TestCollectorPicksUpCRDInstalledLater(t *testing.T) {
	env := testbed.Get(t)
	group := uniqueName("g") + ".example.com"
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "gadgets.yaml"), fmt.Sprintf(`apiVersion: search.karmada.io/v1alpha1
kind: ResourceRegistry
metadata: {name: gadgets}
spec:
  resourceSelectors:
  - {apiVersion: %s/v1, kind: Gadget}
`, group))
	topic := uniqueName("collector-crd")
	log := tailTopic(t, env.KafkaBrokers, topic)
	_, base := startCollector(t, env, dir, topic)
	waitHTTP(t, base+"/readyz", 2*time.Minute)
	status := string(mustHTTP(t, "GET", base+"/status", ""))
	if !strings.Contains(status, `"state": "Failed"`) || !strings.Contains(status, "the server doesn't have a resource type Gadget."+group) {
		t.Fatalf("/status does not report the unserved kind as Failed with the reason:\n%s", status)
	}

	cluster := env.Clusters[1]
	crd := strings.NewReplacer("widgets.example.com", "gadgets."+group, "group: example.com", "group: "+group,
		"Widget", "Gadget", "widgets", "gadgets", "widget", "gadget").Replace(widgetCRD)
	env.KubectlRun(t, cluster, []byte(crd), "apply", "-f", "-")
	t.Cleanup(func() {
		cmd := exec.Command(env.Kubectl, "--kubeconfig", env.Kubeconfig, "--context", cluster, "delete", "crd", "gadgets."+group)
		_ = cmd.Run()
	})
	env.KubectlRun(t, cluster, nil, "wait", "--for=condition=Established", "--timeout=60s", "crd/gadgets."+group)
	applyFresh(t, env, cluster, []byte("apiVersion: "+group+"/v1\nkind: Gadget\nmetadata: {name: g1, namespace: default}\nspec: {size: small}\n"))

	evs := log.waitFor(t, "the new kind's first SYNC", time.Minute, func(evs []*envelope.Event) bool {
		return slices.ContainsFunc(evs, func(ev *envelope.Event) bool { return ev.Type == envelope.Sync })
	})
	for _, ev := range evs {
		if ev.Cluster != cluster || ev.Group != group || ev.Resource != "gadgets" {
			t.Fatalf("unexpected event %s %s %s/%s", ev.Type, ev.Cluster, ev.Group, ev.Resource)
		}
	}
	if !slices.ContainsFunc(evs, func(ev *envelope.Event) bool { return ev.Type == envelope.Added && ev.Name == "g1" }) {
		t.Fatal("the Gadget created with its CRD was not published")
	}
}
