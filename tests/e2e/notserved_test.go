//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opensearch-project/opensearch-go/v4"
	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubesearch/kubesearch/internal/registry"
	"github.com/kubesearch/kubesearch/tests/testbed"
)

// A CRD deleted in a member while the collector was down: the collector, started again, finds the
// kind gone from the member's discovery and its list answering 404, PURGEs what it had indexed,
// and says so in /status. The CRD created again is collected afresh.
func TestKindNoLongerServedIsPurged(t *testing.T) {
	env := testbed.Get(t)
	const cluster = "member1"
	group := uniqueName("gadgets") + ".example.com"
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "gadgets"}
	crdName := "gadgets." + group
	crd := fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: %[2]s}
spec:
  group: %[1]s
  names: {kind: Gadget, plural: gadgets, singular: gadget, listKind: GadgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`, group, crdName)
	createGadgets := func(names ...string) {
		t.Helper()
		env.KubectlRun(t, cluster, []byte(crd), "apply", "-f", "-")
		env.KubectlRun(t, cluster, nil, "wait", "--for=condition=Established", "--timeout=60s", "crd/"+crdName)
		var b strings.Builder
		for _, n := range names {
			fmt.Fprintf(&b, "---\napiVersion: %s/v1\nkind: Gadget\nmetadata: {name: %s, namespace: default}\nspec: {size: 1}\n", group, n)
		}
		applyFresh(t, env, cluster, []byte(b.String()))
	}
	t.Cleanup(func() {
		_, _ = env.KubectlOutput(context.Background(), cluster, nil, "delete", "crd", crdName, "--ignore-not-found", "--wait=false")
	})
	createGadgets("g1", "g2", "g3")

	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "gadgets.yaml"), fmt.Sprintf(`apiVersion: search.karmada.io/v1alpha1
kind: ResourceRegistry
metadata: {name: gadgets}
spec:
  targetCluster:
    clusterNames: [%s]
  resourceSelectors:
  - {apiVersion: %s/v1, kind: Gadget}
`, cluster, group))
	p := &pipeline{env: env, registries: dir, topic: uniqueName("notserved"), prefix: uniqueName("e2e")}
	client, err := opensearchapi.NewClient(opensearchapi.Config{Client: opensearch.Config{Addresses: []string{env.OpenSearchURL}}})
	if err != nil {
		t.Fatal(err)
	}
	p.os = client
	t.Cleanup(func() {
		_, _ = client.Indices.Delete(context.Background(), opensearchapi.IndicesDeleteReq{Indices: []string{p.prefix + "-*"}})
	})
	tailTopic(t, env.KafkaBrokers, p.topic)
	p.startIndexer(t)
	var base string
	startGadgetCollector := func() {
		t.Helper()
		p.collector, base = startCollector(t, env, p.registries, p.topic)
		waitHTTP(t, base+"/readyz", 2*time.Minute)
	}
	gadgets := func(want int) func(context.Context) (bool, error) {
		return func(context.Context) (bool, error) {
			docs, err := p.docs(t, "Gadget", cluster, "")
			return len(docs) == want, err
		}
	}
	gadgetRow := func() registry.ResourceStatus {
		t.Helper()
		for _, r := range collectorStatus(t, base+"/status") {
			if r.Cluster == cluster && r.Group == group && r.Kind == "Gadget" {
				return r
			}
		}
		t.Fatalf("no /status row of %s's Gadgets", cluster)
		return registry.ResourceStatus{}
	}

	startGadgetCollector()
	pollUntil(t, "the Gadgets indexed", time.Minute, gadgets(3))

	// The collector goes down; meanwhile the CRD is deleted (its objects with it).
	if err := p.collector.stop(30 * time.Second); err != nil {
		t.Fatalf("collector did not exit cleanly: %v", err)
	}
	env.KubectlRun(t, cluster, nil, "delete", "crd", crdName, "--wait=true", "--timeout=60s")
	pollUntil(t, "the member's discovery without the Gadgets", time.Minute, func(context.Context) (bool, error) {
		return !discoveryServes(t, env, cluster, gvr), nil
	})
	if docs, err := p.docs(t, "Gadget", cluster, ""); err != nil || len(docs) != 3 {
		t.Fatalf("before the restart: %d Gadget documents (%v), want the 3 left behind", len(docs), err)
	}

	start := time.Now()
	startGadgetCollector()
	pollUntil(t, "the Gadgets of a CRD deleted while the collector was down purged", time.Minute, gadgets(0))
	t.Logf("purged %s after the collector started", time.Since(start).Round(100*time.Millisecond))
	r := gadgetRow()
	if r.State != registry.StateFailed || !strings.HasPrefix(r.Reason, "not served by the member: purged: ") || r.PurgedAt == nil {
		t.Errorf("/status row: state %s, reason %q, purgedAt %v; want Failed, not served: purged", r.State, r.Reason, r.PurgedAt)
	}
	t.Logf("/status: %s %q", r.State, r.Reason)
	if !strings.Contains(p.collector.output(), "the member no longer serves the selected kind, purging") {
		t.Error("the collector did not log the purge")
	}

	// The CRD comes back with one object: collected again, the status Running.
	createGadgets("g4")
	pollUntil(t, "the Gadget of the re-created CRD indexed", time.Minute, gadgets(1))
	pollUntil(t, "the Gadgets' status Running again", 30*time.Second, func(context.Context) (bool, error) {
		r := gadgetRow()
		return r.State == registry.StateRunning && r.PurgedAt == nil && r.Reason == "", nil
	})
}
