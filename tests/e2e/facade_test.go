//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/tests/testbed"
)

// facadeKubectl runs the test bed's kubectl against the query API's facade through a kubeconfig
// printed by `kubesearch kubeconfig`.
type facadeKubectl struct {
	env        *testbed.Env
	kubeconfig string
}

func newFacadeKubectl(t *testing.T, env *testbed.Env, base string) *facadeKubectl {
	t.Helper()
	out, err := exec.Command(kubesearchBinary(t), "kubeconfig", "--server", base).Output()
	if err != nil {
		t.Fatalf("kubesearch kubeconfig: %v", err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	writeFile(t, path, string(out))
	return &facadeKubectl{env: env, kubeconfig: path}
}

// run runs kubectl and returns its stdout, or an error carrying its stderr.
func (k *facadeKubectl) run(ctx context.Context, args ...string) (string, error) {
	return kubectlAt(ctx, k.env, k.kubeconfig, args...)
}

func (k *facadeKubectl) mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := k.run(t.Context(), args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// lookup reads a dotted path of a decoded JSON object.
func lookup(obj map[string]any, path string) any {
	var v any = obj
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// rows splits kubectl's table output (with --no-headers) into rows of cells.
func rows(out string) [][]string {
	var rs [][]string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line != "" {
			rs = append(rs, strings.Fields(line))
		}
	}
	return rs
}

// withoutColumn drops the cell at i of every row.
func withoutColumn(rs [][]string, i int) [][]string {
	out := make([][]string, len(rs))
	for j, r := range rs {
		out[j] = slices.Delete(slices.Clone(r), i, i+1)
	}
	return out
}

func joinRows(rs [][]string) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = strings.Join(r, " ")
	}
	slices.Sort(out)
	return out
}

// memberRows are what each member's own kubectl prints for args, each row prefixed with the
// member's name, as the facade's CLUSTER column does.
func memberRows(t *testing.T, env *testbed.Env, args ...string) [][]string {
	t.Helper()
	var out [][]string
	for _, c := range env.Clusters {
		for _, r := range rows(string(env.KubectlRun(t, c, nil, append(args, "--no-headers")...))) {
			out = append(out, append([]string{c}, r...))
		}
	}
	return out
}

func TestFacade(t *testing.T) {
	env := testbed.Get(t)
	f := seedFleet(t, env)
	waitRolledOut(t, env, f.shop)
	p := startQueryPipeline(t, env, f.registries(t))
	k := newFacadeKubectl(t, env, p.base)

	// Every member's Deployment and Pods are indexed.
	wantPods := len(memberRows(t, env, "get", "pods", "-n", f.shop))
	pollUntil(t, "the fleet's pods through the facade", 2*time.Minute, func(ctx context.Context) (bool, error) {
		out, err := k.run(ctx, "get", "pods", "-n", f.shop, "--no-headers")
		return err == nil && len(rows(out)) == wantPods, nil
	})

	t.Run("discovery", func(t *testing.T) {
		out := k.mustRun(t, "api-resources", "--no-headers")
		for _, want := range []string{"pods po v1 true Pod", "deployments deploy apps/v1 true Deployment", "widgets example.com/v1 true Widget"} {
			if !slices.Contains(joinRows(rows(out)), want) {
				t.Errorf("api-resources lacks %q:\n%s", want, out)
			}
		}
		// Only the cached resources: services are not selected.
		if strings.Contains(out, "services") {
			t.Errorf("api-resources lists services, which no registry selects:\n%s", out)
		}
	})

	t.Run("get pods, same rows as the members plus CLUSTER", func(t *testing.T) {
		// AGE (the 6th column of -o wide: CLUSTER NAME READY STATUS RESTARTS AGE ...) is left out:
		// the two answers are a moment apart.
		want := joinRows(withoutColumn(memberRows(t, env, "get", "pods", "-n", f.shop, "-o", "wide"), 5))
		pollUntil(t, "facade rows equal the members'", time.Minute, func(ctx context.Context) (bool, error) {
			out, err := k.run(ctx, "get", "pods", "-n", f.shop, "-o", "wide", "--no-headers")
			if err != nil {
				return false, err
			}
			got := joinRows(withoutColumn(rows(out), 5))
			if !slices.Equal(got, want) {
				t.Logf("facade rows:\n%s\nmember rows:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
				return false, nil
			}
			return true, nil
		})
	})

	t.Run("label and field selectors", func(t *testing.T) {
		for _, sel := range []string{"app.kubernetes.io/name=web", "app.kubernetes.io/name in (web,db)", "app.kubernetes.io/name!=db", "app", "!nosuch.example.com/key"} {
			got := len(rows(k.mustRun(t, "get", "pods", "-n", f.shop, "-l", sel, "--no-headers")))
			want := len(memberRows(t, env, "get", "pods", "-n", f.shop, "-l", sel))
			if got != want {
				t.Errorf("-l %q: %d pods through the facade, %d in the members", sel, got, want)
			}
		}
		got := len(rows(k.mustRun(t, "get", "pods", "-A", "--field-selector", "status.phase=Running,metadata.namespace="+f.shop, "--no-headers")))
		want := len(memberRows(t, env, "get", "pods", "-A", "--field-selector", "status.phase=Running,metadata.namespace="+f.shop))
		if got != want || got == 0 {
			t.Errorf("--field-selector: %d pods through the facade, %d in the members", got, want)
		}
	})

	t.Run("get by name", func(t *testing.T) {
		_, err := k.run(t.Context(), "get", "deployment", "web", "-n", f.shop)
		if err == nil || !strings.Contains(err.Error(), "exists in 3 clusters (member1, member2, member3)") {
			t.Errorf("ambiguous get: %v", err)
		}
		out := k.mustRun(t, "--context", "kubesearch-member2", "get", "deployment", "web", "-n", f.shop, "-o", "jsonpath={.metadata.uid}")
		uid := string(env.KubectlRun(t, "member2", nil, "get", "deployment", "web", "-n", f.shop, "-o", "jsonpath={.metadata.uid}"))
		if out != uid {
			t.Errorf("member2's web through its view has uid %q, the member says %q", out, uid)
		}
		out = k.mustRun(t, "--context", "kubesearch-qualified", "get", "deployment", "web_member3", "-n", f.shop, "-o", "name")
		if strings.TrimSpace(out) != "deployment.apps/web_member3" {
			t.Errorf("qualified get: %q", out)
		}
		_, err = k.run(t.Context(), "get", "deployment", "nosuch", "-n", f.shop)
		if err == nil || !strings.Contains(err.Error(), `deployments.apps "nosuch" not found`) {
			t.Errorf("missing object: %v", err)
		}
	})

	t.Run("output forms", func(t *testing.T) {
		// -o yaml and -o json of one member's object through its view: the member's object, less
		// managedFields and the last-applied annotation, plus the cache annotation.
		var viaFacade, direct map[string]any
		if err := json.Unmarshal([]byte(k.mustRun(t, "--context", "kubesearch-member1", "get", "deployment", "web", "-n", f.shop, "-o", "json")), &viaFacade); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(env.KubectlRun(t, "member1", nil, "get", "deployment", "web", "-n", f.shop, "-o", "json"), &direct); err != nil {
			t.Fatal(err)
		}
		for _, path := range []string{"spec", "metadata.uid", "metadata.labels", "metadata.generation"} {
			if a, b := lookup(viaFacade, path), lookup(direct, path); fmt.Sprint(a) != fmt.Sprint(b) {
				t.Errorf("-o json %s: facade %v, member %v", path, a, b)
			}
		}
		if y := k.mustRun(t, "--context", "kubesearch-member1", "get", "deployment", "web", "-n", f.shop, "-o", "yaml"); !strings.Contains(y, "resource.karmada.io/cached-from-cluster: member1") {
			t.Errorf("-o yaml lacks the cache annotation:\n%s", y)
		}
		// --show-labels: the LABELS column equals the members'.
		got := rows(k.mustRun(t, "get", "configmaps", "-n", f.shop, "--show-labels", "--no-headers"))
		wantRows := memberRows(t, env, "get", "configmaps", "-n", f.shop, "--show-labels")
		lastCol := func(rs [][]string) []string {
			var out []string
			for _, r := range rs {
				out = append(out, r[0]+" "+r[1]+" "+r[len(r)-1]) // CLUSTER NAME LABELS
			}
			slices.Sort(out)
			return out
		}
		if !slices.Equal(lastCol(got), lastCol(wantRows)) {
			t.Errorf("--show-labels: facade\n%s\nmembers\n%s", strings.Join(lastCol(got), "\n"), strings.Join(lastCol(wantRows), "\n"))
		}
		// get all: the "all" category, as members publish it, over what is cached.
		all := k.mustRun(t, "get", "all", "-n", f.shop, "-o", "name")
		for _, want := range []string{"deployment.apps/web", "pod/web-"} {
			if !strings.Contains(all, want) {
				t.Errorf("get all lacks %s:\n%s", want, all)
			}
		}
		// Several kinds at once, across namespaces.
		multi := k.mustRun(t, "get", "deploy,cm", "-A", "-o", "name")
		if !strings.Contains(multi, "deployment.apps/web") || !strings.Contains(multi, "configmap/web-config-0") {
			t.Errorf("get deploy,cm -A:\n%s", multi)
		}
	})

	t.Run("one-cluster views keep the member's resourceVersions", func(t *testing.T) {
		for _, c := range env.Clusters {
			out := k.mustRun(t, "--context", "kubesearch-"+c, "get", "configmaps", "-n", f.shop, "-o", "jsonpath={range .items[*]}{.metadata.name}={.metadata.resourceVersion} {end}")
			want := string(env.KubectlRun(t, c, nil, "get", "configmaps", "-n", f.shop, "-o", "jsonpath={range .items[*]}{.metadata.name}={.metadata.resourceVersion} {end}"))
			if out != want {
				t.Errorf("%s configmaps: facade %q, member %q", c, out, want)
			}
		}
	})

	t.Run("chunked lists", func(t *testing.T) {
		// Each chunk is printed as a table of its own: compare cells, without AGE (the 5th column of
		// NAMESPACE CLUSTER NAME DATA AGE), which may tick between the two.
		all := joinRows(withoutColumn(rows(k.mustRun(t, "get", "configmaps", "-A", "--no-headers")), 4))
		chunked := joinRows(withoutColumn(rows(k.mustRun(t, "get", "configmaps", "-A", "--chunk-size=2", "--no-headers")), 4))
		if !slices.Equal(all, chunked) || len(all) < 15 {
			t.Errorf("--chunk-size=2 gives rows\n%s\na whole list\n%s", strings.Join(chunked, "\n"), strings.Join(all, "\n"))
		}
	})

	t.Run("writes are refused", func(t *testing.T) {
		_, err := k.run(t.Context(), "delete", "configmap", "web-config-0", "-n", f.shop, "--context", "kubesearch-member1")
		if err == nil || !strings.Contains(err.Error(), "read-only") {
			t.Errorf("delete through the facade: %v", err)
		}
		if _, err := env.KubectlOutput(t.Context(), "member1", nil, "get", "configmap", "web-config-0", "-n", f.shop); err != nil {
			t.Errorf("the member lost the object: %v", err)
		}
		// exec, attach, port-forward: "not served, ask the member" for the WebSocket GET and the
		// SPDY POST kubectl falls back to, never the write refusal.
		pod := strings.TrimPrefix(strings.TrimSpace(strings.Split(k.mustRun(t, "--context", "kubesearch-member1", "get", "pods", "-n", f.shop, "-o", "name"), "\n")[0]), "pod/")
		for _, args := range [][]string{{"exec", pod, "--", "true"}, {"attach", pod}, {"port-forward", "pod/" + pod, "18080:80"}} {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			_, err := k.run(ctx, append([]string{"--context", "kubesearch-member1", "-n", f.shop}, args...)...)
			cancel()
			if err == nil || !strings.Contains(err.Error(), "ask the member cluster") || strings.Contains(err.Error(), "not allowed") {
				t.Errorf("kubectl %s through the facade: %v, want the subresource's \"ask the member cluster\"", args[0], err)
			}
		}
	})

	t.Run("qualified references", func(t *testing.T) { testQualifiedReferences(t, env, f, p, k) })
	t.Run("events in both groups", func(t *testing.T) { testFacadeEvents(t, env, f, p, k) })
	t.Run("field selectors as the members accept them", func(t *testing.T) { testFieldLabels(t, env, f, p, k) })
	t.Run("kubectl cluster-info dump", func(t *testing.T) { testClusterInfoDump(t, env, f, k) })
	t.Run("repeated names warned", func(t *testing.T) { testRepeatedNamesWarned(t, f, p) })
	t.Run("watch", func(t *testing.T) { testFacadeWatch(t, env, f, p, k) })
	t.Run("member1's etcd restored from a backup", func(t *testing.T) { testMemberRestored(t, env, f, p) }) // last: member1 goes back
}
