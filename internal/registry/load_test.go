package registry

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLoadSeedExample(t *testing.T) {
	regs, err := Load("testdata/seeds/001-clustercache-sample.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []ResourceRegistry{{
		TypeMeta:   metav1.TypeMeta{APIVersion: APIVersion, Kind: Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "clustercache-sample"},
		Spec: ResourceRegistrySpec{
			TargetCluster: ClusterAffinity{ClusterNames: []string{"member1", "member2", "member3"}},
			ResourceSelectors: []ResourceSelector{
				{APIVersion: "v1", Kind: "Pod"},
				{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
				{APIVersion: "apps/v1", Kind: "DaemonSet", Namespace: "kube-system"},
				{APIVersion: "apps/v1", Kind: "Deployment"},
			},
		},
	}}
	if !reflect.DeepEqual(regs, want) {
		t.Errorf("Load:\n got %+v\nwant %+v", regs, want)
	}
}

func TestLoadKarmadaDocsExamples(t *testing.T) {
	for _, file := range []string{"deployment-search.yaml", "resource-selector.yaml", "backend-store.yaml"} {
		t.Run(file, func(t *testing.T) {
			regs, err := Load(filepath.Join("testdata/karmada-docs", file))
			if err != nil {
				t.Fatal(err)
			}
			if len(regs) != 1 {
				t.Fatalf("got %d registries, want 1", len(regs))
			}
		})
	}
}

func TestLoadFolder(t *testing.T) {
	regs, err := Load("testdata/folder")
	if err != nil {
		t.Fatal(err)
	}
	// Files in name order, documents in file order; the dot file, the .txt file and the subfolder
	// are not read (each would fail to load).
	var names []string
	for _, r := range regs {
		names = append(names, r.Name)
	}
	want := []string{"workloads", "kube-system-daemonsets", "network", "events"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("names = %q, want %q", names, want)
	}
	if got := regs[3].Spec.ResourceSelectors[0]; got != (ResourceSelector{APIVersion: "events.k8s.io/v1", Kind: "Event"}) {
		t.Errorf("JSON file's selector = %+v", got)
	}
	if got := regs[1].Spec.TargetCluster.ExcludeClusters; !reflect.DeepEqual(got, []string{"member3"}) {
		t.Errorf("exclude = %q", got)
	}
}

func TestLoadList(t *testing.T) {
	regs, err := Load("testdata/list.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(regs) != 1 {
		t.Fatalf("got %d registries, want 1", len(regs))
	}
	r := regs[0]
	if r.Name != "secrets-eu" || r.Annotations[SecretDataAnnotation] != SecretDataInclude {
		t.Errorf("metadata = %+v", r.ObjectMeta)
	}
	wantFields := &FieldSelector{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "provider", Operator: corev1.NodeSelectorOpIn, Values: []string{"aws"}},
		{Key: "region", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"us-east-1"}},
	}}
	if !reflect.DeepEqual(r.Spec.TargetCluster.FieldSelector, wantFields) {
		t.Errorf("fieldSelector = %+v", r.Spec.TargetCluster.FieldSelector)
	}
	// Exported from kubesearch's store: the status carries kubesearch's admitted generation too.
	if len(r.Status.Conditions) != 1 || r.Status.Admitted == nil || r.Status.Admitted.Generation != 1 {
		t.Errorf("status not decoded: %+v", r.Status)
	}
}

