//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubesearch/kubesearch/tests/testbed"
)

// Karmada's paths, as Karmada's clients ask the control plane for them.
const (
	karmadaProxy = "/apis/search.karmada.io/v1alpha1/proxying/karmada/proxy"
	karmadaCache = "/apis/search.karmada.io/v1alpha1/search/cache"
)

// TestKarmada runs kubesearch as the aggregated API server behind a real kube-apiserver's
// aggregation layer — the test bed's Karmada control plane (karmada.sh) — with the APIService
// v1alpha1.search.karmada.io that karmada-search registers, and asks the control plane with
// kubectl for Karmada's URLs: the proxy answers the items the facade answers, a name in every
// member is a 409, a restricted user (a client certificate of the control plane, named to
// kubesearch by the front proxy) sees exactly what the facade shows it, the cache search lists
// every member's object of a name, a watch through the control plane sees a Pod created in a
// member, and kubectl pointed at the proxy path (as Karmada documents) lists the Pods.
func TestKarmada(t *testing.T) {
	env := testbed.Get(t)
	start := time.Now()
	plane := env.Karmada(t)
	t.Logf("the Karmada control plane ready after %s", time.Since(start).Round(time.Millisecond))
	ns := uniqueName("karmada")
	for _, c := range env.Clusters {
		cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, c))
		createNamespace(t, cs, ns)
		for _, p := range []*corev1.Pod{clientPodSpec("twin", nil), clientPodSpec("solo-"+c, nil)} {
			if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create pod %s in %s: %v", p.Name, c, err)
			}
		}
		t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	}
	// Running first (kwok), so two reads of the same list never race a status change.
	var clients []kubernetes.Interface
	for _, c := range env.Clusters {
		clients = append(clients, kubernetes.NewForConfigOrDie(env.RESTConfig(t, c)))
	}
	waitPodsRunning(t, ns, clients...)

	// kubesearch standalone over the members, serving HTTPS with a certificate for the name the
	// aggregation layer checks (<service>.<namespace>.svc), trusting the control plane's front
	// proxy, and with a policy: alice sees member1's Pods of ns only; the control plane's admin
	// (group system:masters) and root (the facade's token user, same group) see everything.
	dir := t.TempDir()
	caFile, certFile, keyFile, pool := issueCertificate(t, filepath.Join(dir, "serving"), "tls", &x509.Certificate{
		Subject: pkix.Name{CommonName: "kubesearch"}, DNSNames: []string{"kubesearch.karmada-system.svc", "localhost"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	tokens := filepath.Join(dir, "tokens.csv")
	writeFile(t, tokens, "root-token-"+ns+",root,1,\"system:masters\"\nalice-token-"+ns+",alice,2,\n")
	policy := filepath.Join(dir, "policy.yaml")
	writeFile(t, policy, fmt.Sprintf(`rules:
- subjects: [{kind: User, name: alice}]
  clusters: [%s]
  namespaces: [%s]
  resources: [pods]
  verbs: [get, list, watch]
- subjects: [{kind: Group, name: system:masters}]
  clusters: ["*"]
  namespaces: ["*"]
  resources: ["*"]
  verbs: ["*"]
`, env.Clusters[0], ns))
	registry := filepath.Join(dir, "registry.yaml")
	writeFile(t, registry, fmt.Sprintf(`apiVersion: search.karmada.io/v1alpha1
kind: ResourceRegistry
metadata: {name: karmada-e2e}
spec:
  resourceSelectors:
  - {apiVersion: v1, kind: Pod, namespace: %s}
`, ns))
	members := filepath.Join(dir, "members.kubeconfig")
	writeKubeconfig(t, env, members, env.Clusters)
	port := freePort(t)
	base := fmt.Sprintf("https://127.0.0.1:%d", port)
	startProcess(t, "standalone", "standalone", "--kubeconfig", members, "--registry", registry, "--data-dir", filepath.Join(dir, "data"),
		"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--anonymous=false", "--token-auth-file", tokens, "--authorization-policy-file", policy,
		"--tls-cert-file", certFile, "--tls-private-key-file", keyFile,
		"--requestheader-client-ca-file", plane.FrontProxyCA, "--requestheader-allowed-names", "front-proxy-client")
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	waitReadyz(t, client, base)
	root, alice := facadeKubectlAs(t, env, base, caFile, "root-token-"+ns), facadeKubectlAs(t, env, base, caFile, "alice-token-"+ns)
	pollUntil(t, "every seeded pod through the facade", 2*time.Minute, func(ctx context.Context) (bool, error) {
		out, err := root.run(ctx, "get", "--raw", "/api/v1/pods")
		return err == nil && len(podItems(t, out)) == 2*len(env.Clusters), nil
	})

	registerKarmadaAPIService(t, env, plane, dir, caFile, port)
	admin := func(args ...string) (string, error) { return kubectlAt(t.Context(), env, plane.Kubeconfig, args...) }
	rbac := filepath.Join(dir, "rbac.yaml")
	writeFile(t, rbac, `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: karmada-search-reader}
rules:
- apiGroups: [search.karmada.io]
  resources: ["*"]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: karmada-search-reader-alice}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: karmada-search-reader}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}
`)
	if out, err := admin("apply", "-f", rbac); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("the APIService Available after %s", time.Since(start).Round(time.Millisecond))

	t.Run("the group in the control plane's discovery", func(t *testing.T) {
		if out, err := admin("api-versions"); err != nil || !slices.Contains(strings.Fields(out), "search.karmada.io/v1alpha1") {
			t.Errorf("kubectl api-versions: %v %q, want search.karmada.io/v1alpha1", err, out)
		}
		// The aggregation layer merges what kubesearch's /apis says of search.karmada.io/v1alpha1,
		// and nothing else of it, into the control plane's aggregated discovery, which kubectl
		// reads. (kubectl api-resources shows no resource without verbs, as of karmada-search.)
		cfg, err := clientcmd.BuildConfigFromFlags("", plane.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var resources []string
		groups := map[string]int{}
		// The aggregation layer fetches a service's discovery when the APIService turns
		// available, and then every minute.
		pollUntil(t, "search.karmada.io/v1alpha1 in the control plane's aggregated discovery", time.Minute, func(ctx context.Context) (bool, error) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, plane.Server+"/apis", nil)
			req.Header.Set("Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
			resp, err := hc.Do(req)
			if err != nil {
				return false, nil
			}
			defer resp.Body.Close()
			var doc apidiscoveryv2.APIGroupDiscoveryList
			if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
				return false, nil
			}
			resources, groups = nil, map[string]int{}
			for _, g := range doc.Items {
				groups[g.Name]++
				if g.Name == "search.karmada.io" {
					for _, v := range g.Versions {
						for _, r := range v.Resources {
							resources = append(resources, v.Version+"/"+r.Resource)
						}
					}
				}
			}
			return len(resources) > 0, nil
		})
		if !slices.Equal(resources, []string{"v1alpha1/proxying", "v1alpha1/resourceregistries", "v1alpha1/search"}) || groups["apps"] != 1 {
			t.Errorf("the control plane's aggregated discovery: search.karmada.io %v, groups %v", resources, groups)
		}
	})

	t.Run("the proxy answers the facade's items", func(t *testing.T) {
		want, err := root.run(t.Context(), "get", "--raw", "/api/v1/pods")
		if err != nil {
			t.Fatal(err)
		}
		got, err := admin("get", "--raw", karmadaProxy+"/api/v1/pods")
		if err != nil {
			t.Fatal(err)
		}
		if g, w := podItems(t, got), podItems(t, want); !slices.Equal(g, w) || len(g) != 2*len(env.Clusters) {
			t.Errorf("through the control plane:\n%s\nthe facade:\n%s", strings.Join(g, "\n"), strings.Join(w, "\n"))
		}
		// The fleet's position, written as the facade writes it (a sealed mark of the stream:
		// opaque to clients, as Karmada's is); the watch below resumes from one.
		if rv, want := listRV(t, got), listRV(t, want); rv == "" || want == "" || (rv[0] == '~') != (want[0] == '~') {
			t.Errorf("list resourceVersion %q, the facade's %q: want the same form", rv, want)
		}
	})

	t.Run("a name in every member is a 409", func(t *testing.T) {
		_, err := admin("get", "--raw", karmadaProxy+"/api/v1/namespaces/"+ns+"/pods/twin")
		if err == nil || !strings.Contains(err.Error(), "Conflict") || !containsAll(err.Error(), env.Clusters) {
			t.Errorf("GET of twin: %v, want a 409 naming %v", err, env.Clusters)
		}
		out, err := admin("get", "--raw", karmadaProxy+"/api/v1/namespaces/"+ns+"/pods/solo-"+env.Clusters[1])
		if err != nil || !strings.Contains(out, `"resource.karmada.io/cached-from-cluster":"`+env.Clusters[1]+`"`) {
			t.Errorf("GET of a name in one member: %v %.300s, want it with the cache-source annotation", err, out)
		}
	})

	t.Run("a restricted user sees what the facade shows it", func(t *testing.T) {
		aliceAtPlane := plane.UserKubeconfig(t, "alice")
		want, err := alice.run(t.Context(), "get", "--raw", "/api/v1/pods")
		if err != nil {
			t.Fatal(err)
		}
		got, err := kubectlAt(t.Context(), env, aliceAtPlane, "get", "--raw", karmadaProxy+"/api/v1/pods")
		if err != nil {
			t.Fatal(err)
		}
		wantItems := []string{env.Clusters[0] + "/" + ns + "/solo-" + env.Clusters[0], env.Clusters[0] + "/" + ns + "/twin"}
		if g, w := podItems(t, got), podItems(t, want); !slices.Equal(g, w) || !slices.Equal(withoutUIDs(g), wantItems) {
			t.Errorf("alice through the control plane:\n%s\nthe facade:\n%s\nwant %v", strings.Join(g, "\n"), strings.Join(w, "\n"), wantItems)
		}
		if _, err := kubectlAt(t.Context(), env, aliceAtPlane, "get", "--raw", karmadaProxy+"/api/v1/namespaces/kube-system/pods"); err == nil ||
			!strings.Contains(err.Error(), `User "alice" cannot list`) {
			t.Errorf("alice outside her scope: %v, want kubesearch's 403", err)
		}
		// bob may not use the group on the control plane: its RBAC refuses before kubesearch is asked.
		if _, err := kubectlAt(t.Context(), env, plane.UserKubeconfig(t, "bob"), "get", "--raw", karmadaProxy+"/api/v1/pods"); err == nil ||
			!strings.Contains(err.Error(), "Forbidden") || !strings.Contains(err.Error(), "search.karmada.io") {
			t.Errorf("bob: %v, want the control plane's 403", err)
		}
	})

	t.Run("the cache search lists every member's object of a name", func(t *testing.T) {
		out, err := admin("get", "--raw", karmadaCache+"/api/v1/namespaces/"+ns+"/pods/twin")
		if err != nil {
			t.Fatal(err)
		}
		var clusters []string
		for _, it := range podItems(t, out) {
			clusters = append(clusters, strings.SplitN(it, "/", 2)[0])
		}
		if !slices.Equal(clusters, env.Clusters) {
			t.Errorf("cache search of twin: clusters %v, want %v", clusters, env.Clusters)
		}
	})

	t.Run("kubectl through the proxy path", func(t *testing.T) {
		out, err := admin("--server", plane.Server+karmadaProxy, "get", "pods", "-n", ns, "-o", "name")
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Fields(out); len(got) != 2*len(env.Clusters) {
			t.Errorf("kubectl get pods through %s: %q", karmadaProxy, got)
		}
	})

	t.Run("a watch through the control plane", func(t *testing.T) {
		list, err := admin("get", "--raw", karmadaProxy+"/api/v1/namespaces/"+ns+"/pods")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, env.Kubectl, "--kubeconfig", plane.Kubeconfig, "get", "--raw",
			karmadaProxy+"/api/v1/namespaces/"+ns+"/pods?watch=1&timeoutSeconds=50&resourceVersion="+listRV(t, list))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cancel(); _ = cmd.Wait() })
		added := uniqueName("watched")
		cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, env.Clusters[1]))
		if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), clientPodSpec(added, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var ev struct {
				Type   string `json:"type"`
				Object struct {
					Metadata metav1.ObjectMeta `json:"metadata"`
				} `json:"object"`
			}
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Type == "ADDED" && ev.Object.Metadata.Name == added {
				if c := ev.Object.Metadata.Annotations["resource.karmada.io/cached-from-cluster"]; c != env.Clusters[1] {
					t.Errorf("watched %s from cluster %q, want %s", added, c, env.Clusters[1])
				}
				return
			}
		}
		t.Errorf("the watch through the control plane ended without %s's ADDED: %v", added, sc.Err())
	})
}

