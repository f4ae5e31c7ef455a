package document

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubesearch/kubesearch/mappings"
)

// A roll rebuilds every document from what it stores; for a document of this version that must give
// the same bytes, for every golden object and for the trimmed shape of large objects.
func TestRebuildRoundTrip(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no inputs in testdata: %v", err)
	}
	docs := map[string][]byte{}
	for _, in := range inputs {
		doc, err := Build(loadEvent(t, in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		docs[filepath.Base(in)] = doc
	}
	long := strings.Repeat("x", 40<<10)
	trimmed, err := Build(event(t, "", "v1", "ConfigMap",
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dash","namespace":"n","uid":"u1","resourceVersion":"9"},"data":{"dashboard.json":"`+long+`"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(trimmed, []byte(`"`+mappings.FieldFullObject+`"`)) {
		t.Fatal("the large ConfigMap was not trimmed; the test would not cover that shape")
	}
	docs["trimmed"] = trimmed

	for name, doc := range docs {
		got, err := Rebuild(doc)
		if err != nil {
			t.Errorf("%s: Rebuild: %v", name, err)
			continue
		}
		if !bytes.Equal(got, doc) {
			t.Errorf("%s: rebuilt document differs:\ngot  %.600s\nwant %.600s", name, got, doc)
		}
	}
}

func TestRebuildErrors(t *testing.T) {
	for name, src := range map[string]string{
		"no object":          `{"cluster":"c1","kind":"Pod"}`,
		"bad lastChangedAt":  `{"cluster":"c1","version":"v1","resource":"pods","kind":"Pod","lastChangedAt":"yesterday","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","uid":"u"}}}`,
		"object of no kind":  `{"cluster":"c1","version":"v1","resource":"pods","kind":"Pod","object":{"apiVersion":"v1","kind":"Service","metadata":{"name":"a","uid":"u"}}}`,
		"object without uid": `{"cluster":"c1","version":"v1","resource":"pods","kind":"Pod","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"}}}`,
	} {
		if doc, err := Rebuild([]byte(src)); err == nil {
			t.Errorf("%s: no error, got %s", name, doc)
		}
	}
}
