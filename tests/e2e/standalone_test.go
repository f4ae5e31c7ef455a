//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubesearch/kubesearch/tests/testbed"
)

// standaloneWorkload is applied to each member: the same Deployment and Service everywhere, a Pod
// that never schedules, a ConfigMap to delete while the process is down; dotted label keys.
const standaloneWorkload = `
apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: checkout
  namespace: %[1]s
  labels: {app.kubernetes.io/name: checkout, example.com/tier: web}
spec:
  replicas: 1
  selector: {matchLabels: {app.kubernetes.io/name: checkout}}
  template:
    metadata: {labels: {app.kubernetes.io/name: checkout, example.com/tier: web}}
    spec:
      containers:
      - {name: app, image: "registry.example.com/shop/checkout:1.4.2"}
      - {name: envoy, image: "envoyproxy/envoy:v1.31.0"}
---
apiVersion: v1
kind: Service
metadata: {name: checkout, namespace: %[1]s, labels: {app.kubernetes.io/name: checkout}}
spec:
  selector: {app.kubernetes.io/name: checkout}
  ports: [{port: 80}]
---
apiVersion: v1
kind: Pod
metadata: {name: stuck, namespace: %[1]s, labels: {app.kubernetes.io/name: stuck}}
spec:
  nodeSelector: {example.com/no-such-node: "true"}
  containers: [{name: app, image: "busybox:1.36"}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: doomed-%[2]s, namespace: %[1]s}
data: {k: v}
`

