//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubesearch/kubesearch/internal/testproxy"
	"github.com/kubesearch/kubesearch/tests/testbed"
)

var karmadaClustersGVR = schema.GroupVersionResource{Group: "cluster.karmada.io", Version: "v1alpha1", Resource: "clusters"}

// TestKarmadaClusters runs `kubesearch standalone --karmada-kubeconfig` against the test bed's
// Karmada control plane, whose members are Cluster objects (the project's CRD written from
// Karmada's API) pointing at two of the test bed's members, with their token and CA in Secrets:
// both members' objects are searchable under the Cluster objects' names; a Pull-mode Cluster is
// reported in the fleet status as not collected, with why; deleting a Cluster object purges its
// member's documents, as removing a cluster from a clusters file does. One member is reached
// through a forward proxy that requires headers (spec.proxyURL, spec.proxyHeader); a Cluster
// through it without them is reported with the proxy's 407.
func TestKarmadaClusters(t *testing.T) {
	env := testbed.Get(t)
	plane := env.Karmada(t)
	applyKarmadaClusterCRD(t, env, plane)
	dyn, core := planeClients(t, plane)

	ns := uniqueName("kclusters")
	suffix := strings.TrimPrefix(ns, "kclusters-")
	members := env.Clusters[:2]
	probeConfigMaps(t, env, ns, members)

	const secretNS = "karmada-cluster"
	names := createKarmadaMembers(t, env, dyn, core, suffix, members)
	// k2 is behind a proxy that admits only CONNECTs with its headers; Karmada's proxyHeader gives
	// several values of a header as one, comma-separated.
	proxy := testproxy.New(t, http.Header{"Proxy-Authorization": {"Basic a2FybWFkYTpzM2NyZXQ="}, "X-Tenant": {"blue", "green"}})
	proxied := fmt.Sprintf("k2-%s", suffix)
	patch := fmt.Sprintf(`{"spec":{"proxyURL":%q,"proxyHeader":{"Proxy-Authorization":"Basic a2FybWFkYTpzM2NyZXQ=","X-Tenant":"blue,green"}}}`, proxy.URL)
	if _, err := dyn.Resource(karmadaClustersGVR).Patch(t.Context(), proxied, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// The same member through the same proxy without the headers: never collected, and says why.
	noHeader := "noheader-" + suffix
	createKarmadaCluster(t, dyn, noHeader, map[string]any{"syncMode": "Push", "apiEndpoint": env.RESTConfig(t, members[1]).Host,
		"secretRef": map[string]any{"namespace": secretNS, "name": proxied}, "provider": "testbed", "proxyURL": proxy.URL})
	pull := "pull-" + suffix
	createKarmadaCluster(t, dyn, pull, map[string]any{"syncMode": "Pull", "apiEndpoint": "https://10.255.0.1:6443"})
	// A Cluster whose Secret does not exist: reported, and the others collected all the same.
	orphan := "orphan-" + suffix
	createKarmadaCluster(t, dyn, orphan, map[string]any{"syncMode": "Push", "apiEndpoint": env.RESTConfig(t, members[0]).Host,
		"secretRef": map[string]any{"namespace": secretNS, "name": orphan}, "provider": "testbed"})

	dir := t.TempDir()
	registryFile := filepath.Join(dir, "registry.yaml")
	// Selected by field, as a file's cluster with provider testbed would be.
	writeFile(t, registryFile, `apiVersion: search.karmada.io/v1alpha1
kind: ResourceRegistry
metadata: {name: karmada-clusters}
spec:
  targetCluster: {fieldSelector: {matchExpressions: [{key: provider, operator: In, values: [testbed]}]}}
  resourceSelectors: [{apiVersion: v1, kind: ConfigMap, namespace: `+ns+`}]
`)
	port := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	p := startProcess(t, "standalone", "standalone", "--karmada-kubeconfig", plane.Kubeconfig, "--registry", registryFile,
		"--data-dir", filepath.Join(dir, "data"), "--listen", fmt.Sprintf("127.0.0.1:%d", port))
	defer func() {
		if err := p.stop(30 * time.Second); err != nil {
			t.Errorf("standalone: %v\n%s", err, p.output())
		}
	}()
	waitHTTP(t, base+"/readyz", 2*time.Minute)

	indexed := func() []string {
		items, _ := searchAll(t, base, url.Values{"resources": {"configmaps"}, "namespaces": {ns}, "namePrefix": {"probe-"}}, nil)
		var got []string
		for _, it := range items {
			got = append(got, it.cluster+"/"+it.name)
		}
		slices.Sort(got)
		return got
	}
	var want []string
	for name, c := range names {
		want = append(want, name+"/probe-"+c)
	}
	slices.Sort(want)
	eventually(t, fmt.Sprintf("both members' ConfigMaps indexed under their Cluster objects' names %v", want), time.Minute, func() bool {
		return slices.Equal(indexed(), want)
	})
	connects, refused := proxy.Connects()
	var admitted int
	for _, h := range connects {
		if h.Get("X-Tenant") != "" {
			admitted++
		}
	}
	if admitted == 0 || refused == 0 {
		t.Errorf("the proxy admitted %d CONNECTs with the headers and refused %d without; want both", admitted, refused)
	}

	t.Run("Pull-mode and bad Clusters are reported as not collected", func(t *testing.T) {
		var body string
		eventually(t, "the fleet status names "+pull+", "+orphan+" and "+noHeader+"'s proxy refusal", 30*time.Second, func() bool {
			body = string(get(t, base, "/v1alpha1/fleet", nil).raw)
			return strings.Contains(body, pull) && strings.Contains(body, orphan) && strings.Contains(body, "Proxy Authentication Required")
		})
		for _, why := range []string{
			"Karmada Cluster " + pull + ": spec.syncMode is Pull",
			"Karmada Cluster " + orphan + ": spec.secretRef: Secret " + secretNS + "/" + orphan + " not found; not collected",
		} {
			if !strings.Contains(body, why) {
				t.Errorf("fleet status does not say %q:\n%s", why, body)
			}
		}
	})

	t.Run("deleting a Cluster object purges its member", func(t *testing.T) {
		gone := fmt.Sprintf("k2-%s", suffix)
		if err := dyn.Resource(karmadaClustersGVR).Delete(t.Context(), gone, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		kept := []string{fmt.Sprintf("k1-%s/probe-%s", suffix, members[0])}
		eventually(t, "only "+kept[0]+" left", time.Minute, func() bool { return slices.Equal(indexed(), kept) })
	})
}

// planeClients are clients of the Karmada control plane, as its admin.
func planeClients(t *testing.T, plane *testbed.KarmadaPlane) (dynamic.Interface, kubernetes.Interface) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", plane.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return dynamic.NewForConfigOrDie(cfg), kubernetes.NewForConfigOrDie(cfg)
}

// probeConfigMaps creates namespace ns in each of members with a ConfigMap probe-<member>, removed
// when the test ends.
func probeConfigMaps(t *testing.T, env *testbed.Env, ns string, members []string) {
	t.Helper()
	for _, c := range members {
		cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, c))
		createNamespace(t, cs, ns)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe-" + c, Namespace: ns}}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create configmap in %s: %v", c, err)
		}
		t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	}
}