// writeFiles writes name -> content under a new temporary folder and returns it.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const header = "apiVersion: search.karmada.io/v1alpha1\nkind: ResourceRegistry\n"

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		// path is loaded relative to the folder; empty loads the folder.
		path string
		// want are substrings of the error lines, in order.
		want []string
	}{
		{
			name: "unknown field named with its path",
			files: map[string]string{"a.yaml": header + `metadata: {name: a}
spec:
  targetCluster: {clusterNamez: [member1]}
  resourceSelectors: [{apiVersion: v1, kind: Pod, namspace: x}]
`},
			want: []string{
				`a.yaml: unknown field "spec.resourceSelectors[0].namspace"`,
				`a.yaml: unknown field "spec.targetCluster.clusterNamez"`,
			},
		},
		{
			name:  "field names are case-sensitive",
			files: map[string]string{"a.yaml": header + "metadata: {name: a}\nspec:\n  ResourceSelectors: []\n"},
			want:  []string{`a.yaml: unknown field "spec.ResourceSelectors"`},
		},
		{
			name:  "duplicate key",
			files: map[string]string{"a.yaml": header + "metadata: {name: a}\nmetadata: {name: b}\n"},
			want:  []string{`a.yaml: document 1: yaml: unmarshal errors:`, `line 4: key "metadata" already set in map`},
		},
		{
			name:  "wrong type of value",
			files: map[string]string{"a.yaml": header + "metadata: {name: a}\nspec:\n  targetCluster: {clusterNames: member1}\n"},
			want:  []string{`a.yaml: json: cannot unmarshal string into Go struct field`},
		},
		{
			name:  "not a registry",
			files: map[string]string{"a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"},
			want:  []string{`a.yaml: apiVersion "v1" kind "ConfigMap" is not a ResourceRegistry`},
		},
		{
			name:  "another version",
			files: map[string]string{"a.yaml": "apiVersion: search.karmada.io/v1\nkind: ResourceRegistry\nmetadata: {name: a}\n"},
			want:  []string{`a.yaml: apiVersion "search.karmada.io/v1" kind "ResourceRegistry" is not a ResourceRegistry`},
		},
		{
			name: "validation errors name file, document, registry and field",
			files: map[string]string{"a.yaml": header + "metadata: {name: ok}\n---\n" + header + `metadata: {name: foo}
spec:
  resourceSelectors:
  - {apiVersion: v1, kind: Pod}
  - {apiVersion: apps/v1/x, kind: Deployment}
`},
			want: []string{`a.yaml: document 2: registry "foo": spec.resourceSelectors[1].apiVersion: Invalid value: "apps/v1/x": unexpected GroupVersion string: apps/v1/x`},
		},
		{
			name: "duplicate names across files",
			files: map[string]string{
				"a.yaml": header + "metadata: {name: foo}\n",
				"b.yaml": header + "metadata: {name: bar}\n---\n" + header + "metadata: {name: foo}\n",
			},
			want: []string{`b.yaml: document 2: registry "foo": metadata.name: Duplicate value: "foo": a registry of this name is already defined in ` /* a.yaml */},
		},
		{
			name: "every file's errors at once",
			files: map[string]string{
				"a.yaml": header + "metadata: {name: a}\nspec: {bogus: 1}\n",
				"b.yaml": header + "metadata: {name: B}\n",
				"c.yaml": "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Secret\n",
			},
			want: []string{
				`a.yaml: unknown field "spec.bogus"`,
				`c.yaml: items[0]: apiVersion "v1" kind "Secret" is not a ResourceRegistry`,
				`b.yaml: registry "B": metadata.name: Invalid value: "B"`,
			},
		},
		{
			name:  "list item of another kind",
			files: map[string]string{"a.yaml": "apiVersion: search.karmada.io/v1alpha1\nkind: ResourceRegistryList\nitems:\n- metadata: {name: a}\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: b}\n"},
			want:  []string{`a.yaml: items[1]: apiVersion "v1" kind "Pod" is not a ResourceRegistry`},
		},
		{
			name:  "bad document separator",
			files: map[string]string{"a.yaml": header + "metadata: {name: a}\n--- extra\n"},
			want:  []string{`a.yaml: document 1: invalid Yaml document separator: extra`},
		},
		{
			name:  "empty folder",
			files: map[string]string{"README.md": "no registries here"},
			want:  []string{`no *.yaml, *.yml or *.json files in folder`},
		},
		{
			name:  "missing file",
			files: map[string]string{},
			path:  "nope.yaml",
			want:  []string{`load registries: stat ` /* ... */},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeFiles(t, tt.files)
			regs, err := Load(filepath.Join(dir, tt.path))
			if err == nil {
				t.Fatalf("Load = %d registries, want an error", len(regs))
			}
			if regs != nil {
				t.Errorf("Load returned registries with an error")
			}
			lines := errorLines(err)
			if len(lines) != len(tt.want) {
				t.Fatalf("got %d error lines, want %d:\n%v", len(lines), len(tt.want), err)
			}
			for i, w := range tt.want {
				if !strings.Contains(lines[i], w) {
					t.Errorf("error %d:\n got: %s\nwant: ...%s...", i, lines[i], w)
				}
			}
		})
	}
}

func TestLoadSkipsEmptyDocumentsAndReadsList(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"a.yaml": "---\n# only a comment\n---\n" + header + "metadata: {name: a}\n---\n\n",
		"b.yaml": "apiVersion: search.karmada.io/v1alpha1\nkind: ResourceRegistryList\nitems:\n- metadata: {name: b}\n  spec:\n    resourceSelectors: [{apiVersion: v1, kind: Pod}]\n",
		"c.yaml": "# empty file\n",
	})
	regs, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(regs) != 2 || regs[0].Name != "a" || regs[1].Name != "b" {
		t.Errorf("got %+v", regs)
	}
}

func TestLoadFollowsSymlinksLikeAConfigMapMount(t *testing.T) {
	// A mounted ConfigMap: data in a hidden folder, linked as ..data, each key a link through it.
	dir := writeFiles(t, map[string]string{
		"..2024_03_01/registries.yaml": header + "metadata: {name: a}\n",
	})
	if err := os.Symlink("..2024_03_01", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..data/registries.yaml", filepath.Join(dir, "registries.yaml")); err != nil {
		t.Fatal(err)
	}
	regs, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(regs) != 1 || regs[0].Name != "a" {
		t.Errorf("got %+v", regs)
	}
}
