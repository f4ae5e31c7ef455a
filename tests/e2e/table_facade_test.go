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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/kubesearch/kubesearch/tests/testbed"
)

// compareFacadeTables collects the table test's objects of member1 (and the CRDs, so custom
// resources get their printer columns) with `kubesearch standalone` and holds the facade's Table
// of each kind, in member1's view, against the member's own: the
// same column definitions after CLUSTER, and for every object the member lists, the same cells
// after member1. Cells that depend on the time (AGE and its kin) may tick between the two
// answers, so a kind is compared again until both agree, for a bounded time.
func compareFacadeTables(t *testing.T, env *testbed.Env, cs kubernetes.Interface, ns string, cases []tableCase) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	writeKubeconfig(t, env, kubeconfig, []string{"member1"})
	var sel strings.Builder
	sel.WriteString("  - {apiVersion: apiextensions.k8s.io/v1, kind: CustomResourceDefinition}\n")
	for _, c := range cases {
		if c.group == "events.k8s.io" {
			// Events are selected in one group only (one index per kind): the core group's, which
			// the facade serves as events.k8s.io's too (queryapi/events.go), compared below.
			continue
		}
		gv, kind := tableGroupVersionKind(c)
		switch c.resource {
		case "nodes", "namespaces":
			fmt.Fprintf(&sel, "  - {apiVersion: %s, kind: %s}\n", gv, kind)
		default:
			fmt.Fprintf(&sel, "  - {apiVersion: %s, kind: %s, namespace: %s}\n", gv, kind, ns)
		}
	}
	registry := filepath.Join(dir, "registry.yaml")
	writeFile(t, registry, "apiVersion: search.karmada.io/v1alpha1\nkind: ResourceRegistry\nmetadata: {name: tables}\nspec:\n  targetCluster: {}\n  resourceSelectors:\n"+sel.String())
	port := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	startProcess(t, "standalone", "standalone", "--kubeconfig", kubeconfig, "--registry", registry,
		"--data-dir", filepath.Join(dir, "data"), "--listen", fmt.Sprintf("127.0.0.1:%d", port))
	waitHTTP(t, base+"/readyz", 2*time.Minute)

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var problems []string
			// Not every whole second: AGE cells are whole seconds counted when each answer is
			// printed, the facade's a few milliseconds after the member's; polled every second,
			// a pair of requests straddling a second's boundary straddled it at every retry.
			err := wait.PollUntilContextTimeout(t.Context(), 1300*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				member, err := memberTable(ctx, cs, c)
				if err != nil {
					return false, err
				}
				facade, err := facadeTable(ctx, base+"/clusters/member1", c)
				if err != nil {
					problems = []string{err.Error()}
					return false, nil
				}
				problems = diffFacadeTable(member, facade)
				return len(problems) == 0, nil
			})
			if err != nil {
				t.Errorf("%s through the facade differs from member1's Table:\n%s", c.name, strings.Join(problems, "\n"))
			}
		})
	}
}

// tableGroupVersionKind is the registry selector of a table case.
func tableGroupVersionKind(c tableCase) (string, string) {
	kinds := map[string]string{"pods": "Pod", "deployments": "Deployment", "replicasets": "ReplicaSet", "statefulsets": "StatefulSet",
		"daemonsets": "DaemonSet", "jobs": "Job", "cronjobs": "CronJob", "services": "Service", "ingresses": "Ingress",
		"configmaps": "ConfigMap", "secrets": "Secret", "namespaces": "Namespace", "nodes": "Node", "events": "Event",
		"persistentvolumeclaims": "PersistentVolumeClaim", "serviceaccounts": "ServiceAccount"}
	gv := "v1"
	if c.group != "" {
		gv = c.group + "/v1"
	}
	if c.customResource {
		return gv, "T" + strings.TrimSuffix(c.resource, "s") // as compareCustomResources names them
	}
	return gv, kinds[c.resource]
}

func memberTable(ctx context.Context, cs kubernetes.Interface, c tableCase) (*metav1.Table, error) {
	req := cs.CoreV1().RESTClient().Get().AbsPath(c.path).Param("includeObject", "None").SetHeader("Accept", tableAccept)
	if c.selector != "" {
		req = req.Param("labelSelector", c.selector)
	}
	body, err := req.DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("member1 %s as Table: %w", c.path, err)
	}
	var tb metav1.Table
	return &tb, json.Unmarshal(body, &tb)
}

func facadeTable(ctx context.Context, base string, c tableCase) (*metav1.Table, error) {
	u := base + c.path + "?includeObject=None"
	if c.selector != "" {
		u += "&labelSelector=" + c.selector
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	req.Header.Set("Accept", tableAccept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("facade %s: %s", c.path, resp.Status)
	}
	var tb metav1.Table
	return &tb, json.NewDecoder(resp.Body).Decode(&tb)
}

// diffFacadeTable lists how the facade's Table differs from the member's: columns after CLUSTER,
// and rows by name.
func diffFacadeTable(member, facade *metav1.Table) []string {
	var problems []string
	if len(facade.ColumnDefinitions) == 0 || facade.ColumnDefinitions[0].Name != "Cluster" {
		return []string{fmt.Sprintf("first column %v, want Cluster", columnNames(facade.ColumnDefinitions))}
	}
	if got, want := mustJSONText(facade.ColumnDefinitions[1:]), mustJSONText(member.ColumnDefinitions); got != want {
		problems = append(problems, fmt.Sprintf("columns after Cluster: %s\n member: %s", got, want))
	}
	// Rows by the Name column (events list Last Seen first).
	nameCol := slices.IndexFunc(member.ColumnDefinitions, func(c metav1.TableColumnDefinition) bool { return c.Name == "Name" })
	if nameCol < 0 {
		return append(problems, fmt.Sprintf("member1's columns %v have no Name", columnNames(member.ColumnDefinitions)))
	}
	rows := map[string][]any{}
	for _, r := range facade.Rows {
		if len(r.Cells) <= nameCol+1 || r.Cells[0] != "member1" {
			problems = append(problems, fmt.Sprintf("facade row %v does not start with member1", r.Cells))
			continue
		}
		rows[fmt.Sprint(r.Cells[nameCol+1])] = r.Cells[1:]
	}
	if len(member.Rows) == 0 {
		problems = append(problems, "member1 lists no rows")
	}
	var names []string
	for _, r := range member.Rows {
		name := fmt.Sprint(r.Cells[nameCol])
		names = append(names, name)
		got, ok := rows[name]
		if !ok {
			problems = append(problems, fmt.Sprintf("row %s missing", name))
			continue
		}
		if g, w := mustJSONText(got), mustJSONText(r.Cells); g != w {
			problems = append(problems, fmt.Sprintf("row %s: facade %s\n member %s", name, g, w))
		}
	}
	for name := range rows {
		if !slices.Contains(names, name) {
			problems = append(problems, fmt.Sprintf("facade has row %s, member1 does not", name))
		}
	}
	return problems
}

func mustJSONText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
