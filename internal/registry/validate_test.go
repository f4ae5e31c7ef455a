package registry

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// goodRegistry is valid; each case below changes one thing.
func goodRegistry() ResourceRegistry {
	return ResourceRegistry{
		TypeMeta:   metav1.TypeMeta{APIVersion: APIVersion, Kind: Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "foo"},
		Spec: ResourceRegistrySpec{
			TargetCluster: ClusterAffinity{ClusterNames: []string{"member1"}},
			ResourceSelectors: []ResourceSelector{
				{APIVersion: "v1", Kind: "Pod"},
				{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default"},
			},
		},
	}
}

func TestValidateRegistry(t *testing.T) {
	fieldSelector := func(exprs ...corev1.NodeSelectorRequirement) *FieldSelector {
		return &FieldSelector{MatchExpressions: exprs}
	}
	tests := []struct {
		name   string
		modify func(r *ResourceRegistry)
		// want are prefixes of the errors, in order; empty means valid.
		want []string
	}{
		{name: "good", modify: func(*ResourceRegistry) {}},
		{name: "empty affinity and no selectors (a registry naming only the backend)", modify: func(r *ResourceRegistry) {
			r.Spec = ResourceRegistrySpec{BackendStore: &BackendStoreConfig{OpenSearch: &OpenSearchConfig{
				Addresses: []string{"https://opensearch:9200"}}}}
		}},
		{name: "group with version", modify: func(r *ResourceRegistry) {
			r.Spec.ResourceSelectors[1].APIVersion = "example.com/v1alpha1"
		}},
		{name: "label and field selectors", modify: func(r *ResourceRegistry) {
			r.Spec.TargetCluster.LabelSelector = &metav1.LabelSelector{
				MatchLabels: map[string]string{"env": "prod"},
				MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "topology.kubernetes.io/region", Operator: metav1.LabelSelectorOpIn, Values: []string{"eu"}},
				},
			}
			r.Spec.TargetCluster.FieldSelector = fieldSelector(
				corev1.NodeSelectorRequirement{Key: "provider", Operator: corev1.NodeSelectorOpIn, Values: []string{"aws"}},
				corev1.NodeSelectorRequirement{Key: "region", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"us-east-1"}},
				corev1.NodeSelectorRequirement{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"}},
			)
		}},
		{name: "secret data include", modify: func(r *ResourceRegistry) {
			r.Annotations = map[string]string{SecretDataAnnotation: SecretDataInclude}
		}},
		{name: "secret data redact", modify: func(r *ResourceRegistry) {
			r.Annotations = map[string]string{SecretDataAnnotation: SecretDataRedact}
		}},
		{name: "backend with secret", modify: func(r *ResourceRegistry) {
			r.Spec.BackendStore = &BackendStoreConfig{OpenSearch: &OpenSearchConfig{
				Addresses: []string{"https://os-0:9200", "http://10.240.0.100:9200"},
				SecretRef: LocalSecretReference{Namespace: "default", Name: "opensearch-account"},
			}}
		}},

		{name: "name missing", modify: func(r *ResourceRegistry) { r.Name = "" },
			want: []string{`metadata.name: Required value`}},
		{name: "name not a DNS subdomain", modify: func(r *ResourceRegistry) { r.Name = "Foo_bar" },
			want: []string{`metadata.name: Invalid value: "Foo_bar": a lowercase RFC 1123 subdomain`}},
		{name: "generateName instead of name", modify: func(r *ResourceRegistry) { r.Name, r.GenerateName = "", "foo-" },
			want: []string{`metadata.name: Required value: name or generateName is required`}},
		{name: "secret data annotation value", modify: func(r *ResourceRegistry) {
			r.Annotations = map[string]string{SecretDataAnnotation: "yes"}
		}, want: []string{`metadata.annotations[kubesearch.io/secret-data]: Unsupported value: "yes": supported values: "include", "redact"`}},
		{name: "apiVersion with two slashes", modify: func(r *ResourceRegistry) {
			r.Spec.ResourceSelectors[1].APIVersion = "apps/v1/x"
		}, want: []string{`spec.resourceSelectors[1].apiVersion: Invalid value: "apps/v1/x": unexpected GroupVersion string: apps/v1/x`}},
		{name: "apiVersion missing", modify: func(r *ResourceRegistry) { r.Spec.ResourceSelectors[0].APIVersion = "" },
			want: []string{`spec.resourceSelectors[0].apiVersion: Required value`}},
		{name: "apiVersion without version", modify: func(r *ResourceRegistry) { r.Spec.ResourceSelectors[1].APIVersion = "apps/" },
			want: []string{`spec.resourceSelectors[1].apiVersion: Invalid value: "apps/": must name a version`}},
		{name: "apiVersion with a bad group", modify: func(r *ResourceRegistry) {
			r.Spec.ResourceSelectors[1].APIVersion = "Apps_/v1"
		}, want: []string{`spec.resourceSelectors[1].apiVersion: Invalid value: "Apps_/v1": group: `}},
		{name: "apiVersion with a bad version", modify: func(r *ResourceRegistry) {
			r.Spec.ResourceSelectors[1].APIVersion = "apps/V1"
		}, want: []string{`spec.resourceSelectors[1].apiVersion: Invalid value: "apps/V1": version: `}},
		{name: "kind missing", modify: func(r *ResourceRegistry) { r.Spec.ResourceSelectors[0].Kind = "" },
			want: []string{`spec.resourceSelectors[0].kind: Required value`}},
		{name: "kind not a kind", modify: func(r *ResourceRegistry) { r.Spec.ResourceSelectors[0].Kind = "apps/Deployment" },
			want: []string{`spec.resourceSelectors[0].kind: Invalid value: "apps/Deployment": must be a kind`}},
		{name: "namespace not a DNS label", modify: func(r *ResourceRegistry) { r.Spec.ResourceSelectors[1].Namespace = "Kube_System" },
			want: []string{`spec.resourceSelectors[1].namespace: Invalid value: "Kube_System": a lowercase RFC 1123 label`}},
		{name: "field selector key", modify: func(r *ResourceRegistry) {
			r.Spec.TargetCluster.FieldSelector = fieldSelector(
				corev1.NodeSelectorRequirement{Key: "cloud", Operator: corev1.NodeSelectorOpIn, Values: []string{"aws"}})
		}, want: []string{`spec.targetCluster.fieldSelector.matchExpressions[0].key: Unsupported value: "cloud": supported values: "provider", "region", "zone"`}},
		{name: "field selector operator", modify: func(r *ResourceRegistry) {
			r.Spec.TargetCluster.FieldSelector = fieldSelector(
				corev1.NodeSelectorRequirement{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}},
				corev1.NodeSelectorRequirement{Key: "region", Operator: corev1.NodeSelectorOpExists})
		}, want: []string{`spec.targetCluster.fieldSelector.matchExpressions[1].operator: Unsupported value: "Exists": supported values: "In", "NotIn"`}},
		{name: "field selector without values", modify: func(r *ResourceRegistry) {
			r.Spec.TargetCluster.FieldSelector = fieldSelector(
				corev1.NodeSelectorRequirement{Key: "region", Operator: corev1.NodeSelectorOpNotIn})
		}, want: []string{`spec.targetCluster.fieldSelector.matchExpressions[0].values: Required value: operator NotIn needs at least one value`}},
		{name: "label selector operator", modify: func(r *ResourceRegistry) {
			r.Spec.TargetCluster.LabelSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "env", Operator: "Equals", Values: []string{"prod"}}}}
		}, want: []string{`spec.targetCluster.labelSelector.matchExpressions[0].operator: Invalid value: "Equals"`}},
		{name: "label selector key", modify: func(r *ResourceRegistry) {
			r.Spec.TargetCluster.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"bad key": "x"}}
		}, want: []string{`spec.targetCluster.labelSelector.matchLabels: Invalid value: "bad key"`}},
		{name: "cluster names", modify: func(r *ResourceRegistry) {
			r.Spec.TargetCluster.ClusterNames = []string{"member1", "Member_2"}
			r.Spec.TargetCluster.ExcludeClusters = []string{"member_3"}
		}, want: []string{
			`spec.targetCluster.clusterNames[1]: Invalid value: "Member_2"`,
			`spec.targetCluster.exclude[0]: Invalid value: "member_3"`,
		}},
		{name: "backend without addresses", modify: func(r *ResourceRegistry) {
			r.Spec.BackendStore = &BackendStoreConfig{OpenSearch: &OpenSearchConfig{}}
		}, want: []string{`spec.backendStore.openSearch.addresses: Required value`}},
		{name: "backend addresses", modify: func(r *ResourceRegistry) {
			r.Spec.BackendStore = &BackendStoreConfig{OpenSearch: &OpenSearchConfig{Addresses: []string{
				"https://os:9200", "ftp://os:9200", "localhost:9200", "https://", "http://%zz",
			}}}
		}, want: []string{
			`spec.backendStore.openSearch.addresses[1]: Invalid value: "ftp://os:9200": must be an http or https URL with a host`,
			`spec.backendStore.openSearch.addresses[2]: Invalid value: "localhost:9200": must be an http or https URL with a host`,
			`spec.backendStore.openSearch.addresses[3]: Invalid value: "https://": must be an http or https URL with a host`,
			`spec.backendStore.openSearch.addresses[4]: Invalid value: "http://%zz": not a URL`,
		}},
		{name: "backend address with credentials", modify: func(r *ResourceRegistry) {
			r.Spec.BackendStore = &BackendStoreConfig{OpenSearch: &OpenSearchConfig{Addresses: []string{
				"https://admin:s3cret@os:9200"}}}
		}, want: []string{`spec.backendStore.openSearch.addresses[0]: Invalid value: "https://admin:xxxxx@os:9200": must not carry credentials`}},
		{name: "secretRef half set", modify: func(r *ResourceRegistry) {
			r.Spec.BackendStore = &BackendStoreConfig{OpenSearch: &OpenSearchConfig{
				Addresses: []string{"https://os:9200"}, SecretRef: LocalSecretReference{Name: "os"}}}
		}, want: []string{`spec.backendStore.openSearch.secretRef.namespace: Required value`}},
		{name: "secretRef bad names", modify: func(r *ResourceRegistry) {
			r.Spec.BackendStore = &BackendStoreConfig{OpenSearch: &OpenSearchConfig{
				Addresses: []string{"https://os:9200"}, SecretRef: LocalSecretReference{Namespace: "A", Name: "b_c"}}}
		}, want: []string{
			`spec.backendStore.openSearch.secretRef.namespace: Invalid value: "A"`,
			`spec.backendStore.openSearch.secretRef.name: Invalid value: "b_c"`,
		}},
		{name: "every error at once", modify: func(r *ResourceRegistry) {
			r.Name = "Foo"
			r.Spec.ResourceSelectors = append(r.Spec.ResourceSelectors,
				ResourceSelector{APIVersion: "apps/v1/x", Kind: "", Namespace: "-"})
		}, want: []string{
			`metadata.name: Invalid value: "Foo"`,
			`spec.resourceSelectors[2].apiVersion: Invalid value: "apps/v1/x"`,
			`spec.resourceSelectors[2].kind: Required value`,
			`spec.resourceSelectors[2].namespace: Invalid value: "-"`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := goodRegistry()
			tt.modify(&r)
			errs := ValidateRegistry(&r)
			got := make([]string, len(errs))
			for i, e := range errs {
				got[i] = e.Error()
			}
			assertPrefixes(t, got, tt.want)
			for _, e := range got {
				if strings.Contains(e, "s3cret") {
					t.Errorf("error leaks a password: %s", e)
				}
			}
		})
	}
}

