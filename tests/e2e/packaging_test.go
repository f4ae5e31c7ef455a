//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/registry"
	"github.com/kubesearch/kubesearch/tests/testbed"
)

var (
	chartToolOnce sync.Once
	chartToolPath string
	chartToolErr  error
)

// chartTool builds tests/packaging/tools/chart (Helm's library; its own module) once per run.
func chartTool(t *testing.T) string {
	t.Helper()
	chartToolOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kubesearch-e2e-chart")
		if err != nil {
			chartToolErr = err
			return
		}
		chartToolPath = filepath.Join(dir, "chart")
		cmd := exec.Command("go", "build", "-o", chartToolPath, "./chart")
		cmd.Dir = filepath.Join(testbed.Root(), "tests/packaging/tools")
		cmd.Env = append(os.Environ(), "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			chartToolErr = fmt.Errorf("go build ./chart: %v\n%s", err, out)
		}
	})
	if chartToolErr != nil {
		t.Fatal(chartToolErr)
	}
	return chartToolPath
}

// renderChart is `helm template` of charts/kubesearch.
func renderChart(t *testing.T, release, namespace string, args ...string) []manifest {
	t.Helper()
	cmd := exec.Command(chartTool(t), append([]string{"template", "--chart", filepath.Join(testbed.Root(), "charts/kubesearch"),
		"--release", release, "--namespace", namespace}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chart template %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var out []manifest
	for _, doc := range strings.Split(stdout.String(), "\n---\n") {
		var m manifest
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("rendered manifest: %v\n%s", err, doc)
		}
		if m.Kind != "" {
			m.raw = doc
			out = append(out, m)
		}
	}
	return out
}

type manifest struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Data map[string]string `json:"data"`
	raw  string
}

func joinManifests(ms []manifest) []byte {
	var b strings.Builder
	for _, m := range ms {
		b.WriteString("---\n")
		b.WriteString(m.raw)
		b.WriteString("\n")
	}
	return []byte(b.String())
}

func randomSuffix(t *testing.T) string {
	t.Helper()
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// pkgNamespace creates a namespace on a member for this test and deletes it afterwards.
func pkgNamespace(t *testing.T, env *testbed.Env, cluster, ns string) {
	t.Helper()
	env.KubectlRun(t, cluster, nil, "create", "namespace", ns)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := env.KubectlOutput(ctx, cluster, nil, "delete", "namespace", ns, "--wait=false"); err != nil {
			t.Logf("cleanup: %v", err)
		}
	})
}

// Every values set of the chart renders manifests the test bed's kube-apiserver accepts, validated
// for real (`kubectl apply --dry-run=server`, strict field validation). ServiceMonitors are left out:
// the test bed has no Prometheus Operator CRD.
func TestChartManifestsAcceptedByAPIServer(t *testing.T) {
	env := testbed.Get(t)
	cluster := env.Clusters[len(env.Clusters)-1]
	sets, err := filepath.Glob(filepath.Join(testbed.Root(), "charts/kubesearch/ci/*-values.yaml"))
	if err != nil || len(sets) == 0 {
		t.Fatalf("charts/kubesearch/ci: %v", err)
	}
	sets = append(sets, "") // the defaults
	for _, values := range sets {
		name := strings.TrimSuffix(filepath.Base(values), "-values.yaml")
		if values == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			release := "ks-dry-" + randomSuffix(t)
			pkgNamespace(t, env, cluster, release)
			var args []string
			if values != "" {
				args = []string{"-f", values}
			}
			var objs []manifest
			for _, m := range renderChart(t, release, release, args...) {
				if m.Kind != "ServiceMonitor" {
					objs = append(objs, m)
				}
			}
			out := env.KubectlRun(t, cluster, joinManifests(objs), "apply", "--dry-run=server", "--validate=strict", "-f", "-")
			for _, m := range objs {
				want := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(strings.ToLower(m.Kind)) + `[./][^ ]*` + regexp.QuoteMeta(m.Metadata.Name) + ` (created|configured|unchanged) \(server dry run\)$`)
				if !want.Match(out) {
					t.Errorf("%s %s: not accepted:\n%s", m.Kind, m.Metadata.Name, out)
				}
			}
		})
	}
}

