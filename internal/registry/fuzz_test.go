package registry

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// FuzzLoad: any registry file either loads into registries that, written back as one
// ResourceRegistryList, load to the same registries, or fails with errors that each name the
// file (and, inside it, the document or item).
// Run longer with: go test -fuzz FuzzLoad ./internal/registry/
func FuzzLoad(f *testing.F) {
	addSeedFiles(f, "testdata/list.yaml", "testdata/folder/*.yaml", "testdata/folder/*.yml", "testdata/folder/*.json",
		"testdata/karmada-docs/*.yaml", "testdata/seeds/*.yaml")
	for _, seed := range []string{
		"",
		"---\n# nothing\n---\n",
		"apiVersion: search.karmada.io/v1alpha1\nkind: ResourceRegistry\nmetadata: {name: a}\nspec:\n  targetCluster: {}\n  resourceSelectors: [{apiVersion: v1, kind: Pod}]\n  resourceSelectors: []\n",
		"apiVersion: search.karmada.io/v1alpha1\nkind: ResourceRegistryList\nitems:\n- metadata: {name: a}\n  spec: {targetCluster: {clusterNames: [member1]}, resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, namespace: shop}]}\n",
		"apiVersion: v1\nkind: List\nitems: [{apiVersion: v1, kind: ConfigMap}]\n",
		"apiVersion: search.karmada.io/v1alpha1\nkind: ResourceRegistry\nmetadata: {name: a}\nspec: {targetCluster: {}, resourceSelectors: [{apiVersion: v1, kind: Pod}]}\n---\napiVersion: search.karmada.io/v1alpha1\nkind: ResourceRegistry\nmetadata: {name: a}\nspec: {targetCluster: {}, resourceSelectors: [{apiVersion: v1, kind: Pod}], typo: 1}\n",
		"kind: ClusterCache\napiVersion: search.karmada.io/v1alpha1\n",
		"{\"apiVersion\": \"search.karmada.io/v1alpha1\", \"kind\": \"ResourceRegistry\", \"metadata\": {\"name\": \"\\u00ff\"}}",
		"\t- [\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "registries.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		regs, err := Load(path)
		if err != nil {
			if regs != nil {
				t.Fatalf("Load failed (%v) yet returned %d registries", err, len(regs))
			}
			for _, e := range leafErrors(err) {
				if !strings.Contains(e.Error(), path) {
					t.Fatalf("error %q does not name the file %s", e, path)
				}
			}
			return
		}
		first := marshalJSON(t, regs)
		list, err := json.Marshal(map[string]any{"apiVersion": APIVersion, "kind": ListKind, "items": regs})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, list, 0o600); err != nil {
			t.Fatal(err)
		}
		again, err := Load(path)
		if err != nil {
			t.Fatalf("registries loaded from %q do not load written back as %s: %v", data, list, err)
		}
		if second := marshalJSON(t, again); second != first {
			t.Fatalf("registries changed written back:\n%s\n%s", first, second)
		}
	})
}

// FuzzLoadClusters: any clusters file either loads into clusters with unique DNS-label names
// whose file paths are resolved (absolute) and that, written back, load to the same clusters, or
// fails with an error naming the file.
// Run longer with: go test -fuzz FuzzLoadClusters ./internal/registry/
func FuzzLoadClusters(f *testing.F) {
	addSeedFiles(f, "testdata/clusters/clusters.yaml")
	for _, seed := range []string{
		"clusters: []\n",
		"",
		"clusters:\n- name: member1\n  kubeconfig: ../kubeconfig\n  context: member1\n- name: member1\n  kubeconfig: /etc/k\n",
		"clusters:\n- name: m\n  server: https://user:pass@10.0.0.4:6443\n  caFile: ca.crt\n  tokenFile: token\n",
		"clusters:\n- name: m\n  server: http://10.0.0.4\n  tokenFile: t\n  insecureSkipTLSVerify: true\n  caFile: c\n",
		"clusters:\n- name: Member_1\n  labels: {\"bad key!\": x}\n  context: c\n",
		"clusters:\n- name: m\n  kubeconfig: k\n  kubeconfig: k2\n",
		"clusters:\n- {name: m, kubeconfig: k, region: eu, zone: eu-a, provider: aws, extra: 1}\n",
		"clusters: {name: m}\n",
		"clusters:\n- name: m\n  server: \"https://[::1]:6443\"\n  tokenFile: /t\n  insecureSkipTLSVerify: true\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "clusters.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		clusters, err := LoadClusters(path)
		if err != nil {
			if clusters != nil {
				t.Fatalf("LoadClusters failed (%v) yet returned %d clusters", err, len(clusters))
			}
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name the file %s", err, path)
			}
			return
		}
		names := map[string]bool{}
		for _, c := range clusters {
			if names[c.Name] || c.Name == "" || strings.Contains(c.Name, "_") {
				t.Fatalf("cluster name %q: empty, repeated or not a DNS label", c.Name)
			}
			names[c.Name] = true
			for _, p := range []string{c.Kubeconfig, c.CAFile, c.TokenFile} {
				if p != "" && !filepath.IsAbs(p) {
					t.Fatalf("cluster %s: path %q is not resolved against the file's folder", c.Name, p)
				}
			}
		}
		first := marshalJSON(t, clusters)
		out, err := yaml.Marshal(clustersFile{Clusters: clusters})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, out, 0o600); err != nil {
			t.Fatal(err)
		}
		again, err := LoadClusters(path)
		if err != nil {
			t.Fatalf("clusters loaded from %q do not load written back as %s: %v", data, out, err)
		}
		if second := marshalJSON(t, again); second != first {
			t.Fatalf("clusters changed written back:\n%s\n%s", first, second)
		}
	})
}

func addSeedFiles(f *testing.F, patterns ...string) {
	f.Helper()
	for _, pattern := range patterns {
		files, err := filepath.Glob(pattern)
		if err != nil || len(files) == 0 {
			f.Fatalf("no seed files %s: %v", pattern, err)
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
}

// leafErrors are the errors errors.Join joined into err, recursively: the messages a user reads
// one by one. Only err itself is asked (not errors.As, which would look through a wrapper whose
// message prefix covers what it wraps).
func leafErrors(err error) []error {
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range joined.Unwrap() {
		out = append(out, leafErrors(e)...)
	}
	return out
}

func marshalJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
