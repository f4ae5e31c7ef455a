//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/tests/testbed"
)

// testFieldLabels: a field selector on a path the kind does not have is refused as the member
// refuses it, "field label not supported", in the facade and in the REST search (issue 24 item 7);
// any path of the kind's schema still selects.
func testFieldLabels(t *testing.T, env *testbed.Env, f fleet, p *queryPipeline, k *facadeKubectl) {
	_, err := k.run(t.Context(), "get", "pods", "-A", "--field-selector", "spec.nodNames=x")
	_, direct := env.KubectlOutput(t.Context(), "member1", nil, "get", "pods", "-A", "--field-selector", "spec.nodNames=x")
	for who, err := range map[string]error{"facade": err, "member": direct} {
		if err == nil || !strings.Contains(err.Error(), "field label not supported: spec.nodNames") {
			t.Errorf("%s: kubectl get pods --field-selector spec.nodNames=x: %v", who, err)
		}
	}
	a := get(t, p.base, "/v1alpha1/search", url.Values{"resources": {"pods"}, "fieldSelector": {"spec.nodNames=x"}})
	if a.code != http.StatusBadRequest || !strings.Contains(a.status.Message, "field label not supported: spec.nodNames") {
		t.Errorf("REST search with spec.nodNames: %d %s", a.code, a.raw)
	}
	// Paths kube-apiserver does not select by, but the kind has: the members' counts.
	for _, sel := range []string{"spec.containers.image=nginx:1.27", "metadata.labels.app.kubernetes.io/name=web,spec.restartPolicy=Always"} {
		got := len(rows(k.mustRun(t, "get", "pods", "-n", f.shop, "--field-selector", sel, "--no-headers")))
		want := len(memberRows(t, env, "get", "pods", "-n", f.shop, "-l", "app.kubernetes.io/name=web"))
		if got != want || got == 0 {
			t.Errorf("--field-selector %s: %d pods, the members have %d", sel, got, want)
		}
	}
}

// testClusterInfoDump: `kubectl cluster-info dump --all-namespaces` runs to its end through the
// facade (issue 24 item 7): it lists nodes, namespaces, and per namespace events,
// replicationcontrollers, services, daemonsets, deployments, replicasets and pods with typed
// clients, and stopped at the first kind no registry selects. Uncached built-in kinds list empty
// with a Warning, uncached namespaces list those holding cached objects, and each container's log
// request is a 404 (subresources are not served), which the dump prints and goes on.
func testClusterInfoDump(t *testing.T, env *testbed.Env, f fleet, k *facadeKubectl) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, env.Kubectl, "--kubeconfig", k.kubeconfig, "cluster-info", "dump", "--all-namespaces")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl cluster-info dump --all-namespaces: %v\n%s", err, stderr.String())
	}
	t.Logf("cluster-info dump: %d bytes in %s", stdout.Len(), time.Since(start).Round(time.Millisecond))
	out := stdout.String()
	pod := strings.TrimSpace(string(env.KubectlRun(t, "member2", nil, "get", "pods", "-n", f.shop, "-l", "app.kubernetes.io/name=web",
		"-o", "jsonpath={.items[0].metadata.name}")))
	for _, want := range []string{
		`"kind": "NodeList"`, `"kind": "DeploymentList"`, `"kind": "DaemonSetList"`, `"kind": "ReplicationControllerList"`,
		`"name": "` + pod + `"`, // a cached Pod of the shop namespace, the last kind of a namespace
		// The log request's 404 (subresources are not served), printed by the dump, which goes on;
		// kubectl prints its own words for it, not the Status' message.
		"==== START logs for container nginx of pod " + f.shop + "/" + pod + " ====\nRequest log error: the server could not find the requested resource",
	} {
		if !strings.Contains(out, want) {
			at := max(strings.Index(out, "==== START logs"), 0)
			t.Errorf("the dump lacks %s (%d bytes); from its first logs:\n%.1500s", want, len(out), out[at:])
		}
	}
	for _, want := range []string{"kubesearch caches no replicationcontrollers", "kubesearch caches no daemonsets.apps", "kubesearch caches no namespaces"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("kubectl's warnings lack %q:\n%.2000s", want, stderr.String())
		}
	}
}

// testRepeatedNamesWarned: a fleet view's streaming list (client-go's default) carries the Warning
// that a LIST holding one name from two clusters carries; `kubesearch kubeconfig` says the same of
// its fleet context (issue 24 item 6).
func testRepeatedNamesWarned(t *testing.T, f fleet, p *queryPipeline) {
	watchWarnings := func(view string) []string {
		t.Helper()
		resp, err := http.Get(p.base + view + "/apis/apps/v1/namespaces/" + f.shop +
			"/deployments?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("watch %s: %s", view, resp.Status)
		}
		return resp.Header.Values("Warning")
	}
	if w := strings.Join(watchWarnings(""), "\n"); !strings.Contains(w, "names repeat across clusters in this watch's initial events ("+f.shop+"/web in member1 and member2)") ||
		!strings.Contains(w, "kubesearch-qualified") {
		t.Errorf("fleet watch's warnings: %s", w)
	}
	if w := strings.Join(watchWarnings("/qualified"), "\n"); strings.Contains(w, "names repeat") {
		t.Errorf("qualified watch's warnings: %s", w)
	}
	cmd := exec.Command(kubesearchBinary(t), "kubeconfig", "--server", p.base)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubesearch kubeconfig: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "point those at context kubesearch-qualified") {
		t.Errorf("kubesearch kubeconfig's notice: %q", stderr.String())
	}
	if !strings.Contains(stdout.String(), "name: kubesearch.io/view") || !strings.Contains(stdout.String(), "view: fleet") {
		t.Errorf("the kubeconfig lacks its view extension:\n%s", stdout.String())
	}
}
