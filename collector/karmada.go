package collector

import (
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubesearch/kubesearch/internal/registry"
)

// karmadaClusters is the resource of Karmada's member clusters (cluster-scoped).
var karmadaClusters = schema.GroupVersionResource{Group: "cluster.karmada.io", Version: "v1alpha1", Resource: "clusters"}

// karmadaMembers reads the member clusters from a Karmada control plane's Cluster objects.
//
// It lists them (and gets the Secret each references) at every reload check rather than running an
// informer: the plan is rebuilt on the reload ticker anyway, so a watch would be no fresher; a list
// needs no goroutine of its own and no cache to keep in step with the plan; and the Secrets are read
// one by one, so the collector needs get on the Secrets the Clusters name, not list/watch on every
// Secret of the control plane. The cost is one LIST and one GET per Cluster each ReloadInterval.
type karmadaMembers struct {
	source   string // the kubeconfig, for errors
	clusters dynamic.NamespaceableResourceInterface
	secrets  corev1client.SecretsGetter
}

// karmadaConfig is the client configuration of the control plane --karmada-kubeconfig names. Its
// rate is the members' (--qps, --burst): each check reads one Secret per Cluster object, and
// client-go's default of 5 requests per second would make a check of 1,000 members take minutes.
func karmadaConfig(kubeconfig string, qps float32, burst int) (*rest.Config, error) {
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("--karmada-kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.UserAgent = "kubesearch-collector"
	cfg.QPS, cfg.Burst = qps, burst
	return cfg, nil
}

func newKarmadaMembers(kubeconfig string, cfg *rest.Config) (*karmadaMembers, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("--karmada-kubeconfig %s: %w", kubeconfig, err)
	}
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("--karmada-kubeconfig %s: %w", kubeconfig, err)
	}
	return &karmadaMembers{source: kubeconfig, clusters: dyn.Resource(karmadaClusters), secrets: core.CoreV1()}, nil
}

// skippedCluster is a Cluster object that is not collected, and why.
type skippedCluster struct {
	Name   string
	Reason string
}

// karmadaRead is what one read of the control plane found.
type karmadaRead struct {
	clusters []registry.Cluster
	skipped  []skippedCluster
}