// The chart's collector RBAC, proven on a member: its ServiceAccount, ClusterRole, Role and bindings
// are applied, a token is minted for the ServiceAccount, and the real collector, holding only that
// token, lists and watches every resource its registries select; a selection outside the RBAC is
// reported Failed (403) while the rest goes on, and every write is refused.
func TestChartCollectorRBACOnMember(t *testing.T) {
	env := testbed.Get(t)
	cluster := env.Clusters[len(env.Clusters)-1]
	release := "ks-rbac-" + randomSuffix(t)
	dir := t.TempDir()

	values := filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(values, []byte(fmt.Sprintf(`
collector:
  mode: inCluster
  cluster: {name: %s}
indexer: {enabled: false}
queryapi: {enabled: false}
registries:
  - apiVersion: search.karmada.io/v1alpha1
    kind: ResourceRegistry
    metadata: {name: granted}
    spec:
      targetCluster: {}
      resourceSelectors:
        - {apiVersion: apps/v1, kind: Deployment}
        - {apiVersion: v1, kind: Namespace}
        - {apiVersion: v1, kind: ServiceAccount}
        - {apiVersion: v1, kind: ConfigMap, namespace: kube-system}
`, cluster)), 0o644); err != nil {
		t.Fatal(err)
	}
	objs := renderChart(t, release, release, "-f", values)
	var rbac []manifest
	var registries string
	sa := ""
	for _, m := range objs {
		switch m.Kind {
		case "ServiceAccount":
			sa = m.Metadata.Name
			rbac = append(rbac, m)
		case "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			rbac = append(rbac, m)
		case "ConfigMap":
			if r, ok := m.Data["registries.yaml"]; ok {
				registries = r
			}
		}
	}
	if sa == "" || len(rbac) != 5 || registries == "" {
		t.Fatalf("rendered: ServiceAccount %q, %d RBAC objects (want SA, ClusterRole+Binding, Role+Binding), registries %d bytes", sa, len(rbac), len(registries))
	}

	pkgNamespace(t, env, cluster, release)
	env.KubectlRun(t, cluster, joinManifests(rbac), "apply", "-f", "-")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := env.KubectlOutput(ctx, cluster, joinManifests(rbac), "delete", "--ignore-not-found", "-f", "-"); err != nil {
			t.Logf("cleanup: %v", err)
		}
	})
	token := strings.TrimSpace(string(env.KubectlRun(t, cluster, nil, "create", "token", sa, "-n", release, "--duration", "1h")))

	// A kubeconfig holding nothing but that token.
	admin, err := clientcmd.LoadFromFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	member := admin.Clusters[admin.Contexts[cluster].Cluster]
	kc := clientcmdapi.NewConfig()
	kc.Clusters[cluster] = &clientcmdapi.Cluster{Server: member.Server, CertificateAuthority: member.CertificateAuthority, CertificateAuthorityData: member.CertificateAuthorityData}
	kc.AuthInfos["collector"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts[cluster] = &clientcmdapi.Context{Cluster: cluster, AuthInfo: "collector"}
	kc.CurrentContext = cluster
	kubeconfig := filepath.Join(dir, "collector.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}

	// The chart's registries, as the pod reads them from the ConfigMap, plus one selection the RBAC
	// does not grant.
	regFile := filepath.Join(dir, "registries.yaml")
	if err := os.WriteFile(regFile, []byte(registries+`
---
apiVersion: search.karmada.io/v1alpha1
kind: ResourceRegistry
metadata: {name: outside-rbac}
spec:
  targetCluster: {}
  resourceSelectors:
    - {apiVersion: v1, kind: Secret, namespace: kube-system}
`), 0o644); err != nil {
		t.Fatal(err)
	}

	topic := "pkg-rbac-" + release
	events := tailTopic(t, env.KafkaBrokers, topic)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	p := startProcess(t, "collector", "collector", "--registry", regFile, "--kubeconfig", kubeconfig,
		"--kafka-brokers", strings.Join(env.KafkaBrokers, ","), "--topic", topic, "--listen", addr,
		"--name", release, "--discovery-interval", "5s")
	waitHTTP(t, "http://"+addr+"/readyz", 2*time.Minute)

	rows := collectorStatus(t, "http://"+addr+"/status")
	granted := map[string]string{"deployments": "", "namespaces": "", "serviceaccounts": "", "configmaps": "kube-system"}
	byResource := map[string]registry.ResourceStatus{}
	for _, r := range rows {
		byResource[r.Resource] = r
	}
	for res, ns := range granted {
		r, ok := byResource[res]
		switch {
		case !ok:
			t.Errorf("%s: no status row", res)
		case r.State != registry.StateRunning || r.Epoch == 0 || r.Namespace != ns:
			t.Errorf("%s: state %s (%s), epoch %d, namespace %q: want Running, listed, namespace %q", res, r.State, r.Reason, r.Epoch, r.Namespace, ns)
		}
	}
	// The reason is the member's own 403 Status, naming the resource and the ServiceAccount.
	secrets := byResource["secrets"]
	if secrets.State != registry.StateFailed || !strings.Contains(secrets.Reason, "secrets") || !strings.Contains(secrets.Reason, "forbidden") {
		t.Errorf("secrets: state %s, reason %q: want Failed, naming secrets and forbidden", secrets.State, secrets.Reason)
	}
	t.Logf("secrets outside the RBAC: %s: %s", secrets.State, secrets.Reason)

	// What it published: a SYNC per granted resource, counting as many objects as it published.
	evs := events.waitFor(t, "a SYNC per granted resource", time.Minute, func(evs []*envelope.Event) bool {
		seen := map[string]bool{}
		for _, ev := range evs {
			if ev.Type == envelope.Sync {
				seen[ev.Resource] = true
			}
		}
		return len(seen) == len(granted)
	})
	published := map[string]int{}
	for _, ev := range evs {
		if ev.Type == envelope.Added {
			published[ev.Resource]++
		}
		if ev.Cluster != cluster {
			t.Fatalf("event of cluster %q, want %q", ev.Cluster, cluster)
		}
		if ev.Resource == "secrets" {
			t.Fatalf("a Secret was published: %s/%s", ev.Namespace, ev.Name)
		}
	}
	for _, ev := range evs {
		if ev.Type == envelope.Sync && (ev.Count == nil || *ev.Count != published[ev.Resource]) {
			t.Errorf("%s: SYNC counts %v objects, %d were published", ev.Resource, ev.Count, published[ev.Resource])
		}
	}
	// kube-system's ConfigMaps are not churned by other tests: the count is the member's.
	want := strings.Count(string(env.KubectlRun(t, cluster, nil, "get", "configmaps", "-n", "kube-system", "-o", "name")), "\n")
	if got := published["configmaps"]; got != want {
		t.Errorf("published %d kube-system ConfigMaps, the member holds %d", got, want)
	}

	// Still running, and the only refusals it met are the Secrets'.
	select {
	case <-p.done:
		t.Fatalf("the collector exited: %v", p.err)
	default:
	}
	for line := range strings.Lines(p.output()) {
		if strings.Contains(strings.ToLower(line), "forbidden") && !strings.Contains(line, "secrets") {
			t.Errorf("refused something besides Secrets: %s", line)
		}
	}

	// Every write is refused: asked of the authorizer for each verb, and tried once for real.
	asCollector := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(t.Context(), env.Kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
		return cmd.CombinedOutput()
	}
	for _, verb := range []string{"create", "update", "patch", "delete", "deletecollection"} {
		for _, res := range []string{"deployments.apps", "namespaces", "serviceaccounts", "configmaps", "pods", "secrets"} {
			out, _ := asCollector("auth", "can-i", verb, res, "--all-namespaces")
			if lastLine(out) != "no" {
				t.Errorf("can-i %s %s: %q, want no", verb, res, out)
			}
		}
	}
	if out, _ := asCollector("auth", "can-i", "watch", "deployments.apps", "--all-namespaces"); lastLine(out) != "yes" {
		t.Errorf("can-i watch deployments: %q, want yes", out)
	}
	if out, err := asCollector("create", "configmap", release, "-n", "kube-system", "--from-literal=a=b"); err == nil || !strings.Contains(string(out), "forbidden") {
		t.Errorf("create configmap as the collector: %v %s, want forbidden", err, out)
	}
}

// lastLine is kubectl's answer after any warnings.
func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func collectorStatus(t *testing.T, url string) []registry.ResourceStatus {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Items []registry.ResourceStatus `json:"items"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return body.Items
}

// `docker-compose config` (Debian's docker-compose, installed by tests/packaging/install-tools.sh)
// accepts docker-compose.yml, profiles included. It needs no Docker engine.
func TestComposeFileAcceptedByDockerCompose(t *testing.T) {
	root := testbed.Root()
	install := exec.CommandContext(t.Context(), "bash", filepath.Join(root, "tests/packaging/install-tools.sh"))
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("install-tools.sh: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"config", "-q"}, {"--profile", "tools", "config", "-q"}} {
		cmd := exec.CommandContext(t.Context(), "docker-compose", append([]string{"-f", filepath.Join(root, "docker-compose.yml")}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("docker-compose %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	out, err := exec.CommandContext(t.Context(), "docker-compose", "-f", filepath.Join(root, "docker-compose.yml"), "--profile", "tools", "config", "--services").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kafka", "opensearch", "dashboards", "dashboards-import", "member1", "member2", "collector-member1", "collector-member2", "indexer", "queryapi", "workloads", "kubeconfig"} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(want) + `$`).Match(out) {
			t.Errorf("docker-compose config --services lacks %s:\n%s", want, out)
		}
	}
}

// The chart's locked-down query API, run for real: the Deployment's arguments and its rendered
// config.yaml (tokens from a Secret, the policy rendered from the values, TLS from a
// kubernetes.io/tls Secret), each mount replaced by a folder holding what its Secret or ConfigMap
// would, against the test bed's OpenSearch. The probes the chart gives the kubelet answer over HTTPS without credentials;
// everything else, /metrics included, needs a token the file holds; the rendered policy is in force.
func TestChartQueryAPIAuthOnTestBed(t *testing.T) {
	env := testbed.Get(t)
	release := "ks-auth-" + randomSuffix(t)
	dir := t.TempDir()
	values := filepath.Join(dir, "values.yaml")
	writeFile(t, values, fmt.Sprintf(`
collector: {enabled: false}
indexer: {enabled: false}
kafka: {brokers: [%s]}
opensearch: {addresses: [%q]}
queryapi:
  auth:
    tokenFile: {existingSecret: tokens}
    policy:
      rules:
        - subjects: [{kind: User, name: alice}]
          clusters: [%s]
          namespaces: [kube-system]
          resources: [configmaps]
          verbs: [get, list]
        - subjects: [{kind: User, name: prometheus}]
          nonResourceURLs: [/metrics]
          verbs: [get]
  tls: {existingSecret: serving}
`, strings.Join(env.KafkaBrokers, ", "), env.OpenSearchURL, env.Clusters[0]))

	var pod struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Args           []string `json:"args"`
						ReadinessProbe struct {
							HTTPGet struct {
								Path   string `json:"path"`
								Scheme string `json:"scheme"`
							} `json:"httpGet"`
						} `json:"readinessProbe"`
						VolumeMounts []struct {
							Name      string `json:"name"`
							MountPath string `json:"mountPath"`
						} `json:"volumeMounts"`
					} `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	var policy, config string
	for _, m := range renderChart(t, release, release, "-f", values) {
		switch {
		case m.Kind == "Deployment" && strings.HasSuffix(m.Metadata.Name, "-queryapi"):
			if err := yaml.Unmarshal([]byte(m.raw), &pod); err != nil {
				t.Fatal(err)
			}
		case m.Kind == "ConfigMap" && m.Data["policy.yaml"] != "":
			policy = m.Data["policy.yaml"]
		case m.Kind == "ConfigMap" && m.Metadata.Name == release+"-kubesearch-queryapi-config":
			config = m.Data["config.yaml"]
		}
	}
	if len(pod.Spec.Template.Spec.Containers) != 1 || policy == "" || config == "" {
		t.Fatalf("rendered: %d query API containers, policy %q, config %q", len(pod.Spec.Template.Spec.Containers), policy, config)
	}
	c := pod.Spec.Template.Spec.Containers[0]

	// What each Secret and ConfigMap holds, at the path its mount gives it.
	suffix := randomSuffix(t)
	aliceToken, promToken := "alice-"+suffix, "prometheus-"+suffix
	_, certFile, keyFile, pool := servingCertificate(t, dir)
	readFile := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	// The mounts move under dir: the paths in the arguments and in config.yaml follow them, and
	// nothing else of the rendered file changes.
	contents := map[string]map[string]string{
		"config": {"config.yaml": config},
		"tokens": {"tokens.csv": aliceToken + ",alice,1001,\n" + promToken + ",prometheus,1002,\n"},
		"policy": {"policy.yaml": policy},
		"tls":    {"tls.crt": readFile(certFile), "tls.key": readFile(keyFile)},
	}
	var moves []string // one pass over each string: a moved path is not moved again
	for _, vm := range c.VolumeMounts {
		local := filepath.Join(dir, "mounts", vm.Name)
		moves = append(moves, "="+vm.MountPath+"/", "="+local+"/", " "+vm.MountPath+"/", " "+local+"/")
	}
	move := strings.NewReplacer(moves...)
	args := slices.Clone(c.Args)
	for i, a := range args {
		args[i] = move.Replace(a)
	}
	contents["config"]["config.yaml"] = move.Replace(config)
	for _, vm := range c.VolumeMounts {
		local := filepath.Join(dir, "mounts", vm.Name)
		if err := os.MkdirAll(local, 0o755); err != nil {
			t.Fatal(err)
		}
		for file, content := range contents[vm.Name] {
			writeFile(t, filepath.Join(local, file), content)
		}
		delete(contents, vm.Name)
	}
	if len(contents) > 0 {
		t.Fatalf("no mount for %v", contents)
	}
	if want := []string{"queryapi", "--config=" + filepath.Join(dir, "mounts", "config", "config.yaml")}; !slices.Equal(args, want) {
		t.Fatalf("arguments %q, want %q", args, want)
	}
	// Two flags override the file, as the command line does: Kafka is left out (the facade's watch
	// cache and ledger are not under test, and readiness would wait for a ledger no collector writes
	// here), and the listener moves to a loopback port.
	port := freePort(t)
	args = append(args, "--kafka-brokers=", fmt.Sprintf("--listen=127.0.0.1:%d", port))
	startProcess(t, "queryapi", args...)

	if c.ReadinessProbe.HTTPGet.Scheme != "HTTPS" {
		t.Fatalf("readiness probe scheme %q, want HTTPS", c.ReadinessProbe.HTTPGet.Scheme)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	base := fmt.Sprintf("https://127.0.0.1:%d", port)
	get := func(path, token string) int {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	eventually(t, "the kubelet's readiness probe (HTTPS, no credentials) passes", 2*time.Minute, func() bool {
		return get(c.ReadinessProbe.HTTPGet.Path, "") == http.StatusOK
	})
	inScope := "/v1alpha1/search?resources=configmaps&namespaces=kube-system&clusters=" + env.Clusters[0] + "&limit=1&metadataOnly=true"
	outOfScope := "/v1alpha1/search?resources=configmaps&namespaces=default&limit=1&metadataOnly=true"
	for _, tc := range []struct {
		path, token string
		want        int
	}{
		{"/healthz", "", http.StatusOK},
		{inScope, "", http.StatusUnauthorized},
		{inScope, "forged-" + suffix, http.StatusUnauthorized},
		{inScope, aliceToken, http.StatusOK},
		{outOfScope, aliceToken, http.StatusForbidden},
		{"/metrics", "", http.StatusUnauthorized},
		{"/metrics", promToken, http.StatusOK},
		{"/metrics", aliceToken, http.StatusForbidden}, // it names every member; alice sees one
	} {
		if got := get(tc.path, tc.token); got != tc.want {
			t.Errorf("GET %s with token %q: %d, want %d", tc.path, tc.token, got, tc.want)
		}
	}
	// Plain HTTP is not served.
	if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port)); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP answered 200")
		}
	}
}
