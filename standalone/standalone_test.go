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

// Members from a Karmada control plane: exclusive with the other sources, and a control plane that
// cannot be read fails New with the flag named (the collector never starts on an unknown fleet).
func TestKarmadaMembers(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "karmada.kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: karmada, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: t}}]
contexts: [{name: karmada, context: {cluster: karmada, user: admin}}]
current-context: karmada
`), 0o600); err != nil {
		t.Fatal(err)
	}
	both := Options{KarmadaKubeconfig: kubeconfig, ClustersFile: filepath.Join(dir, "clusters.yaml"), DataDir: filepath.Join(dir, "data")}
	both.SetDefaults()
	if err := both.Validate(); err == nil || !strings.Contains(err.Error(), "--kubeconfig, --clusters, --karmada-kubeconfig: at most one") {
		t.Errorf("Validate() = %v, want the members' flags refused together", err)
	}
	o := Options{KarmadaKubeconfig: kubeconfig, DataDir: filepath.Join(dir, "data"), ListenAddr: "127.0.0.1:0"}
	o.SetDefaults()
	if o.Kubeconfig != "" {
		t.Errorf("SetDefaults chose kubeconfig %s besides --karmada-kubeconfig", o.Kubeconfig)
	}
	_, err := New(o)
	if err == nil || !strings.Contains(err.Error(), "--karmada-kubeconfig "+kubeconfig+": list clusters.cluster.karmada.io") {
		t.Errorf("New with an unreachable control plane: %v, want an error naming the flag and what it listed", err)
	}
}

// TestKarmadaRegistriesNeedsTheControlPlane: --karmada-registries reads the objects from the
// control plane of --karmada-kubeconfig, so it is refused without one.
func TestKarmadaRegistriesNeedsTheControlPlane(t *testing.T) {
	dir := t.TempDir()
	o := Options{KarmadaRegistries: true, ClustersFile: filepath.Join(dir, "clusters.yaml"), DataDir: filepath.Join(dir, "data")}
	o.SetDefaults()
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--karmada-registries: needs --karmada-kubeconfig") {
		t.Errorf("Validate() = %v, want --karmada-registries refused without --karmada-kubeconfig", err)
	}
	o.ClustersFile, o.KarmadaKubeconfig = "", filepath.Join(dir, "karmada.kubeconfig")
	if err := o.Validate(); err != nil && strings.Contains(err.Error(), "--karmada-registries") {
		t.Errorf("Validate() = %v with --karmada-kubeconfig", err)
	}
}
