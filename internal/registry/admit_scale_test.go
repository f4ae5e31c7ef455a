package registry

import (
	"fmt"
	"testing"
	"time"
)

// TestAdmitOneInvalidAtScale: one invalid object among hundreds (a typo, or an object written to
// make every reload slow) must not turn Admit into a plan per object over the whole fleet: an object
// invalid on its own is refused without one.
func TestAdmitOneInvalidAtScale(t *testing.T) {
	var clusters []Cluster
	for i := range 1000 {
		clusters = append(clusters, kubeconfigCluster(fmt.Sprintf("member%04d", i)))
	}
	var objects []ResourceRegistry
	for i := range 300 {
		objects = append(objects, created(reg(fmt.Sprintf("r%03d", i), nil, "v1 ConfigMap ns"+fmt.Sprint(i)), i))
	}
	objects = append(objects, created(badSelector(reg("typo", nil, "v1 Pod")), 400))
	start := time.Now()
	admitted, rejected := Admit(nil, objects, clusters)
	took := time.Since(start)
	if len(admitted) != 300 || len(rejected) != 1 || rejected["typo"] == nil {
		t.Fatalf("admitted %d, rejected %v", len(admitted), rejected)
	}
	// One plan per object took minutes here; one plan of the set takes about a second.
	if took > 30*time.Second {
		t.Errorf("Admit took %v: a plan per object?", took)
	}
}
