package indexer

import (
	"bytes"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kubesearch/kubesearch/mappings"
)

func TestPlanRolls(t *testing.T) {
	cur := fmt.Sprintf("-v%d", mappings.Version)
	older := fmt.Sprintf("-v%d", mappings.Version-1)
	newer := fmt.Sprintf("-v%d", mappings.Version+1)
	tests := []struct {
		name       string
		r          resolved
		wantRolls  []rollPlan
		wantUnhide []string
		wantRetire []string
	}{{
		name: "current indices stay",
		r: resolved{
			indices: map[string]resolvedIndex{"k-pod" + cur: {aliases: []string{"k-pod"}}},
			aliases: map[string][]string{"k-pod": {"k-pod" + cur}},
		},
	}, {
		name: "an older index rolls",
		r: resolved{
			indices: map[string]resolvedIndex{"k-pod" + older: {aliases: []string{"k-pod"}}, "k-deployment" + cur: {aliases: []string{"k-deployment"}}},
			aliases: map[string][]string{"k-pod": {"k-pod" + older}, "k-deployment": {"k-deployment" + cur}},
		},
		wantRolls: []rollPlan{{alias: "k-pod", target: "k-pod" + cur, sources: []string{"k-pod" + older}}},
	}, {
		name: "an interrupted roll resumes: its hidden target is not behind the alias yet",
		r: resolved{
			indices: map[string]resolvedIndex{"k-pod" + older: {aliases: []string{"k-pod"}}, "k-pod" + cur: {hidden: true}},
			aliases: map[string][]string{"k-pod": {"k-pod" + older}},
		},
		wantRolls: []rollPlan{{alias: "k-pod", target: "k-pod" + cur, sources: []string{"k-pod" + older}}},
	}, {
		name: "a roll stopped after its swap is unhidden",
		r: resolved{
			indices: map[string]resolvedIndex{"k-pod" + cur: {aliases: []string{"k-pod"}, hidden: true}},
			aliases: map[string][]string{"k-pod": {"k-pod" + cur}},
		},
		wantUnhide: []string{"k-pod" + cur},
	}, {
		name: "a newer indexer's index is never rolled back",
		r: resolved{
			indices: map[string]resolvedIndex{"k-pod" + newer: {aliases: []string{"k-pod"}}},
			aliases: map[string][]string{"k-pod": {"k-pod" + newer}},
		},
	}, {
		name: "an alias over several indices rolls them all",
		r: resolved{
			indices: map[string]resolvedIndex{"k-pod" + older: {aliases: []string{"k-pod"}}, "k-pod-old": {aliases: []string{"k-pod"}}},
			aliases: map[string][]string{"k-pod": {"k-pod" + older, "k-pod-old"}},
		},
		wantRolls: []rollPlan{{alias: "k-pod", target: "k-pod" + cur, sources: []string{"k-pod-old", "k-pod" + older}}},
	}, {
		name: "a concrete index with an alias's name becomes the alias",
		r: resolved{
			indices: map[string]resolvedIndex{"k-configmap": {}, "k-configmap" + cur: {hidden: true}},
			aliases: map[string][]string{},
		},
		wantRolls: []rollPlan{{alias: "k-configmap", target: "k-configmap" + cur, sources: []string{"k-configmap"}, legacy: true}},
	}, {
		name: "a versioned index without alias is left alone",
		r: resolved{
			indices: map[string]resolvedIndex{"k-pod" + older: {}},
			aliases: map[string][]string{},
		},
	}, {
		name: "an old index a finished roll detached and hid is deleted",
		r: resolved{
			indices: map[string]resolvedIndex{"k-pod" + older: {hidden: true}, "k-pod" + cur: {aliases: []string{"k-pod"}}},
			aliases: map[string][]string{"k-pod": {"k-pod" + cur}},
		},
		wantRetire: []string{"k-pod" + older},
	}, {
		name: "a detached old index that is not hidden is someone else's",
		r: resolved{
			indices: map[string]resolvedIndex{"k-pod" + older: {}, "k-pod" + cur: {aliases: []string{"k-pod"}}},
			aliases: map[string][]string{"k-pod": {"k-pod" + cur}},
		},
	}, {
		name: "an old index hidden mid-roll is still behind its alias: the roll resumes",
		r: resolved{
			indices: map[string]resolvedIndex{"k-pod" + older: {aliases: []string{"k-pod"}, hidden: true}, "k-pod" + cur: {hidden: true}},
			aliases: map[string][]string{"k-pod": {"k-pod" + older}},
		},
		wantRolls: []rollPlan{{alias: "k-pod", target: "k-pod" + cur, sources: []string{"k-pod" + older}}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := planRolls(tt.r)
			if !reflect.DeepEqual(w.rolls, tt.wantRolls) {
				t.Errorf("rolls = %+v, want %+v", w.rolls, tt.wantRolls)
			}
			if !reflect.DeepEqual(w.unhide, tt.wantUnhide) {
				t.Errorf("unhide = %v, want %v", w.unhide, tt.wantUnhide)
			}
			if !reflect.DeepEqual(w.retire, tt.wantRetire) {
				t.Errorf("retire = %v, want %v", w.retire, tt.wantRetire)
			}
		})
	}
}