func TestValidateSet(t *testing.T) {
	registry := func(name string, selectors ...ResourceSelector) ResourceRegistry {
		return ResourceRegistry{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: ResourceRegistrySpec{ResourceSelectors: selectors}}
	}
	coreEvent := ResourceSelector{APIVersion: "v1", Kind: "Event"}
	eventsEvent := ResourceSelector{APIVersion: "events.k8s.io/v1", Kind: "Event"}
	pod := ResourceSelector{APIVersion: "v1", Kind: "Pod"}
	tests := []struct {
		name       string
		registries []ResourceRegistry
		want       []string
	}{
		{name: "distinct", registries: []ResourceRegistry{registry("a", pod), registry("b", coreEvent)}},
		{name: "same kind and group in other versions and namespaces", registries: []ResourceRegistry{
			registry("a", ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment"}),
			registry("b", ResourceSelector{APIVersion: "apps/v1beta2", Kind: "Deployment", Namespace: "x"}),
		}},
		{name: "duplicate name", registries: []ResourceRegistry{registry("a", pod), registry("b"), registry("a")},
			want: []string{`registry "a": metadata.name: Duplicate value: "a": a registry of this name is already defined`}},
		{name: "kind in two groups across registries", registries: []ResourceRegistry{
			registry("a", pod, coreEvent), registry("b", eventsEvent),
		}, want: []string{
			`registry "b": spec.resourceSelectors[0].kind: Invalid value: "Event": kind Event is also selected in API group "" (core) by registry "a" spec.resourceSelectors[1]; both would be stored in index kubernetes-event, so select it in one group only (the query API serves Events in both groups from either)`,
		}},
		{name: "kind in two groups in one registry", registries: []ResourceRegistry{registry("a", eventsEvent, pod, coreEvent)},
			want: []string{`registry "a": spec.resourceSelectors[2].kind: Invalid value: "Event": kind Event is also selected in API group "events.k8s.io" by registry "a" spec.resourceSelectors[0]`}},
		{name: "kinds differing in case share an index", registries: []ResourceRegistry{
			registry("a", ResourceSelector{APIVersion: "example.com/v1", Kind: "Widget"}),
			registry("b", ResourceSelector{APIVersion: "other.io/v1", Kind: "widget"}),
		}, want: []string{`registry "b": spec.resourceSelectors[0].kind: Invalid value: "widget": kind widget is also selected in API group "example.com"`}},
		{name: "errors of several registries at once", registries: []ResourceRegistry{
			registry("a", ResourceSelector{APIVersion: "apps/v1/x", Kind: "Deployment"}),
			registry("B", pod),
		}, want: []string{
			`registry "a": spec.resourceSelectors[0].apiVersion: Invalid value: "apps/v1/x"`,
			`registry "B": metadata.name: Invalid value: "B"`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertPrefixes(t, errorLines(Validate(tt.registries)), tt.want)
		})
	}
}

func TestFieldErrorUnwraps(t *testing.T) {
	r := goodRegistry()
	r.Spec.ResourceSelectors[0].Kind = ""
	err := Validate([]ResourceRegistry{r})
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("errors.As(%v, *FieldError) = false", err)
	}
	if fe.Registry != "foo" || fe.Err.Field != "spec.resourceSelectors[0].kind" {
		t.Errorf("got registry %q field %q", fe.Registry, fe.Err.Field)
	}
}

// errorLines splits a joined error into its lines; nil gives none.
func errorLines(err error) []string {
	if err == nil {
		return nil
	}
	return strings.Split(err.Error(), "\n")
}

// assertPrefixes checks that got[i] starts with want[i], and that the counts agree.
func assertPrefixes(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("error %d:\n got: %s\nwant: %s...", i, got[i], want[i])
		}
	}
}
