//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/kubesearch/kubesearch/tests/testbed"
)

// kubectlSearch runs the test bed's kubectl with kubectl-search on PATH, so `kubectl search` is the
// plugin as a user runs it, reading the kubeconfig of `kubesearch kubeconfig` through KUBECONFIG.
type kubectlSearch struct {
	env              *testbed.Env
	path, kubeconfig string
}

func newKubectlSearch(t *testing.T, env *testbed.Env, base string) *kubectlSearch {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", append(append([]string{"build"}, buildFlags...), "-o", filepath.Join(dir, "kubectl-search"), "./cmd/kubectl-search")...)
	cmd.Dir = testbed.Root()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/kubectl-search: %v\n%s", err, out)
	}
	k := newFacadeKubectl(t, env, base)
	return &kubectlSearch{env: env, path: dir + string(os.PathListSeparator) + os.Getenv("PATH"), kubeconfig: k.kubeconfig}
}

// run runs `kubectl search args...` and returns its stdout and stderr.
func (k *kubectlSearch) run(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	cmd := exec.CommandContext(ctx, k.env.Kubectl, append([]string{"search"}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+k.path, "KUBECONFIG="+k.kubeconfig)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

func (k *kubectlSearch) mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, stderr, err := k.run(t.Context(), args...)
	if err != nil {
		t.Fatalf("kubectl search %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return out
}

// TestKubectlSearch runs `kubectl search` (the kubectl-search plugin) against a pipeline over the
// test bed's members and holds what it prints against what the members hold.
func TestKubectlSearch(t *testing.T) {
	env := testbed.Get(t)
	f := seedFleet(t, env)
	waitRolledOut(t, env, f.shop)
	p := startQueryPipeline(t, env, f.registries(t))
	k := newKubectlSearch(t, env, p.base)

	// The members' web Pods: cluster, name, READY, STATUS, RESTARTS (AGE left out: a moment apart).
	want := joinRows(withoutColumn(memberRows(t, env, "get", "pods", "-n", f.shop, "-l", "app=web"), 5))
	if len(want) == 0 {
		t.Fatal("the members run no web pods")
	}
	pollUntil(t, "kubectl search rows equal the members'", 2*time.Minute, func(ctx context.Context) (bool, error) {
		out, _, err := k.run(ctx, "pods", "-n", f.shop, "-l", "app=web", "--no-headers")
		return err == nil && slices.Equal(joinRows(withoutColumn(rows(out), 5)), want), nil
	})
	if dir := os.Getenv("KUBESEARCH_RECORD_SEARCH_TESTDATA"); dir != "" {
		recordSearchTestdata(t, p.base, f.shop, dir)
	}

	t.Run("table like kubectl get with CLUSTER", func(t *testing.T) {
		out := k.mustRun(t, "po", "-n", f.shop, "-l", "app=web")
		if head := strings.Fields(strings.SplitN(out, "\n", 2)[0]); !slices.Equal(head, []string{"CLUSTER", "NAME", "READY", "STATUS", "RESTARTS", "AGE"}) {
			t.Errorf("header %q", head)
		}
		wide := k.mustRun(t, "pods", "-A", "-l", "app=web", "-o", "wide")
		if head := strings.Fields(strings.SplitN(wide, "\n", 2)[0]); !slices.Equal(head[:4], []string{"CLUSTER", "NAMESPACE", "NAME", "READY"}) || !slices.Contains(head, "NODE") {
			t.Errorf("-A -o wide header %q", head)
		}
	})

	t.Run("clusters", func(t *testing.T) {
		out := k.mustRun(t, "pods", "-n", f.shop, "-l", "app=web", "--clusters", "member1,member3", "--no-headers")
		var wantSome []string
		for _, r := range want {
			if !strings.HasPrefix(r, "member2 ") {
				wantSome = append(wantSome, r)
			}
		}
		if got := joinRows(withoutColumn(rows(out), 5)); !slices.Equal(got, wantSome) {
			t.Errorf("--clusters member1,member3:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantSome, "\n"))
		}
		// A one-cluster context searches its member.
		out, stderr, err := k.run(t.Context(), "--context", "kubesearch-member2", "pods", "-n", f.shop, "--no-headers")
		if err != nil {
			t.Fatalf("--context kubesearch-member2: %v\n%s", err, stderr)
		}
		for _, r := range rows(out) {
			if r[0] != "member2" {
				t.Errorf("--context kubesearch-member2 printed a row of %s: %v", r[0], r)
			}
		}
	})

	t.Run("image, text and -o name", func(t *testing.T) {
		var names []string
		for _, r := range memberRows(t, env, "get", "pods", "-n", f.shop, "-l", "app=web") {
			names = append(names, "pod/"+r[1]+"_"+r[0])
		}
		slices.Sort(names)
		out := k.mustRun(t, "pods", "-n", f.shop, "--image", "nginx:1.27", "-o", "name")
		got := strings.Fields(out)
		slices.Sort(got)
		if !slices.Equal(got, names) {
			t.Errorf("--image nginx:1.27 -o name: %v, want %v", got, names)
		}
		// The line is one the qualified context gets as it is.
		k2 := &facadeKubectl{env: env, kubeconfig: k.kubeconfig}
		if _, err := k2.run(t.Context(), "--context", "kubesearch-qualified", "get", got[0], "-n", f.shop); err != nil {
			t.Errorf("the qualified context does not get %s: %v", got[0], err)
		}
		if out, stderr, err := k.run(t.Context(), "pods", "-n", f.shop, "--image", "nginx:0.0"); err != nil || out != "" || !strings.Contains(stderr, "No resources found") {
			t.Errorf("--image nginx:0.0: %v, %q, %q", err, out, stderr)
		}
		out = k.mustRun(t, "deploy", "-n", f.shop, "--text", "envoy", "-o", "name")
		got = strings.Fields(out) // in order of relevance
		slices.Sort(got)
		if !slices.Equal(got, []string{"deployment.apps/web_member1", "deployment.apps/web_member2", "deployment.apps/web_member3"}) {
			t.Errorf("deploy --text envoy: %v", got)
		}
	})

	t.Run("count by cluster", func(t *testing.T) {
		out := k.mustRun(t, "pods", "-l", "app=web", "-n", f.shop, "--count-by", "cluster")
		lines := rows(out)
		if !slices.Equal(lines[0], []string{"CLUSTER", "COUNT"}) {
			t.Fatalf("header %v", lines[0])
		}
		perCluster := map[string]int{}
		for _, r := range want {
			perCluster[strings.Fields(r)[0]]++
		}
		for _, r := range lines[1:] {
			if fmt.Sprint(perCluster[r[0]]) != r[1] {
				t.Errorf("--count-by cluster: %v, the members have %d", r, perCluster[r[0]])
			}
			delete(perCluster, r[0])
		}
		if len(perCluster) > 0 {
			t.Errorf("--count-by cluster lacks %v:\n%s", perCluster, out)
		}
	})

	t.Run("json and yaml are a List of the stored objects", func(t *testing.T) {
		var list struct {
			Kind  string
			Items []struct {
				Metadata struct {
					Name        string
					UID         string
					Annotations map[string]string
				}
			}
		}
		if err := json.Unmarshal([]byte(k.mustRun(t, "pods", "-n", f.shop, "-l", "app=web", "-o", "json")), &list); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, it := range list.Items {
			got = append(got, "pod/"+it.Metadata.Name+"_"+it.Metadata.Annotations["resource.karmada.io/cached-from-cluster"])
		}
		slices.Sort(got)
		if list.Kind != "List" || len(got) != len(want) {
			t.Errorf("-o json: kind %q, %v", list.Kind, got)
		}
		var y struct{ Kind string }
		if err := yaml.Unmarshal([]byte(k.mustRun(t, "pods", "-n", f.shop, "-o", "yaml", "--limit", "1")), &y); err != nil || y.Kind != "List" {
			t.Errorf("-o yaml: %v, kind %q", err, y.Kind)
		}
	})

	t.Run("limit pages through continue", func(t *testing.T) {
		out, stderr, err := k.run(t.Context(), "pods", "-n", f.shop, "-l", "app=web", "--limit", "2", "--chunk-size", "1", "-o", "name")
		if err != nil || len(strings.Fields(out)) != 2 || !strings.Contains(stderr, fmt.Sprintf("Showing 2 of %d matches", len(want))) {
			t.Errorf("--limit 2 --chunk-size 1: %v, %q, %q", err, out, stderr)
		}
		all := k.mustRun(t, "pods", "-n", f.shop, "-l", "app=web", "--chunk-size", "1", "-o", "name")
		if len(strings.Fields(all)) != len(want) {
			t.Errorf("--chunk-size 1: %d names, want %d", len(strings.Fields(all)), len(want))
		}
	})

	t.Run("the server's errors", func(t *testing.T) {
		_, stderr, err := k.run(t.Context(), "pods", "--field-selector", "spec.nodNames=x")
		if err == nil || !strings.Contains(stderr, "Error from server (BadRequest)") || !strings.Contains(stderr, "field label not supported: spec.nodNames") {
			t.Errorf("--field-selector spec.nodNames=x: %v, %q", err, stderr)
		}
		_, stderr, err = k.run(t.Context(), "nosuchkinds")
		if err == nil || !strings.Contains(stderr, `resource "nosuchkinds": the fleet caches no such resource type`) {
			t.Errorf("nosuchkinds: %v, %q", err, stderr)
		}
	})
}

// recordSearchTestdata writes the query API's answers that package search's unit tests replay
// (KUBESEARCH_RECORD_SEARCH_TESTDATA=search/testdata): discovery, a page of pods, deployments,
// counts and a 400.
func recordSearchTestdata(t *testing.T, base, ns, dir string) {
	t.Helper()
	aggregated := "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
	for _, r := range []struct{ file, path, accept string }{
		{"discovery-api.json", "/api", aggregated},
		{"discovery-apis.json", "/apis", aggregated},
		{"pods.json", "/v1alpha1/search?resources=pods.core&namespaces=" + ns + "&labelSelector=app%3Dweb&limit=500", ""},
		{"deployments.json", "/v1alpha1/search?resources=deployments.apps&namespaces=" + ns + "&limit=500", ""},
		{"mixed.json", "/v1alpha1/search?resources=deployments.apps,configmaps.core,widgets.example.com&namespaces=" + ns + "&limit=500", ""},
		{"counts.json", "/v1alpha1/search?resources=pods.core&labelSelector=app%3Dweb&facets=cluster,resource&facetSize=1000&limit=1&metadataOnly=true", ""},
		{"bad-field-selector.json", "/v1alpha1/search?resources=pods.core&fieldSelector=spec.nodNames%3Dx&limit=500", ""},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+r.path, nil)
		if r.accept != "" {
			req.Header.Set("Accept", r.accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		rec, _ := json.Marshal(map[string]any{"status": resp.StatusCode, "contentType": resp.Header.Get("Content-Type"), "body": json.RawMessage(body)})
		writeFile(t, filepath.Join(dir, r.file), string(rec)+"\n")
	}
}
