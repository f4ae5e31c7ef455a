//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/tests/testbed"
)

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// helmBinary is the Helm CLI of tests/testbed/build-helm.sh, built into its version-keyed cache
// folder the first time a test needs it (a few minutes cold) and reused after.
func helmBinary(t *testing.T) string {
	t.Helper()
	helmOnce.Do(func() {
		cmd := exec.Command("bash", filepath.Join(testbed.Root(), "tests/testbed/build-helm.sh"))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			helmErr = fmt.Errorf("build-helm.sh: %w\n%s", err, stderr.String())
			return
		}
		helmPath = strings.TrimSpace(string(out))
	})
	if helmErr != nil {
		t.Fatal(helmErr)
	}
	return helmPath
}

// helmCLI runs the real Helm with its own config, cache and data folders, so nothing of the
// machine's Helm is read or written.
type helmCLI struct {
	bin string
	env []string
}

func newHelmCLI(t *testing.T) *helmCLI {
	t.Helper()
	home := t.TempDir()
	return &helmCLI{bin: helmBinary(t), env: append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"))}
}

func (h *helmCLI) run(ctx context.Context, kubeconfig, kubeContext string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, h.bin, append([]string{"--kubeconfig", kubeconfig, "--kube-context", kubeContext}, args...)...)
	cmd.Env = h.env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("helm --kube-context %s %s: %w: %s", kubeContext, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

func (h *helmCLI) mustRun(t *testing.T, kubeconfig, kubeContext string, args ...string) string {
	t.Helper()
	out, err := h.run(t.Context(), kubeconfig, kubeContext, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// writeHelmChart writes a chart of the given version that puts its password value where charts do:
// a Secret, a ConfigMap's checksum-free copy and NOTES.txt, with a default password in values.yaml.
func writeHelmChart(t *testing.T, version, defaultPassword string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "shop")
	if err := os.MkdirAll(filepath.Join(dir, "templates"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "Chart.yaml"), fmt.Sprintf(
		"apiVersion: v2\nname: shop\ndescription: A test chart\ntype: application\nversion: %s\nappVersion: \"app-%s\"\n", version, version))
	writeFile(t, filepath.Join(dir, "values.yaml"), "password: "+defaultPassword+"\n")
	writeFile(t, filepath.Join(dir, "templates", "secret.yaml"),
		"apiVersion: v1\nkind: Secret\nmetadata:\n  name: {{ .Release.Name }}-db\nstringData:\n  password: {{ .Values.password | quote }}\n")
	writeFile(t, filepath.Join(dir, "templates", "configmap.yaml"),
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-config\ndata:\n  dsn: \"postgres://shop:{{ .Values.password }}@db/shop\"\n")
	writeFile(t, filepath.Join(dir, "templates", "NOTES.txt"), "Log in with the password {{ .Values.password }}.\n")
	return dir
}

// helmListed is a row of `helm list -o json`.
type helmListed struct {
	Name       string `json:"name"`
	Namespace  string `json:"namespace"`
	Revision   string `json:"revision"`
	Status     string `json:"status"`
	Chart      string `json:"chart"`
	AppVersion string `json:"app_version"`
}

// TestHelmFacade installs a chart with the real Helm into two members, at different chart versions
// (and upgrades one), and reads the releases back through the facade with the real Helm: helm list
// answers which chart version runs where, helm status and history work, and no value given to the
// chart (nor its default, nor what its templates rendered from it) is anywhere Helm can print.
func TestHelmFacade(t *testing.T) {
	env := testbed.Get(t)
	h := newHelmCLI(t)
	ns := uniqueName("helm")
	const password, defaultPassword = "e2e-helm-Pa55w0rd-do-not-leak", "e2e-helm-default-Pa55w0rd"
	t.Cleanup(func() {
		for _, c := range env.Clusters[:2] {
			_, _ = env.KubectlOutput(context.Background(), c, nil, "delete", "namespace", ns, "--wait=false", "--ignore-not-found")
		}
	})

	// shop-1 runs chart 1.0.0 then 1.1.0 in member1, shop-2 chart 2.0.0 in member2. Different names:
	// helm list keeps one release per name and namespace, so same-named releases of two members
	// show as one in the fleet view (the README says so); each member's context shows its own.
	install := func(cluster, release, version string, upgrade bool) {
		verb := "install"
		if upgrade {
			verb = "upgrade"
		}
		h.mustRun(t, env.Kubeconfig, cluster, verb, release, writeHelmChart(t, version, defaultPassword),
			"--namespace", ns, "--create-namespace", "--set", "password="+password)
	}
	install("member1", "shop-1", "1.0.0", false)
	install("member1", "shop-1", "1.1.0", true)
	install("member2", "shop-2", "2.0.0", false)
	// The members' own answer, which the facade's must equal.
	var want []helmListed
	for _, c := range []string{"member1", "member2"} {
		var rs []helmListed
		if err := json.Unmarshal([]byte(h.mustRun(t, env.Kubeconfig, c, "list", "-n", ns, "-o", "json")), &rs); err != nil {
			t.Fatal(err)
		}
		want = append(want, rs...)
	}
	if len(want) != 2 {
		t.Fatalf("the members list %d releases, want 2: %+v", len(want), want)
	}

	registries := t.TempDir()
	writeFile(t, filepath.Join(registries, "helm.yaml"), fmt.Sprintf(`apiVersion: search.karmada.io/v1alpha1
kind: ResourceRegistry
metadata: {name: helm-releases}
spec:
  resourceSelectors:
  - {apiVersion: v1, kind: Secret, namespace: %s}
`, ns))
	p := startQueryPipeline(t, env, registries)
	k := newFacadeKubectl(t, env, p.base)

	var got []helmListed
	pollUntil(t, "both releases in helm list -A through the facade", 2*time.Minute, func(ctx context.Context) (bool, error) {
		out, err := h.run(ctx, k.kubeconfig, "kubesearch", "list", "-A", "-o", "json")
		if err != nil {
			return false, nil
		}
		got = nil
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			return false, nil
		}
		got = slices.DeleteFunc(got, func(r helmListed) bool { return r.Namespace != ns })
		return len(got) == 2, nil
	})
	byName := func(a, b helmListed) int { return strings.Compare(a.Name, b.Name) }
	slices.SortFunc(got, byName)
	slices.SortFunc(want, byName)
	for i := range want {
		// "updated" differs in its rendering only; the rest is what a user reads off helm list.
		if got[i] != want[i] {
			t.Errorf("helm list -A through the facade:\n%+v\nwant (the members' own helm list):\n%+v", got, want)
			break
		}
	}
	if got[0].Chart != "shop-1.1.0" || got[0].Revision != "2" || got[1].Chart != "shop-2.0.0" || got[0].Status != "deployed" {
		t.Errorf("helm list -A: %+v, want shop-1 at shop-1.1.0 revision 2 and shop-2 at shop-2.0.0, deployed", got)
	}
	t.Logf("helm list -A through the facade:\n%s", h.mustRun(t, k.kubeconfig, "kubesearch", "list", "-A"))

	t.Run("each member's context lists its own release", func(t *testing.T) {
		for c, release := range map[string]string{"member1": "shop-1", "member2": "shop-2"} {
			out := h.mustRun(t, k.kubeconfig, "kubesearch-"+c, "list", "-n", ns, "-q")
			if strings.Fields(out)[0] != release || len(strings.Fields(out)) != 1 {
				t.Errorf("helm list --kube-context kubesearch-%s: %q, want %s", c, out, release)
			}
		}
	})

	t.Run("status and history", func(t *testing.T) {
		out := h.mustRun(t, k.kubeconfig, "kubesearch", "status", "shop-1", "-n", ns)
		if !containsAll(out, []string{"NAME: shop-1", "NAMESPACE: " + ns, "STATUS: deployed", "REVISION: 2"}) {
			t.Errorf("helm status shop-1:\n%s", out)
		}
		out = h.mustRun(t, k.kubeconfig, "kubesearch", "history", "shop-1", "-n", ns)
		if !containsAll(out, []string{"superseded", "shop-1.0.0", "Install complete", "deployed", "shop-1.1.0", "Upgrade complete"}) {
			t.Errorf("helm history shop-1:\n%s", out)
		}
		t.Logf("helm history shop-1 through the facade:\n%s", out)
	})

	t.Run("no value given to the chart is served", func(t *testing.T) {
		values := h.mustRun(t, k.kubeconfig, "kubesearch", "get", "values", "shop-2", "-n", ns)
		if !strings.Contains(values, "kubesearch.io/withheld") {
			t.Errorf("helm get values does not say the values are withheld:\n%s", values)
		}
		t.Logf("helm get values shop-2 through the facade:\n%s", values)
		for _, args := range [][]string{
			{"get", "values", "shop-2", "-n", ns},
			{"get", "values", "--all", "shop-2", "-n", ns},
			{"get", "all", "shop-1", "-n", ns},
			{"get", "all", "shop-2", "-n", ns},
			{"get", "manifest", "shop-2", "-n", ns},
			{"get", "notes", "shop-2", "-n", ns},
			{"status", "shop-2", "-n", ns, "-o", "json"},
			{"history", "shop-1", "-n", ns, "-o", "json"},
		} {
			out := h.mustRun(t, k.kubeconfig, "kubesearch", args...)
			if !containsNone(out, []string{password, defaultPassword}) {
				t.Errorf("helm %s prints a password:\n%s", strings.Join(args, " "), out)
			}
		}
		// Nor is it in what kubectl reads of the Secrets (Helm's and the chart's).
		out := k.mustRun(t, "get", "secrets", "-n", ns, "-o", "json")
		if !containsNone(out, []string{password, defaultPassword}) || !strings.Contains(out, `"kubesearch.io/helm-release-sanitized": "true"`) {
			t.Errorf("kubectl get secrets through the facade:\n%.3000s", out)
		}
	})
}
