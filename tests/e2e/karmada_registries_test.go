//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubesearch/kubesearch/tests/testbed"
)

// TestKarmadaRegistries: a Karmada user's ResourceRegistry objects, written with kubectl to the
// control plane as search.karmada.io/v1alpha1, drive what kubesearch collects. `kubesearch
// standalone --karmada-kubeconfig --karmada-registries` runs as the aggregated API server of
// search.karmada.io (the APIService), storing the objects in the project's CRD
// (deploy/karmada); its members are Cluster objects. Created, a registry is collected within
// seconds and its status says Accepted with the members it selects, and records the generation
// collected (status.admitted); edited to fewer members, the others' documents are purged; an
// invalid edit keeps the generation admitted before, also across a restart of the process (which
// reads it from the status); an invalid new one is Accepted=False naming the field and changes
// nothing; deleted, its documents are purged. The query API serves the objects to the control
// plane's front proxy only.
func TestKarmadaRegistries(t *testing.T) {
	env := testbed.Get(t)
	plane := env.Karmada(t)
	applyKarmadaClusterCRD(t, env, plane)
	applyCRD(t, env, plane, "../../deploy/karmada/resourceregistries.karmada.kubesearch.io.yaml", "resourceregistries.karmada.kubesearch.io")
	dyn, core := planeClients(t, plane)

	ns := uniqueName("kregs")
	suffix := strings.TrimPrefix(ns, "kregs-")
	members := env.Clusters[:2]
	probeConfigMaps(t, env, ns, members)
	names := createKarmadaMembers(t, env, dyn, core, suffix, members)
	first := fmt.Sprintf("k1-%s", suffix)

	dir := t.TempDir()
	caFile, certFile, keyFile, pool := issueCertificate(t, filepath.Join(dir, "serving"), "tls", &x509.Certificate{
		Subject: pkix.Name{CommonName: "kubesearch"}, DNSNames: []string{"kubesearch.karmada-system.svc", "localhost"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	tokens := filepath.Join(dir, "tokens.csv")
	writeFile(t, tokens, "root-token-"+ns+",root,1,\"system:masters\"\n")
	port := freePort(t)
	base := fmt.Sprintf("https://127.0.0.1:%d", port)
	// No --registry: the control plane's objects are the whole configuration (none yet).
	args := []string{"standalone", "--karmada-kubeconfig", plane.Kubeconfig, "--karmada-registries",
		"--data-dir", filepath.Join(dir, "data"), "--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--anonymous=false", "--token-auth-file", tokens, "--tls-cert-file", certFile, "--tls-private-key-file", keyFile,
		"--requestheader-client-ca-file", plane.FrontProxyCA, "--requestheader-allowed-names", "front-proxy-client"}
	p := startProcess(t, "standalone", args...)
	top := t // the test's: a process a subtest starts for the subtests after it must outlive it
	defer func() {
		if err := p.stop(30 * time.Second); err != nil {
			t.Errorf("standalone: %v\n%s", err, p.output())
		}
	}()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	waitReadyz(t, client, base)
	registerKarmadaAPIService(t, env, plane, dir, caFile, port)
	root := facadeKubectlAs(t, env, base, caFile, "root-token-"+ns)
	admin := func(ctx context.Context, args ...string) (string, error) {
		return kubectlAt(ctx, env, plane.Kubeconfig, args...)
	}

	// indexed: the ConfigMaps of ns the facade holds, as cluster/name.
	indexed := func(ctx context.Context) ([]string, error) {
		out, err := root.run(ctx, "get", "--raw", "/api/v1/namespaces/"+ns+"/configmaps")
		if err != nil {
			return nil, err
		}
		var got []string
		for _, it := range podItems(t, out) {
			f := strings.SplitN(it, "/", 4)
			if strings.HasPrefix(f[2], "probe-") {
				got = append(got, f[0]+"/"+f[2])
			}
		}
		return got, nil
	}
	waitIndexed := func(what string, want []string) {
		t.Helper()
		slices.Sort(want)
		var got []string
		pollUntil(t, what, time.Minute, func(ctx context.Context) (bool, error) {
			var err error
			got, err = indexed(ctx)
			return err == nil && slices.Equal(got, want), nil
		})
	}
	// stored is an object as the control plane answers it, with the part of its status kubesearch
	// writes: the condition Accepted and status.admitted (the generation collected).
	type stored struct {
		APIVersion string `json:"apiVersion"`
		Metadata   struct {
			UID        string `json:"uid"`
			Generation int64  `json:"generation"`
		} `json:"metadata"`
		Status struct {
			Conditions []metav1.Condition `json:"conditions"`
			Admitted   *struct {
				UID        string `json:"uid"`
				Generation int64  `json:"generation"`
				Spec       struct {
					TargetCluster struct {
						ClusterNames []string `json:"clusterNames"`
					} `json:"targetCluster"`
				} `json:"spec"`
			} `json:"admitted"`
		} `json:"status"`
	}
	get := func(ctx context.Context, name string) (stored, error) {
		var obj stored
		out, err := admin(ctx, "get", "resourceregistries.search.karmada.io", name, "-o", "json")
		if err != nil {
			return obj, err
		}
		return obj, json.Unmarshal([]byte(out), &obj)
	}
	// collected waits until status.admitted names generation (of the object's current uid) and
	// returns the clusters its spec names.
	collected := func(t *testing.T, name string, generation func(current int64) int64) []string {
		t.Helper()
		var obj stored
		pollUntil(t, "status.admitted of the generation collected", 30*time.Second, func(ctx context.Context) (bool, error) {
			var err error
			obj, err = get(ctx, name)
			return err == nil && obj.Status.Admitted != nil && obj.Status.Admitted.UID == obj.Metadata.UID &&
				obj.Status.Admitted.Generation == generation(obj.Metadata.Generation), nil
		})
		return obj.Status.Admitted.Spec.TargetCluster.ClusterNames
	}
	accepted := func(ctx context.Context, name string) (metav1.Condition, string, error) {
		obj, err := get(ctx, name)
		if err != nil {
			return metav1.Condition{}, "", err
		}
		for _, c := range obj.Status.Conditions {
			if c.Type == "Accepted" && c.ObservedGeneration == obj.Metadata.Generation {
				return c, obj.APIVersion, nil
			}
		}
		return metav1.Condition{}, obj.APIVersion, nil
	}
	applyRegistry := func(name, yaml string) {
		t.Helper()
		file := filepath.Join(dir, name+".yaml")
		writeFile(t, file, yaml)
		// The aggregation layer answers 503 while it holds the APIService unavailable: after the
		// server behind it restarted, until a check of its own finds it back (it may still act on
		// a check made while the server was down). That is retried; any other failure is not.
		var out string
		pollUntil(t, "kubectl apply through the control plane", time.Minute, func(ctx context.Context) (bool, error) {
			var err error
			if out, err = admin(ctx, "apply", "-f", file); err != nil && !strings.Contains(out+err.Error(), "ServiceUnavailable") {
				return false, fmt.Errorf("%w\n%s", err, out)
			}
			return err == nil, nil
		})
	}
	registry := "cms-" + suffix
	selectorYAML := func(clusters string) string {
		return fmt.Sprintf(`apiVersion: search.karmada.io/v1alpha1
kind: ResourceRegistry
metadata: {name: %s}
spec:
  targetCluster: {clusterNames: [%s]}
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap, namespace: %s}]
`, registry, clusters, ns)
	}

	kept := []string{first + "/probe-" + names[first]} // what the registry selects once edited
	var all []string
	for name, c := range names {
		all = append(all, name+"/probe-"+c)
	}
	began := time.Now()
	applyRegistry(registry, selectorYAML(strings.Join(slices.Sorted(maps.Keys(names)), ", ")))
	waitIndexed("the registry's ConfigMaps of both members indexed", all)
	t.Logf("a registry created through the control plane: collected and searchable %s later", time.Since(began).Round(100*time.Millisecond))

	t.Run("its status says it is collected, under Karmada's apiVersion", func(t *testing.T) {
		var c metav1.Condition
		var apiVersion string
		pollUntil(t, "Accepted=True in the status", 30*time.Second, func(ctx context.Context) (bool, error) {
			var err error
			c, apiVersion, err = accepted(ctx, registry)
			return err == nil && c.Status == metav1.ConditionTrue, nil
		})
		if apiVersion != "search.karmada.io/v1alpha1" {
			t.Errorf("apiVersion %q through the control plane, want search.karmada.io/v1alpha1", apiVersion)
		}
		if want := "selects resources of 2 member clusters"; !strings.Contains(c.Message, want) {
			t.Errorf("message %q, want %q", c.Message, want)
		}
		// Beside the condition, the generation collected: the current one.
		current := func(g int64) int64 { return g }
		if got := collected(t, registry, current); len(got) != 2 {
			t.Errorf("status.admitted names clusters %v, want both members", got)
		}
	})

	t.Run("edited to one member, the other's documents are purged", func(t *testing.T) {
		applyRegistry(registry, selectorYAML(first))
		waitIndexed("only "+first+" left", kept)
	})

	t.Run("an invalid edit keeps the generation admitted before", func(t *testing.T) {
		applyRegistry(registry, fmt.Sprintf(`apiVersion: search.karmada.io/v1alpha1
kind: ResourceRegistry
metadata: {name: %s}
spec:
  targetCluster: {clusterNames: [%s], fieldSelector: {matchExpressions: [{key: continent, operator: In, values: [europe]}]}}
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap, namespace: %s}]
`, registry, first, ns))
		var c metav1.Condition
		pollUntil(t, "Accepted=False for the new generation", 30*time.Second, func(ctx context.Context) (bool, error) {
			var err error
			c, _, err = accepted(ctx, registry)
			return err == nil && c.Status == metav1.ConditionFalse, nil
		})
		for _, want := range []string{"spec.targetCluster.fieldSelector.matchExpressions[0].key", "admitted before, is collected still"} {
			if !strings.Contains(c.Message, want) {
				t.Errorf("message %q does not say %q", c.Message, want)
			}
		}
		// Still collected, not merely not purged yet: a ConfigMap created now is indexed.
		cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, names[first]))
		late := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe-late", Namespace: ns}}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(t.Context(), late, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		kept = append(kept, first+"/probe-late")
		waitIndexed("the earlier generation still collecting", kept)
		// The status records the generation before the invalid edit as the one collected.
		previous := func(g int64) int64 { return g - 1 }
		if got := collected(t, registry, previous); !slices.Equal(got, []string{first}) {
			t.Errorf("status.admitted names clusters %v, want [%s] (the generation before the invalid edit)", got, first)
		}
	})

	t.Run("restarted while the edit is refused, it keeps collecting the earlier generation", func(t *testing.T) {
		// The restarted process has no memory of the earlier generation: only the status has it.
		if err := p.stop(30 * time.Second); err != nil {
			t.Fatalf("SIGTERM: %v\n%s", err, p.output())
		}
		p = startProcess(top, "standalone", args...)
		waitReadyz(t, client, base)
		cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, names[first]))
		after := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe-restarted", Namespace: ns}}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(t.Context(), after, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		kept = append(kept, first+"/probe-restarted")
		waitIndexed("the earlier generation collected after the restart", kept)
		c, _, err := accepted(t.Context(), registry)
		if err != nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "admitted before, is collected still") {
			t.Errorf("condition after the restart %+v (%v), want Accepted=False saying the earlier generation is collected still", c, err)
		}
	})

	t.Run("an invalid registry is refused in its status and changes nothing", func(t *testing.T) {
		bad := "bad-" + suffix
		applyRegistry(bad, fmt.Sprintf(`apiVersion: search.karmada.io/v1alpha1
kind: ResourceRegistry
metadata: {name: %s}
spec:
  targetCluster: {labelSelector: {matchExpressions: [{key: tier, operator: Near}]}}
  resourceSelectors: [{apiVersion: v1, kind: Secret, namespace: %s}]
`, bad, ns))
		t.Cleanup(func() {
			_, _ = admin(context.Background(), "delete", "resourceregistries.search.karmada.io", bad, "--ignore-not-found")
		})
		var c metav1.Condition
		pollUntil(t, "Accepted=False in the status", 30*time.Second, func(ctx context.Context) (bool, error) {
			var err error
			c, _, err = accepted(ctx, bad)
			return err == nil && c.Status == metav1.ConditionFalse, nil
		})
		if want := "spec.targetCluster.labelSelector.matchExpressions[0].operator"; !strings.Contains(c.Message, want) {
			t.Errorf("message %q does not name %s", c.Message, want)
		}
		if got, err := indexed(t.Context()); err != nil || !slices.Equal(got, kept) {
			t.Errorf("after an invalid registry: %v %v, want %v", got, err, kept)
		}
	})

	t.Run("only the control plane's front proxy reaches the objects", func(t *testing.T) {
		_, err := root.run(t.Context(), "get", "--raw", "/apis/search.karmada.io/v1alpha1/resourceregistries")
		if err == nil || !strings.Contains(err.Error(), "Forbidden") {
			t.Errorf("a token user straight at the query API: %v, want Forbidden", err)
		}
	})

	t.Run("deleted, its documents are purged", func(t *testing.T) {
		if out, err := admin(t.Context(), "delete", "resourceregistries.search.karmada.io", registry); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		waitIndexed("nothing left", nil)
	})
}
