package registry

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// TestAdmitOneInvalidAtScale: one invalid object among hundreds (a typo, or an object written to
// make every reload slow) must not turn Admit into a plan per object over the whole fleet: an object
// invalid on its own is refused without one.
func TestAdmitOneInvalidAtScale(t *testing.T) {
	clusters, objects := manyRegistries()
	objects = append(objects, created(badSelector(reg("typo", nil, "v1 Pod")), 400))
	plans := countPlans(t)
	admitted, rejected := Admit(nil, objects, clusters)
	if len(admitted) != 300 || len(rejected) != 1 || rejected["typo"] == nil {
		t.Fatalf("admitted %d, rejected %v", len(admitted), rejected)
	}
	// A plan per object took minutes at 1,000 clusters; the refused one needs no plan, the rest one.
	if *plans > 2 {
		t.Errorf("Admit made %d plans, want at most 2", *plans)
	}
}

// TestAdmitPlanConflictAtScale: an object that conflicts only in the plan (Secret data kept by one
// registry, redacted by another) is found without a plan per object, and the verdicts are those of
// judging each object in turn.
func TestAdmitPlanConflictAtScale(t *testing.T) {
	clusters, objects := manyRegistries()
	objects = append(objects, created(includeSecrets(reg("keep", nil, "v1 Secret")), 50),
		created(reg("redact", nil, "v1 Secret"), 150), created(reg("redact-too", nil, "v1 Secret"), 250))
	plans := countPlans(t)
	admitted, rejected := Admit(nil, objects, clusters)
	if len(admitted) != 301 || len(rejected) != 2 || rejected["redact"] == nil || rejected["redact-too"] == nil {
		t.Fatalf("admitted %d, rejected %v", len(admitted), rejected)
	}
	if !strings.Contains(rejected["redact"].Error(), `registry "keep"`) {
		t.Errorf("redact refused for %v", rejected["redact"])
	}
	// Halving finds each conflicting object in a few plans, where judging each object alone
	// would make one per object (303).
	if *plans > 40 {
		t.Errorf("Admit made %d plans, want at most 40", *plans)
	}
	t.Logf("%d plans", *plans)
}

// manyRegistries are 20 clusters and 300 valid registries, each of its own namespace's ConfigMaps:
// the number of plans Admit makes of them is the figure, whatever the number of clusters.
func manyRegistries() ([]Cluster, []ResourceRegistry) {
	var clusters []Cluster
	for i := range 20 {
		clusters = append(clusters, kubeconfigCluster(fmt.Sprintf("member%04d", i)))
	}
	var objects []ResourceRegistry
	for i := range 300 {
		objects = append(objects, created(reg(fmt.Sprintf("r%03d", i), nil, "v1 ConfigMap ns"+fmt.Sprint(i)), i))
	}
	return clusters, objects
}

// countPlans counts the plans Admit makes until the test ends.
func countPlans(t *testing.T) *int {
	n := new(int)
	orig := planFor
	planFor = func(regs []ResourceRegistry, clusters []Cluster) (Plan, error) {
		*n++
		return orig(regs, clusters)
	}
	t.Cleanup(func() { planFor = orig })
	return n
}

// TestAdmitAsOneByOne: Admit's verdicts are those of judging each object in turn, oldest first,
// against what was admitted before it, whichever shortcut it takes.
func TestAdmitAsOneByOne(t *testing.T) {
	clusters := []Cluster{kubeconfigCluster("member1"), kubeconfigCluster("member2")}
	kinds := []func(name string) ResourceRegistry{
		func(n string) ResourceRegistry { return reg(n, nil, "v1 ConfigMap") },
		func(n string) ResourceRegistry { return reg(n, nil, "v1 Secret") },
		func(n string) ResourceRegistry { return includeSecrets(reg(n, []string{"member1"}, "v1 Secret")) },
		func(n string) ResourceRegistry { return badSelector(reg(n, nil, "v1 Pod")) },
		func(n string) ResourceRegistry { return reg(n, nil, "v1 Event") },
		func(n string) ResourceRegistry { return reg(n, nil, "events.k8s.io/v1 Event") },
		func(n string) ResourceRegistry {
			return withBackend(reg(n, nil, "apps/v1 Deployment"), "https://os-1:9200")
		},
		func(n string) ResourceRegistry {
			return withBackend(reg(n, nil, "apps/v1 ReplicaSet"), "https://os-2:9200")
		},
		func(n string) ResourceRegistry { return includeSecrets(reg(n, nil, "v1 Secret")) },
	}
	seed := uint64(1)
	rnd := func(n int) int { seed = seed*6364136223846793005 + 1442695040888963407; return int(seed>>33) % n }
	for round := range 300 {
		var objects []ResourceRegistry
		for i := range 1 + rnd(8) {
			objects = append(objects, created(kinds[rnd(len(kinds))](fmt.Sprintf("o%d", i)), rnd(10)))
		}
		admitted, rejected := Admit(nil, objects, clusters)
		// The reference: one by one.
		sorted := slices.Clone(objects)
		slices.SortStableFunc(sorted, func(a, b ResourceRegistry) int {
			if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
				return c
			}
			return strings.Compare(a.Name, b.Name)
		})
		var want []string
		wantRejected := map[string]string{}
		var set []ResourceRegistry
		for _, r := range sorted {
			if err := admissible(set, r, clusters); err != nil {
				wantRejected[r.Name] = err.Error()
				continue
			}
			set = append(set, r)
			want = append(want, r.Name)
		}
		var got []string
		for _, r := range admitted {
			got = append(got, r.Name)
		}
		gotRejected := map[string]string{}
		for n, err := range rejected {
			gotRejected[n] = err.Error()
		}
		if !slices.Equal(got, want) || !maps.Equal(gotRejected, wantRejected) {
			t.Fatalf("round %d: admitted %v rejected %v; one by one: admitted %v rejected %v", round, got, gotRejected, want, wantRejected)
		}
	}
}