// read lists the Cluster objects and resolves the Push-mode ones into members. A Cluster that cannot
// be collected (Pull mode, a missing field or Secret, a bad CA) is skipped with its reason; only a
// failure to read the control plane itself is an error, so that an unreachable control plane or a
// transient error keeps the current members rather than purging them all.
func (k *karmadaMembers) read(ctx context.Context) (karmadaRead, error) {
	list, err := k.clusters.List(ctx, metav1.ListOptions{})
	if err != nil {
		return karmadaRead{}, fmt.Errorf("--karmada-kubeconfig %s: list %s: %w", k.source, karmadaClusters.GroupResource(), err)
	}
	var out karmadaRead
	for i := range list.Items {
		c, why, err := k.member(ctx, &list.Items[i])
		if err != nil {
			return karmadaRead{}, fmt.Errorf("--karmada-kubeconfig %s: %w", k.source, err)
		}
		if why != "" {
			out.skipped = append(out.skipped, skippedCluster{Name: list.Items[i].GetName(), Reason: why})
			continue
		}
		out.clusters = append(out.clusters, c)
	}
	slices.SortFunc(out.clusters, func(a, b registry.Cluster) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(out.skipped, func(a, b skippedCluster) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// member resolves one Cluster object: the member, or why it is not collected (naming the object and
// field), or an error reading the control plane.
func (k *karmadaMembers) member(ctx context.Context, obj *unstructured.Unstructured) (registry.Cluster, string, error) {
	name := obj.GetName()
	spec := field.NewPath("spec")
	str := func(path ...string) (string, string) {
		v, found, err := unstructured.NestedString(obj.Object, append([]string{"spec"}, path...)...)
		if err != nil {
			return "", err.Error()
		}
		if !found {
			return "", ""
		}
		return v, ""
	}
	var bad []string
	get := func(p *field.Path, path ...string) string {
		v, why := str(path...)
		if why != "" {
			bad = append(bad, fmt.Sprintf("%s: %s", p, why))
		}
		return v
	}
	mode := get(spec.Child("syncMode"), "syncMode")
	endpoint := get(spec.Child("apiEndpoint"), "apiEndpoint")
	proxy := get(spec.Child("proxyURL"), "proxyURL")
	c := registry.Cluster{
		Name:     name,
		Labels:   obj.GetLabels(),
		Provider: get(spec.Child("provider"), "provider"),
		Region:   get(spec.Child("region"), "region"),
		Zone:     get(spec.Child("zone"), "zone"),
		Server:   endpoint,
		ProxyURL: proxy,
	}
	insecure, _, err := unstructured.NestedBool(obj.Object, "spec", "insecureSkipTLSVerification")
	if err != nil {
		bad = append(bad, fmt.Sprintf("%s: %v", spec.Child("insecureSkipTLSVerification"), err))
	}
	c.InsecureSkipTLSVerify = insecure
	header, why := proxyHeaderMap(obj.Object)
	bad = append(bad, why...)
	c.ProxyHeader = proxyHeader(header)
	prefix := "Karmada Cluster " + name + ": "
	switch mode {
	case "Push":
	case "Pull":
		// Karmada's agent in the member pulls; nothing outside the member can reach its API server.
		return registry.Cluster{}, prefix + "spec.syncMode is Pull: the member is reached by Karmada's agent from inside, not from the control plane, so the collector cannot reach it either; not collected", nil
	case "":
		bad = append(bad, fmt.Sprintf("%s: Required value: Push (Pull-mode clusters cannot be collected)", spec.Child("syncMode")))
	default:
		bad = append(bad, fmt.Sprintf("%s: Unsupported value: %q: Push or Pull", spec.Child("syncMode"), mode))
	}
	if endpoint == "" {
		bad = append(bad, fmt.Sprintf("%s: Required value: the member's API server URL", spec.Child("apiEndpoint")))
	}
	ns := get(spec.Child("secretRef", "namespace"), "secretRef", "namespace")
	sname := get(spec.Child("secretRef", "name"), "secretRef", "name")
	if ns == "" || sname == "" {
		bad = append(bad, fmt.Sprintf("%s: Required value: namespace and name of the Secret holding token and caBundle", spec.Child("secretRef")))
	}
	if len(bad) > 0 {
		return registry.Cluster{}, prefix + strings.Join(bad, "; ") + "; not collected", nil
	}
	secret, err := k.secrets.Secrets(ns).Get(ctx, sname, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return registry.Cluster{}, fmt.Sprintf("%sspec.secretRef: Secret %s/%s not found; not collected", prefix, ns, sname), nil
	case err != nil:
		return registry.Cluster{}, "", fmt.Errorf("cluster %s: get Secret %s/%s: %w", name, ns, sname, err)
	}
	c.Token = string(secret.Data["token"])
	if c.Token == "" {
		bad = append(bad, fmt.Sprintf("Secret %s/%s: data.token: Required value: the bearer token the member accepts", ns, sname))
	}
	if !insecure {
		// With insecureSkipTLSVerification Karmada ignores the bundle, and so does the collector.
		c.CAData = secret.Data["caBundle"]
	}
	if len(bad) > 0 {
		return registry.Cluster{}, prefix + strings.Join(bad, "; ") + "; not collected", nil
	}
	if err := registry.ValidateClusters([]registry.Cluster{c}); err != nil {
		// The paths are the clusters file's (clusters[0].caData): name the Karmada fields instead.
		secret := "Secret " + ns + "/" + sname
		fields := strings.NewReplacer("clusters[0].name", "metadata.name", "clusters[0].labels", "metadata.labels",
			"clusters[0].server", "spec.apiEndpoint", "clusters[0].proxyURL", "spec.proxyURL", "clusters[0].proxyHeader", "spec.proxyHeader",
			"clusters[0].caData", secret+" data.caBundle", "clusters[0].caFile", secret+" data.caBundle",
			"clusters[0].token", secret+" data.token", "clusters[0].insecureSkipTLSVerify", "spec.insecureSkipTLSVerification")
		return registry.Cluster{}, prefix + strings.ReplaceAll(fields.Replace(err.Error()), "\n", "; ") + "; not collected", nil
	}
	return c, "", nil
}

// proxyHeaderMap reads spec.proxyHeader as a map of strings. unstructured.NestedStringMap would
// do, but its error prints the offending value, and a proxy header is often a credential
// (Proxy-Authorization): the reasons here name the field alone, as validateProxyHeader does.
func proxyHeaderMap(obj map[string]any) (map[string]string, []string) {
	path := field.NewPath("spec", "proxyHeader")
	v, found, err := unstructured.NestedFieldNoCopy(obj, "spec", "proxyHeader")
	if err != nil || !found || v == nil {
		return nil, nil // spec is not an object: the other fields say so
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, []string{fmt.Sprintf("%s: must be an object of header names to values, not a %T", path, v)}
	}
	out := make(map[string]string, len(m))
	var bad []string
	for _, name := range slices.Sorted(maps.Keys(m)) {
		s, ok := m[name].(string)
		if !ok {
			bad = append(bad, fmt.Sprintf("%s: a value must be a string (several values as one, comma-separated), not a %T", path.Key(name), m[name]))
			continue
		}
		out[name] = s
	}
	return out, bad
}

// proxyHeader reads a Cluster's spec.proxyHeader as Karmada does: a value holding commas is that
// many values of the header (`k1: v1,v2`), each trimmed, empty ones dropped.
func proxyHeader(m map[string]string) http.Header {
	if len(m) == 0 {
		return nil
	}
	h := make(http.Header, len(m))
	for name, value := range m {
		for v := range strings.SplitSeq(value, ",") {
			if v = strings.TrimSpace(v); v != "" {
				h.Add(name, v)
			}
		}
	}
	return h
}

// digest hashes everything the plan and the status are built from, credentials included, so a
// rotated token or CA is a change (the member reconnects) while an unchanged fleet is not.
func (r karmadaRead) digest(h io.Writer) {
	for _, c := range r.clusters {
		labels := make([]string, 0, len(c.Labels))
		for k, v := range c.Labels {
			labels = append(labels, k+"="+v)
		}
		slices.Sort(labels)
		// The proxy's headers are often a credential too: hashed, in a stable order.
		proxyHeader := make([]string, 0, len(c.ProxyHeader))
		for name, values := range c.ProxyHeader {
			proxyHeader = append(proxyHeader, fmt.Sprintf("%s=%q", name, values))
		}
		slices.Sort(proxyHeader)
		fmt.Fprintf(h, "cluster\x00%s\x00%q\x00%s\x00%s\x00%s\x00%s\x00%x\x00%x\x00%s\x00%x\x00%t\x00",
			c.Name, labels, c.Provider, c.Region, c.Zone, c.Server, sha256.Sum256([]byte(c.Token)), sha256.Sum256(c.CAData),
			c.ProxyURL, sha256.Sum256([]byte(strings.Join(proxyHeader, "\x00"))), c.InsecureSkipTLSVerify)
	}
	for _, s := range r.skipped {
		fmt.Fprintf(h, "skipped\x00%s\x00%s\x00", s.Name, s.Reason)
	}
}

// skippedRows are the status rows of the Cluster objects not collected: one per object, Failed with
// the reason, so /status and the query API's fleet status name them.
func skippedRows(skipped []skippedCluster, now time.Time) []registry.ResourceStatus {
	rows := make([]registry.ResourceStatus, 0, len(skipped))
	for _, s := range skipped {
		rows = append(rows, registry.ResourceStatus{Cluster: s.Name, Group: karmadaClusters.Group, Version: karmadaClusters.Version,
			Kind: "Cluster", State: registry.StateFailed, Reason: s.Reason, UpdateTime: now})
	}
	return rows
}
