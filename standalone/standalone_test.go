package standalone

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A setup step that fails after the data folder is locked and the index opened (here the
// collector refusing a bad registry) returns its error, names what was wrong, and releases what
// New had taken: a second New on the same folder is not refused as locked.
func TestNewFailsCleanly(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: member1, context: {cluster: c, user: u}}]
current-context: member1
`), 0o600); err != nil {
		t.Fatal(err)
	}
	registry := filepath.Join(dir, "registry.yaml")
	if err := os.WriteFile(registry, []byte(`apiVersion: search.karmada.io/v1alpha1
kind: ResourceRegistry
metadata: {name: bad}
spec:
  targetCluster: {}
  resourceSelectors:
  - {apiVersion: v1, kind: Event, namespace: a}
  - {apiVersion: events.k8s.io/v1, kind: Event, namespace: a}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	o := Options{Kubeconfig: kubeconfig, Registry: registry, DataDir: filepath.Join(dir, "data"), ListenAddr: "127.0.0.1:0"}
	for range 2 {
		s, err := New(o)
		if err == nil {
			t.Fatal("New accepted a registry selecting Event in two groups")
		}
		if s != nil {
			t.Errorf("New returned a Standalone with its error")
		}
		if !strings.Contains(err.Error(), "spec.resourceSelectors[1].kind") {
			t.Errorf("error %q does not name the field", err)
		}
	}
}
