package registry

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// created sets when an object was created: Admit tries the oldest first.
func created(r ResourceRegistry, minutes int) ResourceRegistry {
	r.CreationTimestamp = metav1.NewTime(time.Date(2026, 12, 1, 0, minutes, 0, 0, time.UTC))
	return r
}

func badSelector(r ResourceRegistry) ResourceRegistry {
	r.Spec.ResourceSelectors[0].Kind = ""
	return r
}

func withBackend(r ResourceRegistry, addr string) ResourceRegistry {
	r.Spec.BackendStore = &BackendStoreConfig{OpenSearch: &OpenSearchConfig{Addresses: []string{addr}}}
	return r
}

// TestAdmit: each object is judged on its own, oldest first, against what is in already; a bad or
// conflicting object is rejected with its reason and the others are admitted.
func TestAdmit(t *testing.T) {
	clusters := []Cluster{kubeconfigCluster("member1"), kubeconfigCluster("member2")}
	files := []ResourceRegistry{reg("from-file", nil, "v1 ConfigMap")}
	objects := []ResourceRegistry{
		// Named to sort before its elder, which must still win: creation order, not names.
		created(reg("a-events-too", nil, "events.k8s.io/v1 Event"), 5),
		created(reg("z-events", nil, "v1 Event"), 1),
		created(badSelector(reg("bad-selector", nil, "v1 Pod")), 2),
		created(reg("from-file", nil, "v1 Pod"), 3),
		created(includeSecrets(reg("secrets-kept", []string{"member1"}, "v1 Secret")), 4),
		created(reg("secrets-redacted", nil, "v1 Secret"), 6),
		created(withBackend(reg("backend-1", nil, "apps/v1 Deployment"), "https://os-1:9200"), 7),
		created(withBackend(reg("backend-2", nil, "apps/v1 ReplicaSet"), "https://os-2:9200"), 8),
		created(reg("pods", []string{"member2"}, "v1 Pod"), 9),
	}
	admitted, rejected := Admit(files, objects, clusters)
	var names []string
	for _, r := range admitted {
		names = append(names, r.Name)
	}
	if want := []string{"z-events", "secrets-kept", "backend-1", "pods"}; !slices.Equal(names, want) {
		t.Errorf("admitted %v, want %v (oldest first)", names, want)
	}
	for name, want := range map[string]string{
		"a-events-too":     `kind Event is also selected in API group "" (core) by registry "z-events"`,
		"bad-selector":     "spec.resourceSelectors[0].kind: Required value",
		"from-file":        "metadata.name: Duplicate value",
		"secrets-redacted": `cluster "member1": Secret: registry "secrets-kept" spec.resourceSelectors[0] keeps Secret data`,
		"backend-2":        `registries "backend-1" and "backend-2" name different OpenSearch backends`,
	} {
		err := rejected[name]
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: rejected with %v, want an error containing %q", name, err, want)
		}
	}
	if len(rejected) != 5 {
		t.Errorf("rejected %d objects, want 5: %v", len(rejected), rejected)
	}
	// The rejection names only the rejected object's problems, not those of the set around it.
	if err := rejected["a-events-too"]; err != nil && strings.Contains(err.Error(), `registry "z-events":`) {
		t.Errorf("a-events-too's rejection names another registry's problem: %v", err)
	}
	if _, err := NewPlan(append(slices.Clone(files), admitted...), clusters); err != nil {
		t.Errorf("the admitted set does not plan: %v", err)
	}
}

// TestFromObject: an object of the store's apiVersion decodes into Karmada's type, strictly.
func TestFromObject(t *testing.T) {
	r, err := FromObject([]byte(`{"apiVersion":"karmada.kubesearch.io/v1alpha1","kind":"ResourceRegistry",
		"metadata":{"name":"pods","uid":"u-1","generation":3,"managedFields":[{"manager":"kubectl","operation":"Apply"}]},
		"spec":{"targetCluster":{"clusterNames":["member1"]},"resourceSelectors":[{"apiVersion":"v1","kind":"Pod"}]},
		"status":{"conditions":[{"type":"Accepted","status":"True","reason":"Accepted","message":"","lastTransitionTime":"2026-12-01T00:00:00Z"}]}}`), "object pods")
	if err != nil {
		t.Fatal(err)
	}
	if r.APIVersion != APIVersion || r.Kind != Kind || r.Name != "pods" || r.Generation != 3 || len(r.Spec.ResourceSelectors) != 1 {
		t.Errorf("decoded %+v", r)
	}
	_, err = FromObject([]byte(`{"apiVersion":"karmada.kubesearch.io/v1alpha1","kind":"ResourceRegistry","metadata":{"name":"x"},
		"spec":{"targetCluster":{},"resourceSelectors":[],"resourceSelector":[]}}`), "object x")
	if err == nil || !strings.Contains(err.Error(), `object x: unknown field "spec.resourceSelector"`) {
		t.Errorf("unknown field: %v", err)
	}
}

// TestSpecDigest: the status is not part of what decides a change; the spec and the annotation are.
func TestSpecDigest(t *testing.T) {
	base := created(reg("a", nil, "v1 Pod"), 1)
	d := func(r ResourceRegistry) string {
		b, err := SpecDigest(r)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	withStatus := base
	withStatus.Status.Conditions = []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue}}
	withStatus.ResourceVersion = "99"
	if d(withStatus) != d(base) {
		t.Error("status or resourceVersion changed the digest")
	}
	if d(includeSecrets(base)) == d(base) {
		t.Error("the secret-data annotation did not change the digest")
	}
	if d(created(reg("a", nil, "v1 ConfigMap"), 1)) == d(base) {
		t.Error("the spec did not change the digest")
	}
}

func TestDescribe(t *testing.T) {
	var clusters []Cluster
	for _, n := range []string{"c01", "c02", "c03", "c04", "c05", "c06", "c07", "c08", "c09", "c10", "c11", "c12"} {
		clusters = append(clusters, kubeconfigCluster(n))
	}
	plan, err := NewPlan([]ResourceRegistry{reg("all", nil, "v1 Pod"), reg("one", []string{"c03"}, "v1 Pod"), reg("none", []string{"elsewhere"}, "v1 Pod")}, clusters)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"all":  "selects resources of 12 member clusters: c01, c02, c03, c04, c05, c06, c07, c08, c09, c10 and 2 more",
		"one":  "selects resources of 1 member cluster: c03",
		"none": "selects no member cluster's resources",
	} {
		if got := Describe(name, plan); got != want {
			t.Errorf("Describe(%s) = %q, want %q", name, got, want)
		}
		all, ok := DescribeAll(plan)[name]
		if !ok {
			all = Describe(name, Plan{})
		}
		if all != want {
			t.Errorf("DescribeAll(...)[%s] = %q, want %q", name, all, want)
		}
	}
}

// TestAdmitAllValid: a set that is fine as a whole is admitted whole, oldest first.
func TestAdmitAllValid(t *testing.T) {
	admitted, rejected := Admit([]ResourceRegistry{reg("file", nil, "v1 Pod")},
		[]ResourceRegistry{created(reg("b", nil, "v1 ConfigMap"), 2), created(reg("a", nil, "apps/v1 Deployment"), 3), created(reg("c", nil, "v1 Service"), 1)},
		[]Cluster{kubeconfigCluster("member1")})
	var names []string
	for _, r := range admitted {
		names = append(names, r.Name)
	}
	if !slices.Equal(names, []string{"c", "b", "a"}) || len(rejected) != 0 {
		t.Errorf("admitted %v, rejected %v; want c, b, a and none", names, rejected)
	}
}
