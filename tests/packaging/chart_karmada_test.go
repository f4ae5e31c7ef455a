package packaging

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// karmadaValues is the CI values set of the Karmada mode.
func karmadaValues() []string {
	return []string{"-f", filepath.Join(chartDir(), "ci", "karmada-values.yaml")}
}

// renderedNames are the rendered objects as "<Kind>/<name>".
func renderedNames(objs []object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.Kind+"/"+o.Metadata.Name)
	}
	return out
}

// Karmada mode: the collector's members (and registries) come from the control plane of the
// kubeconfig Secret, mounted into it, instead of a clusters file; the query API trusts the control
// plane's front proxy and serves the registries it stores. Each flag naming a file is checked
// against the Secret or ConfigMap behind its mount.
func TestChartKarmadaMode(t *testing.T) {
	const (
		kubeconfig = "secret/karmada-kubeconfig/kubeconfig"
		frontProxy = "configMap/karmada-front-proxy-ca/requestheader-client-ca-file"
	)
	for _, tc := range []struct {
		name string
		set  []string
		// flag → its value, or for a flag naming a file where the file comes from; "" for a flag
		// that must not be passed.
		collector, queryapi map[string]string
		// objects that must be rendered (true) or not (false), "<Kind>/<name>"
		objects map[string]bool
	}{
		{"registries from the control plane", nil,
			map[string]string{"karmada-kubeconfig": kubeconfig, "karmada-registries": "true", "lease": "true", "name": "ks-kubesearch-collector",
				"clusters": "", "kubeconfig": "", "registry": ""},
			map[string]string{"karmada-kubeconfig": kubeconfig, "requestheader-client-ca-file": frontProxy,
				"requestheader-allowed-names": "front-proxy-client", "tls-cert-file": "secret/kubesearch-tls/tls.crt"},
			map[string]bool{"ConfigMap/ks-kubesearch-registries": false, "ConfigMap/ks-kubesearch-collector-clusters": false,
				"ClusterRole/ks-kubesearch-collector": false, "ClusterRoleBinding/ks-kubesearch-collector": false}},
		{"registries from files", []string{"karmada.registries=false"},
			map[string]string{"karmada-kubeconfig": kubeconfig, "karmada-registries": "", "registry": "configMap/ks-kubesearch-registries/registries.yaml", "clusters": ""},
			map[string]string{"karmada-kubeconfig": "", "requestheader-client-ca-file": frontProxy},
			map[string]bool{"ConfigMap/ks-kubesearch-registries": true, "ConfigMap/ks-kubesearch-collector-clusters": false}},
		{"registries from both", []string{"existingRegistryConfigMap=mine"},
			map[string]string{"karmada-registries": "true", "registry": "configMap/mine/registries.yaml"},
			map[string]string{"karmada-kubeconfig": kubeconfig},
			map[string]bool{"ConfigMap/ks-kubesearch-registries": false}},
		{"front proxy of a Secret", []string{"karmada.frontProxyCA.existingConfigMap=", "karmada.frontProxyCA.existingSecret=fp",
			"karmada.frontProxyCA.key=ca.crt", "karmada.frontProxyAllowedNames={front-proxy-client,aggregator}", "karmada.kubeconfigKey=config"},
			map[string]string{"karmada-kubeconfig": "secret/karmada-kubeconfig/config"},
			map[string]string{"requestheader-client-ca-file": "secret/fp/ca.crt", "requestheader-allowed-names": "front-proxy-client,aggregator"},
			nil},
		{"any front proxy certificate", []string{"karmada.frontProxyAllowedNames=null"},
			nil, map[string]string{"requestheader-allowed-names": "", "requestheader-client-ca-file": frontProxy}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := karmadaValues()
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			objs := splitManifests(t, renderChart(t, args...))
			for suffix, want := range map[string]map[string]string{"collector": tc.collector, "queryapi": tc.queryapi} {
				c := component(t, objs, suffix)
				for f, want := range want {
					got, ok := c.flags[f]
					switch {
					case want == "":
						if ok {
							t.Errorf("%s: --%s=%s, want none", suffix, f, got)
						}
					case !ok:
						t.Errorf("%s: --%s: not passed", suffix, f)
					case strings.HasSuffix(f, "-file") || strings.HasSuffix(f, "kubeconfig") || f == "registry":
						path := got
						if f == "registry" {
							path += "/registries.yaml" // a folder: the file the registries ConfigMap holds
						}
						if src := c.source(t, path); src != want {
							t.Errorf("%s: --%s=%s: from %s, want %s", suffix, f, got, src, want)
						}
					case got != want:
						t.Errorf("%s: --%s=%s, want %s", suffix, f, got, want)
					}
				}
				if suffix == "collector" && (c.pod.AutomountServiceAccountToken == nil || *c.pod.AutomountServiceAccountToken) {
					t.Errorf("collector: mounts a ServiceAccount token; its members are reached with the control plane's credentials")
				}
			}
			names := renderedNames(objs)
			for name, want := range tc.objects {
				if got := slices.Contains(names, name); got != want {
					t.Errorf("%s rendered: %v, want %v", name, got, want)
				}
			}
		})
	}
}

