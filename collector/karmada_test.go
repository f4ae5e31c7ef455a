package collector

import (
	"crypto/sha256"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	certutil "k8s.io/client-go/util/cert"

	"github.com/kubesearch/kubesearch/internal/registry"
)

func karmadaCluster(name string, labels map[string]any, spec map[string]any) *unstructured.Unstructured {
	meta := map[string]any{"name": name}
	if labels != nil {
		meta["labels"] = labels
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "metadata": meta, "spec": spec,
	}}
}

func memberSecret(name string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "karmada-cluster", Name: name}, Data: data}
}

func secretRef(name string) map[string]any {
	return map[string]any{"namespace": "karmada-cluster", "name": name}
}

func newFakeKarmada(t *testing.T, clusters []*unstructured.Unstructured, secrets ...runtime.Object) (*karmadaMembers, *fake.Clientset) {
	t.Helper()
	scheme := runtime.NewScheme()
	objs := make([]runtime.Object, len(clusters))
	for i, c := range clusters {
		objs[i] = c
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme,
		map[schema.GroupVersionResource]string{karmadaClusters: "ClusterList"}, objs...)
	core := fake.NewClientset(secrets...)
	return &karmadaMembers{source: "karmada.kubeconfig", clusters: dyn.Resource(karmadaClusters), secrets: core.CoreV1()}, core
}

