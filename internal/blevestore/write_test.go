package blevestore

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/store"
)

// state is "absent" or "epoch/resourceVersion" of the stored document.
func state(t *testing.T, s *Store, uid string) string {
	t.Helper()
	res := find(t, s, &query.Query{Limit: 10, Fields: []query.Requirement{{Key: "metadata.uid", Op: query.Equals, Values: []string{uid}}}})
	if len(res.Items) == 0 {
		return "absent"
	}
	return gjson.GetBytes(res.Items[0], "metadata.resourceVersion").Str + "@" + strconv.FormatInt(res.Epochs[0], 10)
}

func TestWriteRules(t *testing.T) {
	p := func(rv, epoch int64) store.Op {
		t.Helper()
		o := pod("east", "shop", "web", rv, nil, "", "Running", "nginx")
		o.epoch = epoch
		return o.op(t)
	}
	del := func(rv, epoch int64) store.Op {
		return store.Op{Delete: true, Kind: "Pod", UID: "east-pod-shop-web", Epoch: epoch, Version: rv, Versioned: true}
	}
	tests := []struct {
		name string
		ops  [][]store.Op
		want string
	}{
		{"newer version wins", [][]store.Op{{p(5, 1)}, {p(7, 1)}}, "7@1"},
		{"a replay never replaces a newer state", [][]store.Op{{p(7, 1)}, {p(5, 1)}}, "7@1"},
		{"an equal version is written again", [][]store.Op{{p(7, 1)}, {p(7, 1)}}, "7@1"},
		{"a newer epoch wins whatever the versions", [][]store.Op{{p(700, 1)}, {p(5, 2)}}, "5@2"},
		{"after an overwrite the epoch goes on", [][]store.Op{{p(700, 1)}, {p(5, 2)}, {p(6, 2)}}, "6@2"},
		{"after an overwrite a replay of the old epoch is dropped", [][]store.Op{{p(700, 1)}, {p(5, 2)}, {p(700, 1)}}, "5@2"},
		{"in one batch, in order", [][]store.Op{{p(5, 1), p(9, 1), p(7, 1)}}, "9@1"},
		{"delete", [][]store.Op{{p(5, 1)}, {del(6, 1)}}, "absent"},
		{"a late delete is dropped", [][]store.Op{{p(9, 1)}, {del(6, 1)}}, "9@1"},
		{"a delete of a newer epoch applies", [][]store.Op{{p(900, 1)}, {del(6, 2)}}, "absent"},
		{"a replay after a delete stays deleted", [][]store.Op{{p(5, 1)}, {del(6, 1)}, {p(5, 1)}}, "absent"},
		{"a newer event after a delete is written", [][]store.Op{{p(5, 1)}, {del(6, 1)}, {p(8, 1)}}, "8@1"},
		// A member restored from an etcd snapshot: the object deleted at 5000 comes back in the
		// new epoch's list at 150, while the delete's tombstone still lives.
		{"a restored object passes the tombstone of an older epoch", [][]store.Op{{p(4000, 1)}, {del(5000, 1)}, {p(150, 2)}}, "150@2"},
		{"a restored object passes the tombstone in the same batch", [][]store.Op{{p(4000, 1)}, {del(5000, 1), p(150, 2)}}, "150@2"},
		{"a replay of the deleting epoch stays deleted", [][]store.Op{{p(4000, 1)}, {del(5000, 1)}, {p(4000, 1)}}, "absent"},
		{"a restored object's later events apply", [][]store.Op{{p(4000, 1)}, {del(5000, 1)}, {p(150, 2)}, {p(160, 2)}}, "160@2"},
		{"after the restore a replay of the old epoch is dropped", [][]store.Op{{p(4000, 1)}, {del(5000, 1)}, {p(150, 2)}, {p(4000, 1)}}, "150@2"},
		{"a tombstone of the new epoch drops that epoch's replay", [][]store.Op{{p(4000, 1)}, {del(5000, 1)}, {p(150, 2)}, {del(200, 2)}, {p(150, 2)}}, "absent"},
		{"a delete of the new epoch passes an older tombstone and keeps its own epoch", [][]store.Op{{p(4000, 1)}, {del(5000, 1)}, {del(150, 2)}, {p(100, 2)}}, "absent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t, t.TempDir())
			defer s.Close()
			for _, batch := range tt.ops {
				write(t, s, batch...)
			}
			if got := state(t, s, "east-pod-shop-web"); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestUnversionedAndTombstoneExpiry(t *testing.T) {
	s := newStore(t, t.TempDir())
	defer s.Close()
	o := pod("east", "shop", "web", 9, nil, "", "Running", "nginx").op(t)
	write(t, s, o)
	late := pod("east", "shop", "web", 3, nil, "", "Running", "nginx").op(t)
	late.Versioned = false
	write(t, s, late)
	if got := state(t, s, o.UID); got != "3@1" {
		t.Errorf("unversioned write: %s", got)
	}
	write(t, s, store.Op{Delete: true, Kind: "Pod", UID: o.UID, Epoch: 1, Version: 10, Versioned: true})
	write(t, s, o) // rv 9 < the tombstone's 10
	if got := state(t, s, o.UID); got != "absent" {
		t.Errorf("replay within gc_deletes: %s", got)
	}
	// Past index.gc_deletes the tombstone is forgotten, as in OpenSearch.
	s.now = func() time.Time { return time.Now().Add(2 * gcDeletes) }
	s.expireTombstones()
	write(t, s, o)
	if got := state(t, s, o.UID); got != "9@1" {
		t.Errorf("replay after gc_deletes: %s", got)
	}
}

func TestWriteFailures(t *testing.T) {
	s := newStore(t, t.TempDir())
	defer s.Close()
	good := pod("east", "shop", "web", 1, nil, "", "Running", "nginx").op(t)
	bad := func(doc string) store.Op {
		return store.Op{Kind: "Pod", UID: "x-" + doc[:5], Doc: []byte(doc), Epoch: 1, Version: 1, Versioned: true}
	}
	deep := `{"object":` + strings.Repeat(`{"a":`, 25) + `1` + strings.Repeat(`}`, 25) + `}`
	ops := []store.Op{
		bad(`{"resourceVersion":"abc","object":{}}`),
		good,
		bad(`not json`),
		bad(`{"lastChangedAt":"yesterday","object":{}}`),
		bad(deep),
		{Kind: "Pod", UID: "", Doc: good.Doc},
		bad(`{"object":{"a":1,"a":2}}`),
		bad(`{"object":"text"}`),
	}
	failed, err := s.Write(t.Context(), ops)
	if err != nil {
		t.Fatal(err)
	}
	var pos []int
	for _, f := range failed {
		pos = append(pos, f.Pos)
		if f.Err == "" {
			t.Errorf("failure %d without a reason", f.Pos)
		}
	}
	if want := []int{0, 2, 3, 4, 5, 6, 7}; !slices.Equal(pos, want) {
		t.Errorf("failed %v (%v), want %v", pos, failed, want)
	}
	if got := state(t, s, good.UID); got != "1@1" {
		t.Errorf("the good op: %s", got)
	}
}

func TestGarbageCollection(t *testing.T) {
	s := newStore(t, t.TempDir())
	defer s.Close()
	write(t, s, fleet(t)...)
	// A re-list of east's pods in namespace shop at epoch 2 saw web-1 only.
	relisted := pod("east", "shop", "web-1", 100, nil, "node-1", "Running", "nginx:1.27")
	relisted.epoch = 2
	write(t, s, relisted.op(t))
	n, err := s.DeleteOlder(t.Context(), store.ListScope{Pair: store.Pair{Cluster: "east", Resource: "pods"}, Kind: "Pod", Namespace: "shop"}, 2, nil)
	if err != nil || n != 2 {
		t.Fatalf("DeleteOlder: %d, %v", n, err)
	}
	if got := names(find(t, s, parse(t, "clusters=east&resources=pods"))); !slices.Equal(got, []string{"east/kube-system/coredns-1", "east/shop/web-1"}) {
		t.Errorf("after SYNC: %q", got)
	}
	// The same objects listed again (the same resourceVersions) are taken again.
	write(t, s, pod("east", "shop", "db-0", 120, nil, "node-1", "Running", "postgres:16").op(t))
	if got := find(t, s, parse(t, "clusters=east&names=db-0")); got.Total != 1 {
		t.Errorf("re-listed object: %d", got.Total)
	}
	n, err = s.DeleteAll(t.Context(), store.Selection{Cluster: "west", Kind: "Pod"}, nil)
	if err != nil || n != 3 {
		t.Fatalf("DeleteAll: %d, %v", n, err)
	}
	n, err = s.DeleteAll(t.Context(), store.Selection{Cluster: "north", Group: "apps", Kind: "Deployment", Namespace: "other"}, nil)
	if err != nil || n != 0 {
		t.Fatalf("DeleteAll of another namespace: %d, %v", n, err)
	}
	if got := find(t, s, parse(t, "clusters=west")); got.Total != 2 {
		t.Errorf("west after PURGE of pods: %q", names(got))
	}
}

func TestPersistence(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, dir)
	write(t, s, fleet(t)...)
	ws := []store.Watermark{
		{Cluster: "east", Resource: "pods", Kind: "Pod", ResourceVersion: 150, Epoch: 1, UpdatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
			Scopes: []store.WatermarkScope{{Namespace: "", ResourceVersion: 150, Epoch: 1, Synced: true}}},
		{Cluster: "east", Group: "apps", Resource: "deployments", Kind: "Deployment", Listing: true},
		{Cluster: "west", Resource: "pods", Kind: "Pod", ResourceVersion: 7},
	}
	if err := s.SaveWatermarks(t.Context(), ws); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	s = newStore(t, dir)
	defer s.Close()
	got, err := s.Watermarks(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Pair().ID() != "east//pods" || got[1].Pair().ID() != "east/apps/deployments" || got[0].Scopes[0].ResourceVersion != 150 ||
		!got[0].UpdatedAt.Equal(ws[0].UpdatedAt) {
		t.Errorf("watermarks after reopen: %+v", got)
	}
	loaded, err := s.LoadWatermarks(t.Context(), []store.Pair{ws[2].Pair(), {Cluster: "nope"}})
	if err != nil || len(loaded) != 1 || loaded[ws[2].Pair()].ResourceVersion != 7 {
		t.Errorf("load: %v %v", loaded, err)
	}
	sel, err := s.SelectionWatermarks(t.Context(), store.Selection{Cluster: "east", Kind: "Pod"})
	if err != nil || len(sel) != 1 || sel[0].Resource != "pods" {
		t.Errorf("selection: %v %v", sel, err)
	}
	if err := s.DeleteWatermarks(t.Context(), []store.Pair{ws[0].Pair()}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Watermarks(t.Context()); len(got) != 2 {
		t.Errorf("after delete: %v", got)
	}
	if res := find(t, s, parse(t, "")); res.Total != 16 {
		t.Errorf("documents after reopen: %d", res.Total)
	}
	// The write rule's view survives too: a replay of an older version is still dropped.
	old := pod("east", "shop", "web-1", 1, nil, "", "Running", "old")
	write(t, s, old.op(t))
	if got := find(t, s, parse(t, "fieldSelector=spec.containers.image=old")); got.Total != 0 {
		t.Errorf("a replay after reopen was written")
	}
}

func TestOptions(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Error("no directory accepted")
	}
	if _, err := New(Options{Dir: t.TempDir(), TokenKey: []byte("short")}); err == nil {
		t.Error("short key accepted")
	}
	s := newStore(t, t.TempDir())
	defer s.Close()
	var steps []string
	if err := s.Setup(t.Context(), store.SetupOptions{Step: func(m string) { steps = append(steps, m) }}); err != nil || len(steps) != 1 {
		t.Errorf("second Setup: %v %v", steps, err)
	}
	if err := s.Refresh(t.Context(), "Pod"); err != nil {
		t.Error(err)
	}
}

// TestFieldsMatchDocument holds the indexed fields against the document's fields and the
// OpenSearch types they have there.
func TestFieldsMatchDocument(t *testing.T) {
	types := map[string]string{}
	for _, f := range document.Fields {
		types[f.Name] = f.Type
	}
	want := map[fieldType]string{typeKeyword: "keyword", typeLong: "long", typeDate: "date", typeText: "text", typeFlat: "flat_object", typeColumns: "object"}
	for name, spec := range fields {
		if got := types[name]; got != want[spec.typ] {
			t.Errorf("%s: indexed as %s, mapped as %q", name, want[spec.typ], got)
		}
	}
}

// TestReopenKeepsWriteRule: the write rule's view rebuilt at open is every live document's
// versions as they were written, across segments holding overwritten and deleted documents.
func TestReopenKeepsWriteRule(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, dir)
	ops := fleet(t)
	for _, o := range ops {
		write(t, s, o) // a segment each
	}
	over := ops[0]
	over.Epoch, over.Version = 2, 1 // a newer epoch overwrites whatever the resourceVersion
	write(t, s, over)
	gone := ops[1]
	gone.Delete, gone.Doc, gone.Version = true, nil, gone.Version+1
	write(t, s, gone)
	want := map[string]stored{}
	for id, st := range s.docs {
		if !st.deleted {
			want[id] = stored{version: st.version, epoch: st.epoch, rv: st.rv}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = newStore(t, dir)
	defer s.Close()
	got := map[string]stored{}
	for id, st := range s.docs {
		got[id] = *st
	}
	if len(want) != len(ops)-1 || !maps.Equal(got, want) {
		t.Errorf("after reopen:\n got %v\nwant %v", got, want)
	}
}