// applyKarmadaClusterCRD installs the project's Cluster CRD on the control plane (idempotent: the
// tests share the plane) and waits until it is served.
func applyKarmadaClusterCRD(t *testing.T, env *testbed.Env, plane *testbed.KarmadaPlane) {
	t.Helper()
	applyCRD(t, env, plane, "../testbed/karmada/clusters.cluster.karmada.io.yaml", "clusters.cluster.karmada.io")
}

// applyCRD applies a CRD file to the control plane and waits until the CRD is served.
func applyCRD(t *testing.T, env *testbed.Env, plane *testbed.KarmadaPlane, file, name string) {
	t.Helper()
	crd, err := filepath.Abs(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"apply", "-f", crd},
		{"wait", "--for", "condition=Established", "--timeout", "60s", "crd/" + name},
	} {
		cmd := exec.CommandContext(t.Context(), env.Kubectl, append([]string{"--kubeconfig", plane.Kubeconfig}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
	}
}

// createKarmadaMembers makes a Push-mode Cluster object (provider testbed) for each of members,
// named k<i>-<suffix>, with its token and CA in a Secret of karmada-cluster, as Karmada keeps
// them; it returns Cluster object name → test bed member.
func createKarmadaMembers(t *testing.T, env *testbed.Env, dyn dynamic.Interface, core kubernetes.Interface, suffix string, members []string) map[string]string {
	t.Helper()
	const secretNS = "karmada-cluster"
	if _, err := core.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: secretNS}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	names := map[string]string{}
	for i, c := range members {
		name := fmt.Sprintf("k%d-%s", i+1, suffix)
		names[name] = c
		token, ca := memberCredentials(t, env, c)
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: secretNS},
			Data: map[string][]byte{"token": token, "caBundle": ca}}
		if _, err := core.CoreV1().Secrets(secretNS).Create(t.Context(), secret, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = core.CoreV1().Secrets(secretNS).Delete(context.Background(), name, metav1.DeleteOptions{})
		})
		createKarmadaCluster(t, dyn, name, map[string]any{"syncMode": "Push", "apiEndpoint": env.RESTConfig(t, c).Host,
			"secretRef": map[string]any{"namespace": secretNS, "name": name}, "provider": "testbed"})
	}
	return names
}

func createKarmadaCluster(t *testing.T, dyn dynamic.Interface, name string, spec map[string]any) {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
		"metadata": map[string]any{"name": name}, "spec": spec}}
	if _, err := dyn.Resource(karmadaClustersGVR).Create(t.Context(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Cluster %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(karmadaClustersGVR).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// memberCredentials returns the bearer token and CA bundle the test bed's kubeconfig reaches a
// member with: what a Karmada Cluster's Secret holds.
func memberCredentials(t *testing.T, env *testbed.Env, cluster string) (token, ca []byte) {
	t.Helper()
	cfg := env.RESTConfig(t, cluster)
	token, ca = []byte(cfg.BearerToken), cfg.CAData
	var err error
	if len(token) == 0 && cfg.BearerTokenFile != "" {
		if token, err = os.ReadFile(cfg.BearerTokenFile); err != nil {
			t.Fatal(err)
		}
	}
	if len(ca) == 0 && cfg.CAFile != "" {
		if ca, err = os.ReadFile(cfg.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	if len(token) == 0 || len(ca) == 0 {
		t.Fatalf("the test bed reaches %s without a bearer token and CA", cluster)
	}
	return token, ca
}
