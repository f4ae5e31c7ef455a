//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/registry"
	"github.com/kubesearch/kubesearch/queryapi"
	"github.com/kubesearch/kubesearch/simulate"
	"github.com/kubesearch/kubesearch/tests/testbed"
)

// simStatus is a simulator's /status: the collectors' rows of the simulated pairs and the report.
type simStatus struct {
	Items      []registry.ResourceStatus `json:"items"`
	Simulation simulate.Report           `json:"simulation"`
}

func getSimStatus(t *testing.T, base string) simStatus {
	t.Helper()
	var st simStatus
	if err := json.Unmarshal(mustHTTP(t, http.MethodGet, base+"/status", ""), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// startSimulator runs `kubesearch simulate` with /status on addr and waits until its lists are
// published and its churn is over.
func startSimulator(t *testing.T, env *testbed.Env, topic, addr string, args ...string) (*process, simStatus) {
	t.Helper()
	p := startProcess(t, "simulate", append([]string{"simulate", "--kafka-brokers", strings.Join(env.KafkaBrokers, ","),
		"--topic", topic, "--listen", addr}, args...)...)
	base := "http://" + addr
	waitHTTP(t, base+"/readyz", 3*time.Minute)
	var st simStatus
	pollUntil(t, "the simulation's churn to end", 2*time.Minute, func(context.Context) (bool, error) {
		st = getSimStatus(t, base)
		return st.Simulation.Phase == "done", nil
	})
	return p, st
}

// simPairKey names a (cluster, group, resource).
func simPairKey(cluster, group, resource string) string {
	return cluster + " " + group + "/" + resource
}

// fleetProblems compares the query API's fleet status with what the simulator reports it wrote:
// every simulated pair Running, listed, indexed up to the resourceVersion of its last event, holding
// as many documents as the cluster holds objects; and the real members' pairs Running beside them.
func fleetProblems(t *testing.T, base string, rows []registry.ResourceStatus, members []string) []string {
	var fleet queryapi.FleetStatus
	if err := json.Unmarshal(mustHTTP(t, http.MethodGet, base+queryapi.PathFleet, ""), &fleet); err != nil {
		t.Fatal(err)
	}
	got := map[string]queryapi.PairStatus{}
	for _, p := range fleet.Items {
		got[simPairKey(p.Cluster, p.Group, p.Resource)] = p
	}
	var problems []string
	for _, r := range rows {
		k := simPairKey(r.Cluster, r.Group, r.Resource)
		p, ok := got[k]
		switch {
		case !ok:
			problems = append(problems, k+": not in the fleet status")
		case p.State != registry.StateRunning || p.Listing:
			problems = append(problems, fmt.Sprintf("%s: state %s, listing %t", k, p.State, p.Listing))
		case fmt.Sprint(p.IndexedResourceVersion) != r.ResourceVersion:
			problems = append(problems, fmt.Sprintf("%s: indexed up to %d, the simulator's last event is at %s", k, p.IndexedResourceVersion, r.ResourceVersion))
		case p.Documents == nil || *p.Documents != int64(r.TotalNum):
			problems = append(problems, fmt.Sprintf("%s: %v documents, the simulated cluster holds %d", k, p.Documents, r.TotalNum))
		}
		delete(got, k)
	}
	for _, m := range members {
		if p := got[simPairKey(m, "", "configmaps")]; p.State != registry.StateRunning || p.Documents == nil || *p.Documents == 0 {
			problems = append(problems, fmt.Sprintf("member %s: configmaps %+v", m, p))
		}
	}
	for k, p := range got {
		if strings.HasPrefix(k, simulate.DefaultClusterPrefix) {
			problems = append(problems, fmt.Sprintf("%s: in the fleet status (%s, %v documents), not simulated", k, p.State, p.Documents))
		}
	}
	slices.Sort(problems)
	return problems
}

func waitFleetMatches(t *testing.T, base string, rows []registry.ResourceStatus, members []string, timeout time.Duration) {
	t.Helper()
	var problems []string
	deadline := time.Now().Add(timeout)
	for {
		if problems = fleetProblems(t, base, rows, members); len(problems) == 0 {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	n := len(problems)
	if n > 20 {
		problems = append(problems[:20], fmt.Sprintf("... and %d more", n-20))
	}
	t.Fatalf("the fleet status does not match the simulation after %s (%d problems):\n%s", timeout, n, strings.Join(problems, "\n"))
}

// indexCounts counts the documents of the prefix's indices by cluster and kind, from OpenSearch.
func indexCounts(t *testing.T, env *testbed.Env, prefix string) map[string]int64 {
	t.Helper()
	url := env.OpenSearchURL + "/" + prefix + "-kubernetes-*"
	mustHTTP(t, http.MethodPost, url+"/_refresh", "")
	body := mustHTTP(t, http.MethodPost, url+"/_search", `{"size":0,"aggs":{"c":{"terms":{"field":"cluster","size":1000},
		"aggs":{"k":{"terms":{"field":"kind","size":100}}}}}}`)
	out := map[string]int64{}
	for _, c := range gjson.GetBytes(body, "aggregations.c.buckets").Array() {
		for _, k := range c.Get("k.buckets").Array() {
			out[c.Get("key").String()+" "+k.Get("key").String()] = k.Get("doc_count").Int()
		}
	}
	return out
}

// facadePath is a resource's collection path in a facade view ("" the fleet, "/qualified",
// "/clusters/<name>").
func facadePath(view, group, version, namespace, resource string) string {
	p := view + "/apis/" + group + "/" + version
	if group == "" {
		p = view + "/api/" + version
	}
	if namespace != "" {
		p += "/namespaces/" + namespace
	}
	return p + "/" + resource
}

// The fleet simulator, beside a real collector of the test bed's members, through Kafka, the
// indexer, OpenSearch and the query API (issue 25): every simulated cluster's pairs are Running in
// the fleet status, indexed up to the resourceVersion of their last event, with as many documents
// as the simulator says its clusters hold (OpenSearch counted by cluster and kind agrees); a
// qualified facade LIST returns the Deployment every cluster runs, once per cluster, and the
// custom resources of the clusters serving their version; the churn's last changes are what the
// facade serves; started again without ConfigMaps, the simulator purges them from every simulated
// cluster while the members' stay.
func TestSimulatedFleet(t *testing.T) {
	env := testbed.Get(t)
	const clusters, objects = 20, 500
	topic, prefix := uniqueName("sim"), uniqueName("sime2e")
	tailTopic(t, env.KafkaBrokers, topic) // creates the topic
	t.Cleanup(func() {
		req, _ := http.NewRequest(http.MethodDelete, env.OpenSearchURL+"/"+prefix+"-*", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	indexerAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startProcess(t, "indexer", "indexer", "--kafka-brokers", strings.Join(env.KafkaBrokers, ","), "--topic", topic,
		"--group", topic+"-indexer", "--opensearch-addresses", env.OpenSearchURL, "--index-prefix", prefix,
		"--listen", indexerAddr, "--batch-interval", "100ms", "--watermark-interval", "500ms")
	waitHTTP(t, "http://"+indexerAddr+"/readyz", 2*time.Minute)

	// Real members beside the simulated clusters: their kube-system ConfigMaps.
	registries := t.TempDir()
	writeFile(t, filepath.Join(registries, "members.yaml"), `apiVersion: search.karmada.io/v1alpha1
kind: ResourceRegistry
metadata: {name: members}
spec:
  targetCluster: {clusterNames: [`+strings.Join(env.Clusters, ", ")+`]}
  resourceSelectors:
  - {apiVersion: v1, kind: ConfigMap, namespace: kube-system}
`)
	_, collectorBase := startCollector(t, env, registries, topic, "--page-size", "500")
	waitHTTP(t, collectorBase+"/readyz", 3*time.Minute)

	simAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	simBase := "http://" + simAddr
	start := time.Now()
	sim, st := startSimulator(t, env, topic, simAddr, "--clusters", fmt.Sprint(clusters), "--objects", fmt.Sprint(objects),
		"--seed", "42", "--churn-rate", "100", "--churn-duration", "3s")
	r := st.Simulation
	t.Logf("simulated %d clusters × %d objects: %v events, %.1f MiB, lists published in %.2f s (%.0f events/s), %d churn events",
		clusters, objects, r.Events, float64(r.Bytes)/(1<<20), r.ListSeconds, r.ListEventsPerSecond, r.ChurnEvents)
	if r.Objects < clusters*objects*9/10 || r.ChurnEvents < 100 || len(st.Items) < clusters*8 {
		t.Fatalf("the simulator reports %d objects, %d churn events, %d pairs", r.Objects, r.ChurnEvents, len(st.Items))
	}

	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startProcess(t, "queryapi", "queryapi", "--anonymous", "--listen", addr, "--opensearch-addresses", env.OpenSearchURL,
		"--index-prefix", prefix, "--collector-status-urls", collectorBase+"/status,"+simBase+"/status",
		"--kafka-brokers", strings.Join(env.KafkaBrokers, ","), "--topic", topic, "--indexer-group", topic+"-indexer",
		"--poll-interval", "500ms", "--stale-after", "3s")
	base := "http://" + addr
	waitHTTP(t, base+"/readyz", 2*time.Minute)
	waitFleetMatches(t, base, st.Items, env.Clusters, 10*time.Minute)
	t.Logf("the index matches the simulation %s after its start", time.Since(start).Round(time.Second))

	t.Run("documents by cluster and kind", func(t *testing.T) {
		want := map[string]int64{}
		for _, row := range st.Items {
			want[row.Cluster+" "+row.Kind] += int64(row.TotalNum)
		}
		got := indexCounts(t, env, prefix)
		for k, n := range want {
			if got[k] != n {
				t.Errorf("%s: %d documents, the simulator wrote %d", k, got[k], n)
			}
		}
		for k, n := range got {
			if _, ok := want[k]; !ok && strings.HasPrefix(k, simulate.DefaultClusterPrefix) {
				t.Errorf("%s: %d documents the simulator did not write", k, n)
			}
		}
	})

	t.Run("qualified LIST", func(t *testing.T) {
		code, body := facadeGet(t, base+facadePath("/qualified", "apps", "v1", "", "deployments")+"?labelSelector=app.kubernetes.io/name%3Dcheckout")
		var names []string
		for _, it := range gjson.GetBytes(body, "items").Array() {
			names = append(names, it.Get("metadata.name").String())
		}
		var want []string
		for i := 1; i <= clusters; i++ {
			want = append(want, fmt.Sprintf("checkout_sim-%04d", i))
		}
		slices.Sort(names)
		if code != http.StatusOK || !slices.Equal(names, want) {
			t.Errorf("qualified Deployments named checkout: %d %v, want %v", code, names, want)
		}
		// Widgets are served at v1beta1 by every third simulated cluster only: the version's LIST
		// holds theirs and no other.
		wantWidgets := map[string]int{}
		for _, row := range st.Items {
			if row.Resource == "widgets" && row.Version == "v1beta1" {
				wantWidgets[row.Cluster] = row.TotalNum
			}
		}
		code, body = facadeGet(t, base+facadePath("/qualified", "example.com", "v1beta1", "", "widgets"))
		gotWidgets := map[string]int{}
		for _, it := range gjson.GetBytes(body, "items").Array() {
			name := it.Get("metadata.name").String()
			gotWidgets[name[strings.LastIndexByte(name, '_')+1:]]++
		}
		if code != http.StatusOK || len(wantWidgets) == 0 || fmt.Sprint(gotWidgets) != fmt.Sprint(wantWidgets) {
			t.Errorf("qualified v1beta1 widgets by cluster: %d %v, want %v", code, gotWidgets, wantWidgets)
		}
	})

	t.Run("members beside", func(t *testing.T) {
		// The member's objects through its one-cluster view are the apiserver's.
		member := env.Clusters[0]
		out := env.KubectlRun(t, member, nil, "-n", "kube-system", "get", "configmaps", "-o", "jsonpath={.items[*].metadata.name}")
		want := strings.Fields(string(out))
		code, body := facadeGet(t, base+facadePath("/clusters/"+member, "", "v1", "kube-system", "configmaps"))
		var got []string
		for _, it := range gjson.GetBytes(body, "items").Array() {
			got = append(got, it.Get("metadata.name").String())
		}
		slices.Sort(got)
		slices.Sort(want)
		if code != http.StatusOK || len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("%s kube-system configmaps through the facade: %d %v, kubectl: %v", member, code, got, want)
		}
	})

	t.Run("churn", func(t *testing.T) {
		types := map[envelope.Type]int{}
		for _, ch := range r.LastChanges {
			types[ch.Type]++
			path := base + facadePath("/clusters/"+ch.Cluster, ch.Group, ch.Version, ch.Namespace, ch.Resource) + "/" + ch.Name
			code, body := facadeGet(t, path)
			switch ch.Type {
			case envelope.Deleted:
				if code != http.StatusNotFound {
					t.Errorf("%s was deleted by the churn, the facade answers %d", path, code)
				}
			default:
				if rv := gjson.GetBytes(body, "metadata.resourceVersion").String(); code != http.StatusOK || rv != ch.ResourceVersion {
					t.Errorf("%s %s at resourceVersion %s by the churn; the facade answers %d at %q", path, ch.Type, ch.ResourceVersion, code, rv)
				}
			}
		}
		if types[envelope.Modified] == 0 {
			t.Errorf("the churn's last changes hold no update: %v", r.LastChanges)
		}
	})

	t.Run("purge", func(t *testing.T) {
		var kept []string
		for _, k := range simulate.KindNames() {
			if k != "configmaps" {
				kept = append(kept, k)
			}
		}
		simConfigMaps := func() []gjson.Result {
			code, body := facadeGet(t, base+facadePath("/qualified", "", "v1", "", "configmaps"))
			if code != http.StatusOK {
				t.Fatalf("qualified ConfigMaps: %d %s", code, body)
			}
			return slices.DeleteFunc(gjson.GetBytes(body, "items").Array(), func(it gjson.Result) bool {
				return !strings.Contains(it.Get("metadata.name").String(), "_"+simulate.DefaultClusterPrefix)
			})
		}
		before := simConfigMaps()
		if len(before) == 0 {
			t.Fatal("no simulated ConfigMap through the facade before the PURGE")
		}
		if err := sim.stop(30 * time.Second); err != nil {
			t.Fatalf("the simulator stopped with %v", err)
		}
		// Started again on the same address (the query API's status URL) without ConfigMaps: it
		// purges them from every simulated cluster and lists the rest again, in new epochs.
		_, again := startSimulator(t, env, topic, simAddr, "--clusters", fmt.Sprint(clusters), "--objects", fmt.Sprint(objects),
			"--seed", "42", "--kinds", strings.Join(kept, ","))
		if again.Simulation.Events[envelope.Purge] != clusters {
			t.Errorf("%d PURGE markers, want one per cluster (%d)", again.Simulation.Events[envelope.Purge], clusters)
		}
		waitFleetMatches(t, base, again.Items, env.Clusters, 5*time.Minute)
		counts := indexCounts(t, env, prefix)
		for k, n := range counts {
			if strings.HasPrefix(k, simulate.DefaultClusterPrefix) && strings.HasSuffix(k, " ConfigMap") {
				t.Errorf("%s: %d documents left after the PURGE", k, n)
			}
		}
		for _, m := range env.Clusters {
			if counts[m+" ConfigMap"] == 0 {
				t.Errorf("member %s: its ConfigMaps went with the simulated clusters'", m)
			}
		}
		if after := simConfigMaps(); len(after) > 0 {
			t.Errorf("%d simulated ConfigMaps through the facade after the PURGE, e.g. %s", len(after), after[0].Get("metadata.name"))
		}
		name := before[0].Get("metadata.name").String()
		cluster := name[strings.LastIndexByte(name, '_')+1:]
		path := facadePath("/clusters/"+cluster, "", "v1", before[0].Get("metadata.namespace").String(), "configmaps") + "/" + strings.TrimSuffix(name, "_"+cluster)
		if code, _ := facadeGet(t, base+path); code != http.StatusNotFound {
			t.Errorf("GET %s after the PURGE: %d, want 404", path, code)
		}
	})
}