// Values that contradict the Karmada mode fail the render with a message naming the values.
func TestChartKarmadaRejects(t *testing.T) {
	base := []string{"karmada.enabled=true", "karmada.kubeconfigSecret=k", "queryapi.tls.existingSecret=tls",
		"karmada.frontProxyCA.existingConfigMap=fp"}
	without := func(drop string, add ...string) []string {
		return append(slices.DeleteFunc(slices.Clone(base), func(s string) bool { return strings.HasPrefix(s, drop+"=") }), add...)
	}
	for _, tc := range []struct {
		name string
		set  []string
		want string
	}{
		{"no kubeconfig Secret", without("karmada.kubeconfigSecret"), "karmada.kubeconfigSecret: required with karmada.enabled"},
		{"no kubeconfig Secret, collector only", without("karmada.kubeconfigSecret", "queryapi.enabled=false"), "karmada.kubeconfigSecret: required"},
		{"central mode", append(slices.Clone(base), "collector.mode=central"), "karmada.enabled: exclusive with collector.mode=central and collector.members"},
		{"member Secrets", append(slices.Clone(base), "collector.members[0].name=m1", "collector.members[0].secretName=m1"),
			"karmada.enabled: exclusive with collector.mode=central and collector.members"},
		{"the in-cluster member", append(slices.Clone(base), "collector.cluster.name=hub"), "karmada.enabled: exclusive with collector.cluster"},
		{"the in-cluster member's labels", append(slices.Clone(base), "collector.cluster.region=eu"), "karmada.enabled: exclusive with collector.cluster"},
		{"no HTTPS", without("queryapi.tls.existingSecret"), "queryapi.tls.existingSecret: required with karmada.enabled"},
		{"no front-proxy CA", without("karmada.frontProxyCA.existingConfigMap"), "karmada.frontProxyCA: required with karmada.enabled"},
		{"two front-proxy CAs", append(slices.Clone(base), "karmada.frontProxyCA.existingSecret=fp"), "karmada.frontProxyCA: existingSecret or existingConfigMap, not both"},
		{"a typo", append(slices.Clone(base), "karmada.kubeconfigSecert=k"), "kubeconfigSecert"},
		{"an empty allowed name", append(slices.Clone(base), "karmada.frontProxyAllowedNames[0]="), "/karmada/frontProxyAllowedNames/0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runErr(tool(t, "chart"), "template", "--chart", chartDir(), "--set", strings.Join(tc.set, ","))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("--set %s: %v, want an error saying %q", strings.Join(tc.set, ","), err, tc.want)
			}
		})
	}
	// The same values but the contradiction render: each case above fails for its own reason.
	if _, err := runErr(tool(t, "chart"), "template", "--chart", chartDir(), "--set", strings.Join(base, ",")); err != nil {
		t.Errorf("--set %s: %v", strings.Join(base, ","), err)
	}
}