// TestStandalone runs `kubesearch standalone` over two members of the test bed: REST search and
// kubectl through its facade equal the members; a rebound host name and another origin are
// refused; kill -9 and a restart on the same data folder with deletions made meanwhile; a member
// removed from the kubeconfig is purged at the next start.
func TestStandalone(t *testing.T) {
	env := testbed.Get(t)
	ns := fmt.Sprintf("standalone-%d", time.Now().UnixNano()%1e6)
	members := env.Clusters[:2]
	for _, c := range members {
		env.KubectlRun(t, c, fmt.Appendf(nil, standaloneWorkload, ns, c), "apply", "-f", "-")
		t.Cleanup(func() {
			_, _ = env.KubectlOutput(context.Background(), c, nil, "delete", "namespace", ns, "--wait=false")
		})
	}
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	writeKubeconfig(t, env, kubeconfig, members)
	dataDir := filepath.Join(dir, "data")
	port := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	start := func() *process {
		// No --registry: the default one, which selects every namespace of every member.
		p := startProcess(t, "standalone", "standalone", "--kubeconfig", kubeconfig, "--data-dir", dataDir,
			"--listen", fmt.Sprintf("127.0.0.1:%d", port))
		waitHTTP(t, base+"/readyz", 2*time.Minute)
		return p
	}
	p := start()
	inNS := url.Values{"namespaces": {ns}}
	search := func(params url.Values) []item {
		q := maps.Clone(params)
		maps.Copy(q, inNS)
		items, _ := searchAll(t, base, q, nil)
		return items
	}
	eventually(t, "both members' workloads indexed", 2*time.Minute, func() bool {
		return len(search(url.Values{"resources": {"deployments.apps"}})) == 2 &&
			len(search(url.Values{"resources": {"configmaps"}, "namePrefix": {"doomed-"}})) == 2
	})

	t.Run("web pages are refused", func(t *testing.T) { refusesWebPages(t, base) })

	t.Run("REST search equals the members", func(t *testing.T) {
		for _, c := range []struct {
			params  url.Values
			kubectl []string
		}{
			{url.Values{"resources": {"pods"}, "fieldSelector": {"status.phase=Pending"}}, []string{"get", "pods", "--field-selector", "status.phase=Pending"}},
			{url.Values{"resources": {"deployments.apps"}, "labelSelector": {"example.com/tier=web"}}, []string{"get", "deployments", "-l", "example.com/tier=web"}},
			{url.Values{"resources": {"services"}}, []string{"get", "services"}},
		} {
			want := map[string]bool{}
			for _, m := range members {
				for _, r := range rows(string(env.KubectlRun(t, m, nil, append(c.kubectl, "-n", ns, "--no-headers")...))) {
					want[m+"/"+r[0]] = true
				}
			}
			// The members are the truth; the index converges to them (pods come a moment after
			// their Deployments).
			var got map[string]bool
			err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				got = map[string]bool{}
				for _, it := range search(c.params) {
					got[it.cluster+"/"+it.name] = true
				}
				return maps.Equal(got, want), nil
			})
			if len(want) == 0 || err != nil {
				t.Errorf("%s: search %v, members %v", c.params.Encode(), got, want)
			}
		}
		// Any-path field selector through an array: the sidecar's image.
		if n := len(search(url.Values{"resources": {"deployments.apps"}, "fieldSelector": {"spec.template.spec.containers.image=envoyproxy/envoy:v1.31.0"}})); n != 2 {
			t.Errorf("deployments with the envoy image: %d, want 2", n)
		}
	})

	t.Run("kubectl through the facade", func(t *testing.T) {
		k := newFacadeKubectl(t, env, base)
		out := k.mustRun(t, "get", "deployments", "-n", ns, "-o", "json")
		var list struct {
			Items []struct {
				Metadata struct {
					Name        string            `json:"name"`
					Annotations map[string]string `json:"annotations"`
				} `json:"metadata"`
			} `json:"items"`
		}
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			t.Fatal(err)
		}
		var clusters []string
		for _, it := range list.Items {
			clusters = append(clusters, it.Metadata.Annotations["resource.karmada.io/cached-from-cluster"])
		}
		slices.Sort(clusters)
		if !slices.Equal(clusters, members) {
			t.Errorf("facade deployments come from %v, want %v", clusters, members)
		}
		// One member's view keeps the member's own objects; kubectl's table as the member prints it,
		// after the CLUSTER column.
		got := rows(k.mustRun(t, "--context", "kubesearch-"+members[1], "get", "services", "-n", ns, "--no-headers"))
		want := rows(string(env.KubectlRun(t, members[1], nil, "get", "services", "-n", ns, "--no-headers")))
		// AGE (last) aside: the two answers are a moment apart.
		if len(got) != 1 || len(want) != 1 || !slices.Equal(got[0][:len(got[0])-1], append([]string{members[1]}, want[0][:len(want[0])-1]...)) {
			t.Errorf("facade services of %s: %v, member: %v", members[1], got, want)
		}
		// Two kinds across every namespace, as kubectl prints them: the members' rows (AGE aside, a
		// moment apart) with CLUSTER after NAMESPACE.
		sel := []string{"get", "deploy,svc", "-A", "-l", "app.kubernetes.io/name=checkout", "--no-headers"}
		dropAge := func(r []string) string { return strings.Join(r[:len(r)-1], " ") }
		var wantMulti, gotMulti []string
		_ = wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			wantMulti, gotMulti = nil, nil
			for _, m := range members {
				for _, r := range rows(string(env.KubectlRun(t, m, nil, sel...))) {
					wantMulti = append(wantMulti, dropAge(append([]string{r[0], m}, r[1:]...)))
				}
			}
			out, err := k.run(ctx, sel...)
			if err != nil {
				return false, nil
			}
			for _, r := range rows(out) {
				gotMulti = append(gotMulti, dropAge(r))
			}
			slices.Sort(wantMulti)
			slices.Sort(gotMulti)
			return len(wantMulti) >= 4 && slices.Equal(gotMulti, wantMulti), nil
		})
		if len(wantMulti) < 4 || !slices.Equal(gotMulti, wantMulti) {
			t.Errorf("get deploy,svc -A:\n facade %q\nmembers %q", gotMulti, wantMulti)
		}
		// The qualified view's table names objects as -o name and a GET do: <name>_<cluster>.
		for _, r := range rows(k.mustRun(t, "--context", "kubesearch-qualified", "get", "deployments", "-n", ns, "--no-headers")) {
			if !strings.HasPrefix(r[1], "checkout_member") || !strings.HasSuffix(r[1], "_"+r[0]) {
				t.Errorf("qualified view's table row %v: want CLUSTER then checkout_<cluster>", r)
			}
		}
		// A watch sees a change made after it started.
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		watched := make(chan string, 1)
		go func() {
			out, _ := k.run(ctx, "get", "configmaps", "-n", ns, "--watch-only", "-o", "name", "--request-timeout", "0")
			watched <- out
		}()
		time.Sleep(3 * time.Second)
		env.KubectlRun(t, members[0], nil, "create", "configmap", "watched", "-n", ns)
		eventually(t, "the watch delivers the new ConfigMap", 45*time.Second, func() bool {
			return len(search(url.Values{"resources": {"configmaps"}, "names": {"watched"}})) == 1
		})
		time.Sleep(2 * time.Second)
		cancel()
		if out := <-watched; !strings.Contains(out, "configmap/watched") {
			t.Errorf("kubectl get --watch-only printed %q, want configmap/watched", out)
		}
	})

	t.Run("kill -9, deletions meanwhile, restart on the same data folder", func(t *testing.T) {
		p.kill()
		env.KubectlRun(t, members[0], nil, "delete", "configmap", "doomed-"+members[0], "-n", ns)
		env.KubectlRun(t, members[1], nil, "delete", "deployment", "checkout", "-n", ns, "--cascade=orphan")
		p = start()
		// Straight after the start the index still holds what it had (restart keeps the index).
		if n := len(search(url.Values{"resources": {"services"}})); n != 2 {
			t.Errorf("services right after the restart: %d, want 2 kept from before", n)
		}
		eventually(t, "the deletions made while it was down are gone", 2*time.Minute, func() bool {
			cms := search(url.Values{"resources": {"configmaps"}, "namePrefix": {"doomed-"}})
			deps := search(url.Values{"resources": {"deployments.apps"}})
			return len(cms) == 1 && cms[0].cluster == members[1] && len(deps) == 1 && deps[0].cluster == members[0]
		})
	})

	t.Run("a member removed from the kubeconfig is purged", func(t *testing.T) {
		if err := p.stop(30 * time.Second); err != nil {
			t.Fatalf("SIGTERM: %v\n%s", err, p.output())
		}
		writeKubeconfig(t, env, kubeconfig, members[:1])
		p = start()
		eventually(t, members[1]+"'s documents purged", 2*time.Minute, func() bool {
			a := get(t, base, "/v1alpha1/search", url.Values{"clusters": {members[1]}, "limit": {"1"}})
			return a.code == 200 && a.result.Total == 0
		})
		if n := len(search(url.Values{"resources": {"services"}})); n != 1 {
			t.Errorf("services of the remaining member: %d, want 1", n)
		}
	})
}

// writeKubeconfig writes a kubeconfig with the test bed's contexts of the given members only.
func writeKubeconfig(t *testing.T, env *testbed.Env, path string, members []string) {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for name := range cfg.Contexts {
		if !slices.Contains(members, name) {
			delete(cfg.Contexts, name)
		}
	}
	cfg.CurrentContext = members[0]
	if err := clientcmd.WriteToFile(*cfg, path+".tmp"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

func eventually(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("%s: not within %s", what, timeout)
	}
}
