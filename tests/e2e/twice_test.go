//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opensearch-project/opensearch-go/v4"
	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"
	"github.com/tidwall/gjson"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubesearch/kubesearch/tests/testbed"
)

// TestMemberRegisteredTwice: member1 registered a second time as member1-copy (its kubeconfig
// context copied, as an operator does by mistake or in a migration). Documents are keyed by
// (cluster, uid): both names keep every object, each document with its own name, and nothing
// flaps over re-lists of either name (collector restarts) and a change; the collector's /status
// warns that the two look like one cluster; the facade's one-cluster views answer each name's
// object (issue 23 item 5).
func TestMemberRegisteredTwice(t *testing.T) {
	env := testbed.Get(t)
	f := seedFleet(t, env)
	cfg, err := clientcmd.LoadFromFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Contexts["member1"] == nil {
		t.Fatal("the test bed's kubeconfig has no context member1")
	}
	cfg.Contexts["member1-copy"] = cfg.Contexts["member1"].DeepCopy()
	kubeconfig := filepath.Join(t.TempDir(), "members.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	registries := t.TempDir()
	writeFile(t, filepath.Join(registries, "twice.yaml"), fmt.Sprintf(`apiVersion: search.karmada.io/v1alpha1
kind: ResourceRegistry
metadata: {name: twice}
spec:
  targetCluster:
    clusterNames: [member1, member1-copy, member2]
  resourceSelectors:
  - {apiVersion: v1, kind: ConfigMap, namespace: %s}
`, f.shop))

	p := &queryPipeline{env: env, registries: registries, topic: uniqueName("twice"), prefix: uniqueName("twice")}
	tailTopic(t, env.KafkaBrokers, p.topic)
	indexerAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	p.indexer = startProcess(t, "indexer", "indexer", "--kafka-brokers", strings.Join(env.KafkaBrokers, ","),
		"--topic", p.topic, "--group", p.topic+"-indexer", "--opensearch-addresses", env.OpenSearchURL,
		"--index-prefix", p.prefix, "--listen", indexerAddr, "--batch-interval", "100ms", "--watermark-interval", "500ms")
	waitHTTP(t, "http://"+indexerAddr+"/readyz", 2*time.Minute)
	t.Cleanup(func() {
		req, _ := http.NewRequest(http.MethodDelete, env.OpenSearchURL+"/"+p.prefix+"-*", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	collectorAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startTwice := func() {
		t.Helper()
		p.collector, _ = startCollector(t, env, registries, p.topic, "--kubeconfig", kubeconfig, "--listen", collectorAddr)
		waitHTTP(t, "http://"+collectorAddr+"/readyz", 3*time.Minute)
	}
	startTwice()
	p.collectorStatus = "http://" + collectorAddr + "/status"
	client, err := opensearchapi.NewClient(opensearchapi.Config{Client: opensearch.Config{Addresses: []string{env.OpenSearchURL}}})
	if err != nil {
		t.Fatal(err)
	}
	docsOf := &pipeline{env: env, prefix: p.prefix, os: client}

	// problems compares what each name's documents hold with member1's ConfigMaps.
	member1 := dynamic.NewForConfigOrDie(env.RESTConfig(t, "member1"))
	problems := func() []string {
		list, err := resourceIn(member1, gvrConfigMaps, f.shop).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return []string{err.Error()}
		}
		var out []string
		for _, name := range []string{"member1", "member1-copy"} {
			docs, err := docsOf.docs(t, "ConfigMap", name, f.shop)
			if err != nil {
				return []string{err.Error()}
			}
			if len(docs) != len(list.Items) {
				out = append(out, fmt.Sprintf("%s: %d documents, member1 has %d ConfigMaps", name, len(docs), len(list.Items)))
			}
			for _, it := range list.Items {
				d, ok := docs[string(it.GetUID())]
				switch {
				case !ok:
					out = append(out, fmt.Sprintf("%s: %s not indexed", name, it.GetName()))
				case d.id != name+"/"+string(it.GetUID()) || d.cluster != name:
					out = append(out, fmt.Sprintf("%s: %s indexed as %s of cluster %s", name, it.GetName(), d.id, d.cluster))
				case fmt.Sprint(d.resourceVersion) != it.GetResourceVersion():
					out = append(out, fmt.Sprintf("%s: %s at rv %d, member1 at %s", name, it.GetName(), d.resourceVersion, it.GetResourceVersion()))
				case gjson.GetBytes(d.object, `metadata.annotations.resource\.karmada\.io/cached-from-cluster`).Str != name:
					out = append(out, fmt.Sprintf("%s: %s annotated as cached from %s", name, it.GetName(),
						gjson.GetBytes(d.object, `metadata.annotations.resource\.karmada\.io/cached-from-cluster`).Str))
				}
			}
		}
		slices.Sort(out)
		return out
	}
	converged := func(what string) {
		t.Helper()
		var last []string
		err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
			last = problems()
			return len(last) == 0, nil
		})
		if err != nil {
			t.Fatalf("%s: %v; last seen:\n%s", what, err, strings.Join(last[:min(len(last), 20)], "\n"))
		}
	}
	converged("both names of member1 indexed")
	n := len(resourceList(t, member1, f.shop))

	// Watch the counts while both names re-list (two collector restarts) and an object changes:
	// with documents keyed by uid alone, each name's list and SYNC took the other's documents away.
	var (
		mu      sync.Mutex
		flapped []string
		samples int
	)
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			for _, name := range []string{"member1", "member1-copy"} {
				docs, err := docsOf.docs(t, "ConfigMap", name, f.shop)
				mu.Lock()
				samples++
				if err == nil && len(docs) < n {
					flapped = append(flapped, fmt.Sprintf("%s: %d of %d documents at %s", name, len(docs), n, time.Now().Format(time.TimeOnly)))
				}
				mu.Unlock()
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	for round := range 2 {
		if err := p.collector.stop(30 * time.Second); err != nil {
			t.Logf("collector stopped: %v", err)
		}
		startTwice()
		env.KubectlRun(t, "member1", []byte(fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web-config-0, namespace: %s}\ndata: {round: \"%d\"}\n", f.shop, round)), "apply", "-f", "-")
		converged(fmt.Sprintf("both names after re-list %d and a change", round+1))
	}
	stop()
	wg.Wait()
	t.Logf("%d samples of the documents of both names during the re-lists", samples)
	if len(flapped) > 0 {
		t.Errorf("documents of a name went missing during re-lists (%d samples): %s", len(flapped), strings.Join(flapped[:min(len(flapped), 10)], "; "))
	}

	// The collector warns; member2 is not named.
	status := mustHTTP(t, http.MethodGet, p.collectorStatus, "")
	warnings := gjson.GetBytes(status, "warnings").Array()
	if len(warnings) != 1 || !strings.HasPrefix(warnings[0].Str, "member1 and member1-copy look like the same cluster: kube-system uid ") {
		t.Errorf("/status warnings %s; want one naming member1 and member1-copy", gjson.GetBytes(status, "warnings").Raw)
	}
	pollUntil(t, "the collector to log that member1 and member1-copy look like the same cluster", 30*time.Second, func(context.Context) (bool, error) {
		return strings.Contains(p.collector.output(), "member1 and member1-copy look like the same cluster"), nil
	})

	// The facade's one-cluster views answer each name's object; the fleet view sees the name twice.
	base := p.startQueryAPI(t, "--stale-after", "3s", "--poll-interval", "500ms")
	for _, name := range []string{"member1", "member1-copy"} {
		body := mustHTTP(t, http.MethodGet, base+"/clusters/"+name+"/api/v1/namespaces/"+f.shop+"/configmaps/web-config-1", "")
		if got := gjson.GetBytes(body, `metadata.annotations.resource\.karmada\.io/cached-from-cluster`).Str; got != name {
			t.Errorf("GET web-config-1 in %s's view: cached from %q; want %s", name, got, name)
		}
	}
	resp, err := http.Get(base + "/api/v1/namespaces/" + f.shop + "/configmaps/web-config-1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("GET web-config-1 in the fleet view: %s; want 409 (member1, member1-copy and member2 hold the name)", resp.Status)
	}
}

func resourceList(t *testing.T, dyn dynamic.Interface, ns string) []string {
	t.Helper()
	list, err := resourceIn(dyn, gvrConfigMaps, ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, it := range list.Items {
		out = append(out, it.GetName())
	}
	return out
}