func TestKarmadaMembersRead(t *testing.T) {
	caPEM, _, err := certutil.GenerateSelfSignedCertKey("member", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	push := func(extra map[string]any) map[string]any {
		s := map[string]any{"syncMode": "Push", "apiEndpoint": "https://127.0.0.1:6443", "secretRef": secretRef("good")}
		for k, v := range extra {
			s[k] = v
		}
		return s
	}
	k, _ := newFakeKarmada(t, []*unstructured.Unstructured{
		karmadaCluster("member1", map[string]any{"env": "prod"},
			push(map[string]any{"provider": "aws", "region": "eu-west-1", "zone": "eu-west-1a", "proxyURL": "http://proxy:3128",
				"proxyHeader": map[string]any{"proxy-authorization": "Basic a2FybWFkYQ==", "X-Tenant": "blue, green,"}})),
		karmadaCluster("member2", nil, push(map[string]any{"insecureSkipTLSVerification": true, "secretRef": secretRef("badca")})),
		karmadaCluster("pulled", nil, map[string]any{"syncMode": "Pull"}),
		karmadaCluster("noendpoint", nil, map[string]any{"syncMode": "Push", "secretRef": secretRef("good")}),
		karmadaCluster("nosecret", nil, push(map[string]any{"secretRef": secretRef("gone")})),
		karmadaCluster("badca", nil, push(map[string]any{"secretRef": secretRef("badca")})),
		karmadaCluster("notoken", nil, push(map[string]any{"secretRef": secretRef("notoken")})),
		karmadaCluster("http", nil, push(map[string]any{"apiEndpoint": "http://127.0.0.1:6443"})),
		karmadaCluster("nomode", nil, map[string]any{"apiEndpoint": "https://127.0.0.1:6443", "secretRef": secretRef("good")}),
		karmadaCluster("noproxy", nil, push(map[string]any{"proxyHeader": map[string]any{"X-Tenant": "blue"}})),
		karmadaCluster("badheader", nil, push(map[string]any{"proxyURL": "http://proxy:3128",
			"proxyHeader": map[string]any{"Proxy-Authorization": "Basic s3cr3t\nX-Injected: 1"}})),
		// A value of another type than a string (a list, as http.Header holds) is refused without
		// echoing it: it is the credential, misspelt.
		karmadaCluster("listheader", nil, push(map[string]any{"proxyURL": "http://proxy:3128",
			"proxyHeader": map[string]any{"Proxy-Authorization": []any{"Basic s3cr3t"}}})),
	},
		memberSecret("good", map[string][]byte{"token": []byte("t0k3n"), "caBundle": caPEM}),
		memberSecret("badca", map[string][]byte{"token": []byte("t0k3n"), "caBundle": []byte("not a PEM")}),
		memberSecret("notoken", map[string][]byte{"caBundle": caPEM}),
	)
	got, err := k.read(t.Context())
	if err != nil {
		t.Fatalf("read: %v", err)
	}

	want := []registry.Cluster{
		{Name: "member1", Labels: map[string]string{"env": "prod"}, Provider: "aws", Region: "eu-west-1", Zone: "eu-west-1a",
			Server: "https://127.0.0.1:6443", Token: "t0k3n", CAData: caPEM, ProxyURL: "http://proxy:3128",
			ProxyHeader: http.Header{"Proxy-Authorization": {"Basic a2FybWFkYQ=="}, "X-Tenant": {"blue", "green"}}},
		// insecureSkipTLSVerification: the bundle (bad here) is ignored, as Karmada ignores it.
		{Name: "member2", Server: "https://127.0.0.1:6443", Token: "t0k3n", InsecureSkipTLSVerify: true},
	}
	if len(got.clusters) != len(want) {
		t.Fatalf("clusters: got %d %v, want %d", len(got.clusters), names(got.clusters), len(want))
	}
	for i := range want {
		g, w := got.clusters[i], want[i]
		if g.Name != w.Name || g.Provider != w.Provider || g.Region != w.Region || g.Zone != w.Zone || g.Server != w.Server ||
			g.Token != w.Token || string(g.CAData) != string(w.CAData) || g.ProxyURL != w.ProxyURL || !reflect.DeepEqual(g.ProxyHeader, w.ProxyHeader) ||
			g.InsecureSkipTLSVerify != w.InsecureSkipTLSVerify || len(g.Labels) != len(w.Labels) || g.Labels["env"] != w.Labels["env"] {
			t.Errorf("cluster %d:\ngot  %+v\nwant %+v", i, g, w)
		}
		if _, err := g.RESTConfig(); err != nil {
			t.Errorf("cluster %s: RESTConfig: %v", g.Name, err)
		}
	}

	// Each skipped object is named, with the field at fault.
	wantSkipped := map[string]string{
		"badca":      "Secret karmada-cluster/badca data.caBundle: Invalid value",
		"http":       "spec.apiEndpoint: Invalid value: \"http://127.0.0.1:6443\": must be an https URL",
		"noendpoint": "spec.apiEndpoint: Required value",
		"nomode":     "spec.syncMode: Required value",
		"nosecret":   "Secret karmada-cluster/gone not found",
		"notoken":    "data.token: Required value",
		"pulled":     "spec.syncMode is Pull",
		"noproxy":    "spec.proxyHeader: Forbidden: needs proxyURL",
		"badheader":  `spec.proxyHeader[Proxy-Authorization]: Invalid value: "(value hidden)"`,
		"listheader": "spec.proxyHeader[Proxy-Authorization]: a value must be a string",
	}
	if len(got.skipped) != len(wantSkipped) {
		t.Errorf("skipped: got %v, want %d", got.skipped, len(wantSkipped))
	}
	for _, s := range got.skipped {
		want, ok := wantSkipped[s.Name]
		if !ok {
			t.Errorf("skipped %s unexpectedly: %s", s.Name, s.Reason)
			continue
		}
		if !strings.Contains(s.Reason, want) || !strings.Contains(s.Reason, "Karmada Cluster "+s.Name+":") || strings.Contains(s.Reason, "s3cr3t") {
			t.Errorf("skipped %s: reason %q, want it to name the object and contain %q", s.Name, s.Reason, want)
		}
	}

	// /status (and so the query API's fleet status) names them, Failed with the reason.
	c := &Collector{skipped: got.skipped}
	rows := c.Status()
	if len(rows) != len(wantSkipped) {
		t.Fatalf("status: got %d rows, want %d", len(rows), len(wantSkipped))
	}
	for _, r := range rows {
		if r.State != registry.StateFailed || !strings.Contains(r.Reason, wantSkipped[r.Cluster]) || r.Kind != "Cluster" {
			t.Errorf("status row %+v: want Failed, kind Cluster, reason containing %q", r, wantSkipped[r.Cluster])
		}
	}
}

func names(cs []registry.Cluster) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}

