//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/tests/testbed"
)

// testQualifiedReferences drives kubectl describe in the qualified view, where every object is
// named <name>_<cluster>: the references it follows (an Event's involvedObject, a Pod's node, its
// owner) name objects as the view does, and the field selectors describe sends with those names
// find the member's objects (issue 24 item 3). Events of the shop namespace and Nodes are selected
// for the subtest only, by a registry file removed after it.
func testQualifiedReferences(t *testing.T, env *testbed.Env, f fleet, p *queryPipeline, k *facadeKubectl) {
	reg := filepath.Join(p.registries, "references.yaml")
	writeFile(t, reg, fmt.Sprintf(`apiVersion: search.karmada.io/v1alpha1
kind: ResourceRegistry
metadata: {name: fleet-references}
spec:
  resourceSelectors:
  - {apiVersion: v1, kind: Event, namespace: %s}
  - {apiVersion: v1, kind: Node}
`, f.shop))
	// Deferred, not a Cleanup: the wait needs the test's context, which Cleanup runs without.
	defer func() {
		_ = os.Remove(reg)
		// The selections leave: later subtests see the fleet's own again.
		// Discovery, not a LIST: an uncached built-in kind lists empty (uncached.go).
		pollUntil(t, "events and nodes leave the facade", 2*time.Minute, func(ctx context.Context) (bool, error) {
			return !facadeDiscovers(p.base, "/api/v1", "nodes"), nil
		})
	}()

	// A Warning Event about member1's first Pod and one about each member's Deployment, each
	// saying which member it is in.
	pod := strings.TrimSpace(string(env.KubectlRun(t, "member1", nil, "get", "pods", "-n", f.shop, "-l", "app.kubernetes.io/name=web",
		"-o", "jsonpath={.items[0].metadata.name}")))
	podUID := string(env.KubectlRun(t, "member1", nil, "get", "pod", pod, "-n", f.shop, "-o", "jsonpath={.metadata.uid}"))
	node := string(env.KubectlRun(t, "member1", nil, "get", "pod", pod, "-n", f.shop, "-o", "jsonpath={.spec.nodeName}"))
	if node == "" {
		t.Fatalf("pod %s of member1 is not scheduled", pod)
	}
	now := time.Now().UTC().Format(time.RFC3339)
	event := func(name, kind, apiVersion, involved, uid, message string) string {
		return fmt.Sprintf(`---
apiVersion: v1
kind: Event
metadata: {name: %s, namespace: %s}
involvedObject: {kind: %s, apiVersion: %s, name: %s, namespace: %s, uid: %s}
reason: KubesearchProbe
message: %q
type: Warning
count: 1
firstTimestamp: %s
lastTimestamp: %s
source: {component: kubesearch-e2e}
`, name, f.shop, kind, apiVersion, involved, f.shop, uid, message, now, now)
	}
	env.KubectlRun(t, "member1", []byte(event("probe-pod", "Pod", "v1", pod, podUID, "probe of "+pod+" in member1")), "create", "-f", "-")
	for _, cl := range env.Clusters {
		uid := string(env.KubectlRun(t, cl, nil, "get", "deployment", "web", "-n", f.shop, "-o", "jsonpath={.metadata.uid}"))
		env.KubectlRun(t, cl, []byte(event("probe-web", "Deployment", "apps/v1", "web", uid, "probe of web in "+cl)), "create", "-f", "-")
	}

	q := func(args ...string) []string { return append([]string{"--context", "kubesearch-qualified"}, args...) }
	t.Run("describe pod shows its events", func(t *testing.T) {
		var out string
		pollUntil(t, "the pod's event in describe", 2*time.Minute, func(ctx context.Context) (bool, error) {
			out, _ = k.run(ctx, q("describe", "pod", pod+"_member1", "-n", f.shop)...)
			return strings.Contains(out, "probe of "+pod+" in member1"), nil
		})
		if !regexp.MustCompile(`Controlled By:\s+ReplicaSet/web-\S+_member1\n`).MatchString(out) ||
			!regexp.MustCompile(`Node:\s+`+regexp.QuoteMeta(node)+`_member1`).MatchString(out) {
			t.Errorf("describe pod: owner and node not qualified:\n%s", out)
		}
	})
	t.Run("describe deployment shows its member's events only", func(t *testing.T) {
		var out string
		pollUntil(t, "the deployment's event in describe", 2*time.Minute, func(ctx context.Context) (bool, error) {
			out, _ = k.run(ctx, q("describe", "deployment", "web_member1", "-n", f.shop)...)
			return strings.Contains(out, "probe of web in member1"), nil
		})
		for _, cl := range env.Clusters[1:] {
			if strings.Contains(out, "probe of web in "+cl) {
				t.Errorf("describe deployment web_member1 shows %s's event:\n%s", cl, out)
			}
		}
	})
	t.Run("describe node lists its pods", func(t *testing.T) {
		var out string
		pollUntil(t, "the node's pods in describe", 2*time.Minute, func(ctx context.Context) (bool, error) {
			out, _ = k.run(ctx, q("describe", "node", node+"_member1")...)
			return strings.Contains(out, pod+"_member1"), nil
		})
		if strings.Contains(out, "Non-terminated Pods:          (0 in total)") || strings.Contains(out, "_member2") || strings.Contains(out, "_member3") {
			t.Errorf("describe node %s_member1:\n%s", node, out)
		}
	})
	t.Run("owner references are qualified", func(t *testing.T) {
		owner := k.mustRun(t, q("get", "pod", pod+"_member1", "-n", f.shop, "-o", "jsonpath={.metadata.ownerReferences[0].name}")...)
		direct := string(env.KubectlRun(t, "member1", nil, "get", "pod", pod, "-n", f.shop, "-o", "jsonpath={.metadata.ownerReferences[0].name}"))
		if owner != direct+"_member1" {
			t.Errorf("owner of %s_member1 is %q, want %q", pod, owner, direct+"_member1")
		}
		// The owner it names is there.
		k.mustRun(t, q("get", "deployment", "web_member1", "-n", f.shop, "-o", "name")...)
		nodeName := k.mustRun(t, q("get", "pod", pod+"_member1", "-n", f.shop, "-o", "jsonpath={.spec.nodeName}")...)
		if nodeName != node+"_member1" {
			t.Errorf("node of %s_member1 is %q, want %q", pod, nodeName, node+"_member1")
		}
	})
}

// facadeDiscovers says whether the facade's discovery document of a group-version (path /api/v1,
// /apis/<group>/<version>) lists a resource.
func facadeDiscovers(base, path, resource string) bool {
	resp, err := http.Get(base + path)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var list struct {
		Resources []struct {
			Name string `json:"name"`
		} `json:"resources"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&list) != nil {
		return false
	}
	for _, r := range list.Resources {
		if r.Name == resource {
			return true
		}
	}
	return false
}
