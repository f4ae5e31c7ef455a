package blevestore

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	bdoc "github.com/blevesearch/bleve/v2/document"
	index "github.com/blevesearch/bleve_index_api"

	"github.com/kubesearch/kubesearch/internal/store"
)

// writeEarlierFormat writes ops as versions before fieldObject wrote them: the whole document in
// fieldSource, no object or head.
func writeEarlierFormat(t *testing.T, s *Store, ops []store.Op) {
	t.Helper()
	batch := s.idx.NewBatch()
	for _, o := range ops {
		id := docID(o.Kind, o.ID())
		d, st, err := build(id, o.Kind, o.Doc, o.Version)
		if err != nil {
			t.Fatal(err)
		}
		d.Fields = slices.DeleteFunc(d.Fields, func(f bdoc.Field) bool { return f.Name() == fieldObject || f.Name() == fieldHead })
		d.AddField(bdoc.NewTextFieldCustom(fieldSource, nil, o.Doc, index.StoreField, nil))
		if err := batch.IndexAdvanced(d); err != nil {
			t.Fatal(err)
		}
		s.docs[id] = &st
	}
	if err := s.idx.Batch(batch); err != nil {
		t.Fatal(err)
	}
}

// TestEarlierFormatAnswersAlike: a folder written by a version that stored whole documents answers
// what one written now answers — items whole and metadata only, epochs, priors, and what garbage
// collection reports — including numbers and strings items rewrite as Jackson does.
func TestEarlierFormatAnswersAlike(t *testing.T) {
	ops := fleet(t)
	odd := pod("east", "shop", "odd-1", 300, map[string]string{"app": "odd"}, "node-1", "Running", "odd:1")
	odd.spec = `{"containers":[{"name":"c","image":"odd:1"}],"x":[1.0,-0,12345678901234567890,1e-7,2.5E+30,"\u00e9\u0001\"\/","é\t"]}`
	ops = append(ops, odd.op(t))
	now, earlier := newStore(t, t.TempDir()), newStore(t, t.TempDir())
	defer now.Close()
	defer earlier.Close()
	write(t, now, ops...)
	writeEarlierFormat(t, earlier, ops)

	for _, params := range []string{"", "metadataOnly=true", "resources=pods&sort=name:desc"} {
		a, b := find(t, now, parse(t, params)), find(t, earlier, parse(t, params))
		if a.Total == 0 || a.Total != b.Total || len(a.Items) != len(b.Items) || !slices.Equal(a.Epochs, b.Epochs) {
			t.Fatalf("?%s: %d items %v, earlier format %d items %v", params, len(a.Items), a.Epochs, len(b.Items), b.Epochs)
		}
		for i := range a.Items {
			if !bytes.Equal(a.Items[i], b.Items[i]) {
				t.Errorf("?%s item %d:\n%s\nearlier format:\n%s", params, i, a.Items[i], b.Items[i])
			}
		}
	}
	pa, err := now.Priors(t.Context(), ops)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := earlier.Priors(t.Context(), ops)
	if err != nil {
		t.Fatal(err)
	}
	if ja, jb := mustJSON(t, pa), mustJSON(t, pb); ja != jb {
		t.Errorf("priors:\n%s\nearlier format:\n%s", ja, jb)
	}
	gone := func(s *Store) string {
		var all []store.Gone
		sel := store.Selection{Cluster: "east", Kind: "Pod"}
		if _, err := s.DeleteAll(t.Context(), sel, func(_ context.Context, _ int, g []store.Gone) error {
			all = append(all, g...)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(all) == 0 {
			t.Fatal("nothing collected")
		}
		slices.SortFunc(all, func(a, b store.Gone) int { return strings.Compare(a.UID, b.UID) }) // in index order
		return mustJSON(t, all)
	}
	if ga, gb := gone(now), gone(earlier); ga != gb {
		t.Errorf("collected:\n%s\nearlier format:\n%s", ga, gb)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