// A control plane that cannot be read keeps the current members: read fails as a whole rather
// than leaving the Cluster out, which would purge its documents.
func TestKarmadaMembersReadSecretError(t *testing.T) {
	k, core := newFakeKarmada(t, []*unstructured.Unstructured{
		karmadaCluster("member1", nil, map[string]any{"syncMode": "Push", "apiEndpoint": "https://127.0.0.1:6443", "secretRef": secretRef("good")}),
	}, memberSecret("good", map[string][]byte{"token": []byte("t")}))
	core.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	if got, err := k.read(t.Context()); err == nil || !strings.Contains(err.Error(), "member1") {
		t.Fatalf("read: got %v, %v; want an error naming member1", got, err)
	}
}

// A rotated token changes the digest, so the reload path reconnects the member; the same read
// gives the same digest, so an unchanged fleet applies nothing.
func TestKarmadaReadDigest(t *testing.T) {
	base := karmadaRead{clusters: []registry.Cluster{{Name: "m", Server: "https://h", Token: "a", Labels: map[string]string{"x": "1", "y": "2"}}}}
	sum := func(r karmadaRead) [32]byte {
		h := sha256.New()
		r.digest(h)
		var s [32]byte
		copy(s[:], h.Sum(nil))
		return s
	}
	rotated := karmadaRead{clusters: []registry.Cluster{{Name: "m", Server: "https://h", Token: "b", Labels: map[string]string{"y": "2", "x": "1"}}}}
	relabelled := karmadaRead{clusters: []registry.Cluster{{Name: "m", Server: "https://h", Token: "a", Labels: map[string]string{"x": "1"}}}}
	pulled := karmadaRead{clusters: base.clusters, skipped: []skippedCluster{{Name: "p", Reason: "Pull"}}}
	if sum(base) != sum(base) {
		t.Error("the same read hashes differently")
	}
	// The proxy's headers are a credential too: a rotated Proxy-Authorization reconnects the
	// member; the same headers in another order of their names do not.
	proxied := func(h http.Header) karmadaRead {
		c := base.clusters[0]
		c.ProxyURL, c.ProxyHeader = "http://p:3128", h
		return karmadaRead{clusters: []registry.Cluster{c}}
	}
	withHeader := proxied(http.Header{"Proxy-Authorization": {"Basic YQ=="}, "X-Tenant": {"blue", "green"}})
	if sum(withHeader) != sum(proxied(http.Header{"X-Tenant": {"blue", "green"}, "Proxy-Authorization": {"Basic YQ=="}})) {
		t.Error("the same proxy headers hash differently")
	}
	for name, r := range map[string]karmadaRead{
		"proxy header rotated":   proxied(http.Header{"Proxy-Authorization": {"Basic Yg=="}, "X-Tenant": {"blue", "green"}}),
		"proxy values reordered": proxied(http.Header{"Proxy-Authorization": {"Basic YQ=="}, "X-Tenant": {"green", "blue"}}),
		"proxy header removed":   proxied(http.Header{"Proxy-Authorization": {"Basic YQ=="}}),
	} {
		if sum(r) == sum(withHeader) {
			t.Errorf("%s: digest unchanged", name)
		}
	}
	for name, r := range map[string]karmadaRead{"token rotated": rotated, "label removed": relabelled, "cluster skipped": pulled} {
		if sum(r) == sum(base) {
			t.Errorf("%s: digest unchanged", name)
		}
	}
}

func TestOptionsMembersExclusive(t *testing.T) {
	for _, tt := range []struct {
		name                          string
		clusters, kubeconfig, karmada string
		wantErr                       bool
	}{
		{name: "karmada alone", karmada: "k"},
		{name: "clusters alone", clusters: "c"},
		{name: "karmada and kubeconfig", karmada: "k", kubeconfig: "c", wantErr: true},
		{name: "karmada and clusters", karmada: "k", clusters: "c", wantErr: true},
		{name: "none", wantErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := Options{Registry: "r", Brokers: []string{"b"}, ClustersFile: tt.clusters, Kubeconfig: tt.kubeconfig, KarmadaKubeconfig: tt.karmada}
			o.SetDefaults()
			err := o.Validate()
			if got := err != nil && strings.Contains(err.Error(), "--karmada-kubeconfig: exactly one is required"); got != tt.wantErr {
				t.Errorf("Validate() = %v, want a members error: %v", err, tt.wantErr)
			}
		})
	}
}