// NOTES.txt in Karmada mode tells what to do on the control plane: apply deploy/karmada/, bind
// each ClusterRole it holds, and apply an APIService whose Service is the query API's, on its port.
func TestChartKarmadaNotes(t *testing.T) {
	notes := string(run(t, tool(t, "chart"), append([]string{"notes", "--chart", chartDir(), "--release", "ks", "--namespace", "search"}, karmadaValues()...)...))
	if !strings.Contains(notes, "kubectl --kubeconfig $KARMADA apply -f deploy/karmada/\n") {
		t.Errorf("NOTES.txt does not apply deploy/karmada/:\n%s", notes)
	}
	// Every ClusterRole of deploy/karmada/rbac.yaml is bound.
	data, err := os.ReadFile(filepath.Join(root(), "deploy", "karmada", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatal(err)
		}
		if o.Kind == "ClusterRole" {
			roles = append(roles, o.Metadata.Name)
		}
	}
	if len(roles) != 2 {
		t.Fatalf("deploy/karmada/rbac.yaml: ClusterRoles %q, want the collector's and the query API's", roles)
	}
	for _, r := range roles {
		if !strings.Contains(notes, "create clusterrolebinding "+r+" --clusterrole "+r+" ") {
			t.Errorf("NOTES.txt binds no ClusterRole %s:\n%s", r, notes)
		}
	}

	// The APIService, as NOTES.txt prints it (from "# apiservice.yaml" to the end).
	_, apply, ok := strings.Cut(notes, "\n# apiservice.yaml\n")
	if !ok {
		t.Fatalf("NOTES.txt holds no apiservice.yaml:\n%s", notes)
	}
	var service, apiService struct {
		Kind     string
		Metadata struct{ Name, Namespace string }
		Spec     struct {
			Type, ExternalName, Group, Version string
			CABundle                           string `json:"caBundle"`
			Service                            struct {
				Name, Namespace string
				Port            int
			}
		}
	}
	docs := strings.Split(apply, "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("apiservice.yaml: %d documents, want a Service and the APIService:\n%s", len(docs), apply)
	}
	if err := yaml.Unmarshal([]byte(docs[0]), &service); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(docs[1]), &apiService); err != nil {
		t.Fatal(err)
	}
	// The Service the chart renders for the query API.
	var port int
	for _, o := range splitManifests(t, renderChart(t, karmadaValues()...)) {
		if o.Kind == "Service" && o.Metadata.Name == "ks-kubesearch-queryapi" {
			ports, _ := o.Spec["ports"].([]any)
			p, _ := ports[0].(map[string]any)
			port, _ = strconv.Atoi(strings.TrimSpace(toString(p["port"])))
		}
	}
	s, a := service, apiService
	if s.Kind != "Service" || s.Metadata.Name != "ks-kubesearch-queryapi" || s.Metadata.Namespace != "search" || s.Spec.Type != "ExternalName" ||
		s.Spec.ExternalName != "ks-kubesearch-queryapi.search.svc.cluster.local" {
		t.Errorf("apiservice.yaml's Service %+v: want ExternalName ks-kubesearch-queryapi in search, to the query API's Service", s)
	}
	if a.Kind != "APIService" || a.Metadata.Name != "v1alpha1.search.karmada.io" || a.Spec.Group != "search.karmada.io" || a.Spec.Version != "v1alpha1" ||
		a.Spec.Service.Name != s.Metadata.Name || a.Spec.Service.Namespace != s.Metadata.Namespace || port == 0 || a.Spec.Service.Port != port ||
		a.Spec.CABundle != "<CA_BUNDLE>" {
		t.Errorf("apiservice.yaml's APIService %+v: want v1alpha1.search.karmada.io to that Service on the query API's port %d, caBundle a placeholder", a, port)
	}

	// Without the Karmada mode, none of it.
	plain := string(run(t, tool(t, "chart"), "notes", "--chart", chartDir()))
	if strings.Contains(plain, "Karmada") || strings.Contains(plain, "APIService") {
		t.Errorf("NOTES.txt without karmada.enabled mentions Karmada:\n%s", plain)
	}
}

func toString(v any) string {
	switch v := v.(type) {
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case string:
		return v
	}
	return ""
}