func TestVersioned(t *testing.T) {
	for name, want := range map[string]bool{
		"kubernetes-pod-v1": true, "kubernetes-pod-v12": true, "kubernetes-pod": false,
		"kubernetes-pod-v": false, "kubernetes-pod-vx": false, "dev-v2-kubernetes-pod": false,
	} {
		if got := versioned(name); got != want {
			t.Errorf("versioned(%q) = %v, want %v", name, got, want)
		}
	}
	if got := versionOf("k-pod-v3", "k-pod"); got != 3 {
		t.Errorf("versionOf = %d, want 3", got)
	}
	if got := versionOf("k-podx-v3", "k-pod"); got != 0 {
		t.Errorf("versionOf of another alias's index = %d, want 0", got)
	}
}

// A roll rebuilds every document from what it stores; for a document of this version that must give
// the same bytes, for every golden object and for the trimmed shape of large objects.
func TestRebuildDocumentRoundTrip(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no inputs in testdata: %v", err)
	}
	docs := map[string][]byte{}
	for _, in := range inputs {
		doc, err := BuildDocument(loadEvent(t, in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		docs[filepath.Base(in)] = doc
	}
	long := strings.Repeat("x", 40<<10)
	trimmed, err := BuildDocument(event(t, "", "v1", "ConfigMap",
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dash","namespace":"n","uid":"u1","resourceVersion":"9"},"data":{"dashboard.json":"`+long+`"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(trimmed, []byte(`"`+mappings.FieldFullObject+`"`)) {
		t.Fatal("the large ConfigMap was not trimmed; the test would not cover that shape")
	}
	docs["trimmed"] = trimmed

	for name, doc := range docs {
		got, err := rebuildDocument(doc)
		if err != nil {
			t.Errorf("%s: rebuildDocument: %v", name, err)
			continue
		}
		if !bytes.Equal(got, doc) {
			t.Errorf("%s: rebuilt document differs:\ngot  %.600s\nwant %.600s", name, got, doc)
		}
	}
}

func TestRebuildDocumentErrors(t *testing.T) {
	for name, src := range map[string]string{
		"no object":          `{"cluster":"c1","kind":"Pod"}`,
		"bad lastChangedAt":  `{"cluster":"c1","version":"v1","resource":"pods","kind":"Pod","lastChangedAt":"yesterday","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","uid":"u"}}}`,
		"object of no kind":  `{"cluster":"c1","version":"v1","resource":"pods","kind":"Pod","object":{"apiVersion":"v1","kind":"Service","metadata":{"name":"a","uid":"u"}}}`,
		"object without uid": `{"cluster":"c1","version":"v1","resource":"pods","kind":"Pod","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"}}}`,
	} {
		if doc, err := rebuildDocument([]byte(src)); err == nil {
			t.Errorf("%s: no error, got %s", name, doc)
		}
	}
}