// registerKarmadaAPIService points the control plane's APIService v1alpha1.search.karmada.io (as
// karmada-search registers it) at the query API on loopback port, whose serving certificate caFile
// signs, through an ExternalName Service, and waits until the aggregation layer marks it Available.
func registerKarmadaAPIService(t *testing.T, env *testbed.Env, plane *testbed.KarmadaPlane, dir, caFile string, port int) {
	t.Helper()
	apply := fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: karmada-system}
---
apiVersion: v1
kind: Service
metadata: {name: kubesearch, namespace: karmada-system}
spec: {type: ExternalName, externalName: localhost}
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1alpha1.search.karmada.io}
spec:
  group: search.karmada.io
  version: v1alpha1
  groupPriorityMinimum: 2000
  versionPriority: 10
  caBundle: %s
  service: {namespace: karmada-system, name: kubesearch, port: %d}
`, base64.StdEncoding.EncodeToString(mustRead(t, caFile)), port)
	applyFile := filepath.Join(dir, "apiservice.yaml")
	writeFile(t, applyFile, apply)
	if out, err := kubectlAt(t.Context(), env, plane.Kubeconfig, "apply", "-f", applyFile); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Cleanup(func() {
		// The next run's APIService names another port and certificate.
		_, _ = kubectlAt(context.Background(), env, plane.Kubeconfig, "delete", "apiservice", "v1alpha1.search.karmada.io", "--ignore-not-found")
	})
	pollUntil(t, "the APIService Available", 2*time.Minute, func(ctx context.Context) (bool, error) {
		out, err := kubectlAt(ctx, env, plane.Kubeconfig, "get", "apiservice", "v1alpha1.search.karmada.io",
			"-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`)
		return err == nil && out == "True", nil
	})
}

// kubectlAt runs the test bed's kubectl with a kubeconfig; an error carries its stderr.
func kubectlAt(ctx context.Context, env *testbed.Env, kubeconfig string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, env.Kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// podItems are a Pod list's items as cluster/namespace/name/uid/resourceVersion, sorted.
func podItems(t *testing.T, list string) []string {
	t.Helper()
	var l struct {
		Items []struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(list), &l); err != nil {
		t.Fatalf("not a list: %v: %.300s", err, list)
	}
	var out []string
	for _, it := range l.Items {
		m := it.Metadata
		out = append(out, strings.Join([]string{m.Annotations["resource.karmada.io/cached-from-cluster"], m.Namespace, m.Name, string(m.UID), m.ResourceVersion}, "/"))
	}
	slices.Sort(out)
	return out
}

// withoutUIDs keeps cluster/namespace/name of podItems.
func withoutUIDs(items []string) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = strings.Join(strings.SplitN(it, "/", 4)[:3], "/")
	}
	return out
}

func listRV(t *testing.T, list string) string {
	t.Helper()
	var l struct {
		Metadata metav1.ListMeta `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(list), &l); err != nil {
		t.Fatal(err)
	}
	return l.Metadata.ResourceVersion
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
