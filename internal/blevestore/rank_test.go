package blevestore

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blevesearch/bleve/v2/search"
	bq "github.com/blevesearch/bleve/v2/search/query"
	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/store"
)

// A page ranks the top of what follows its token; a query read to the end ranks every match once;
// a query past rankWholeAfter pages switches from one to the other. Every way must walk one order,
// each match once, ties included: equal names in three clusters, equal creation times, objects
// without a namespace or a creation time (missing values sort last either way), equal relevance,
// three kinds of many objects each, statuses of several values and none (ConfigMaps).
func TestPagesFollowOneOrder(t *testing.T) {
	s := newStore(t, t.TempDir())
	defer s.Close()
	type obj struct {
		cluster, namespace, kind, name, uid string
		created, status                     string
	}
	var objs []obj
	var ops []store.Op
	for i, c := range []string{"west", "east", "north"} {
		for j := range 15 {
			// A Pod without container statuses shows its phase as its STATUS.
			phase := []string{"Running", "Pending", "Succeeded"}[(i+j)%3]
			o := pod(c, fmt.Sprintf("ns-%d", j%4), fmt.Sprintf("web-%02d", j%6), int64(100*i+j), map[string]string{"app": "web"}, "", phase, "nginx")
			o.uid = fmt.Sprintf("uid-%02d-%s", (j*7+i)%45, c) // uids do not follow names
			o.created = fmt.Sprintf("2026-01-0%dT00:00:00Z", 1+j%3)
			if j == 5 {
				o.created = "" // no creation time
			}
			status := phase
			if j%5 == 4 {
				o.resource, o.kind, status = "configmaps", "ConfigMap", "" // no Status column
			}
			ops = append(ops, o.op(t))
			objs = append(objs, obj{c, o.namespace, o.kind, o.name, o.uid, o.created, status})
		}
		n := object{cluster: c, version: "v1", resource: "nodes", kind: "Node", name: "web-03", uid: "node-" + c, rv: int64(100*i + 50), epoch: 1,
			labels: map[string]string{"app": "web"}, created: "2026-01-02T00:00:00Z"}
		ops = append(ops, n.op(t))
		objs = append(objs, obj{c, "", n.kind, n.name, n.uid, n.created, "Unknown"}) // no Ready condition
	}
	write(t, s, ops...)

	// The order osstore gives: the sort keys, missing values last in either direction, then uid
	// and cluster.
	expect := func(sorts []query.Sort) []string {
		o := slices.Clone(objs)
		slices.SortFunc(o, func(a, b obj) int {
			for _, sort := range sorts {
				var av, bv string
				switch sort.Field {
				case query.SortCluster:
					av, bv = a.cluster, b.cluster
				case query.SortNamespace:
					av, bv = a.namespace, b.namespace
				case query.SortKind:
					av, bv = a.kind, b.kind
				case query.SortName:
					av, bv = a.name, b.name
				case query.SortStatus:
					av, bv = a.status, b.status
				case query.SortCreationTimestamp:
					av, bv = a.created, b.created
				}
				switch {
				case av == "" && bv == "":
					continue
				case av == "":
					return 1
				case bv == "":
					return -1
				}
				c := strings.Compare(av, bv)
				if sort.Desc {
					c = -c
				}
				if c != 0 {
					return c
				}
			}
			return cmp.Or(strings.Compare(a.uid, b.uid), strings.Compare(a.cluster, b.cluster))
		})
		out := make([]string, len(o))
		for i, x := range o {
			out[i] = x.cluster + "/" + x.uid
		}
		return out
	}
	walk := func(params string, limits []int, drain bool) ([]string, int64) {
		t.Helper()
		q := parse(t, params)
		q.Drain = drain
		var got []string
		var total int64
		for i := 0; ; i++ {
			q.Limit = limits[min(i, len(limits)-1)]
			res := find(t, s, q)
			if i == 0 {
				total = res.Total
			} else if res.Total != total {
				t.Fatalf("%s: total %d on page %d, %d on the first", params, res.Total, i, total)
			}
			for _, it := range res.Items {
				m := gjson.GetManyBytes(it, "metadata.annotations."+gjson.Escape(document.CachedFromClusterAnnotation), "metadata.uid")
				got = append(got, m[0].Str+"/"+m[1].Str)
			}
			if res.Continue == "" {
				return got, total
			}
			q.Continue = res.Continue
		}
	}
	for _, c := range []struct {
		params string
		sorts  []query.Sort // nil: relevance, which only the walks compare among themselves
	}{
		{"labelSelector=app", []query.Sort{{Field: query.SortCluster}, {Field: query.SortNamespace}, {Field: query.SortName}}},
		{"labelSelector=app&sort=name", []query.Sort{{Field: query.SortName}}},
		{"labelSelector=app&sort=name:desc", []query.Sort{{Field: query.SortName, Desc: true}}},
		{"labelSelector=app&sort=creationTimestamp", []query.Sort{{Field: query.SortCreationTimestamp}}},
		{"labelSelector=app&sort=creationTimestamp:desc", []query.Sort{{Field: query.SortCreationTimestamp, Desc: true}}},
		{"labelSelector=app&sort=namespace:desc,name", []query.Sort{{Field: query.SortNamespace, Desc: true}, {Field: query.SortName}}},
		{"labelSelector=app&sort=kind", []query.Sort{{Field: query.SortKind}}},
		{"labelSelector=app&sort=kind:desc,name", []query.Sort{{Field: query.SortKind, Desc: true}, {Field: query.SortName}}},
		{"labelSelector=app&sort=status", []query.Sort{{Field: query.SortStatus}}},
		{"labelSelector=app&sort=status:desc,name", []query.Sort{{Field: query.SortStatus, Desc: true}, {Field: query.SortName}}},
		{"q=web", nil},
	} {
		t.Run(c.params, func(t *testing.T) {
			one, total := walk(c.params, []int{1000}, false)
			if total != int64(len(objs)) || len(one) != len(objs) {
				t.Fatalf("one page: %d items, total %d; want %d", len(one), total, len(objs))
			}
			if c.sorts != nil {
				if want := expect(c.sorts); !slices.Equal(one, want) {
					t.Errorf("one page:\n got  %q\n want %q", one, want)
				}
			}
			for _, w := range []struct {
				name   string
				limits []int
				drain  bool
			}{
				{"pages of 4", []int{4}, false},
				{"pages of 1, then 5", []int{1, 1, 5}, false},
				{"pages of 7 read to the end", []int{7}, true},
			} {
				got, _ := walk(c.params, w.limits, w.drain)
				if !slices.Equal(got, one) {
					t.Errorf("%s:\n got  %q\n want %q", w.name, got, one)
				}
			}
		})
	}
}

// Every field a query may sort by is a column with doc values: the ranking reads a sort key of
// every match, and bleve reads a field without them by uninverting its terms, far more slowly.
func TestSortFieldsHaveDocValues(t *testing.T) {
	for _, f := range query.SortFields {
		col := sortField(query.Sort{Field: f})
		if col == "" {
			t.Errorf("sort %s: no column", f)
			continue
		}
		if spec, ok := fields[col]; !ok || !spec.docValues {
			t.Errorf("sort %s: column %s has no doc values", f, col)
		}
	}
}

// Pruning terms the index does not hold keeps every query's matches, negations included (not of
// an absent term is every document).
func TestPruneKeepsMatches(t *testing.T) {
	s := newStore(t, t.TempDir())
	defer s.Close()
	write(t, s, fleet(t)...)
	r, err := s.reader()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	matches := func(q bq.Query) []string {
		t.Helper()
		var out []string
		if err := visit(t.Context(), r, q, false, func(dm *search.DocumentMatch) error {
			id, err := r.ExternalID(dm.IndexInternalID)
			out = append(out, id)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	absent := &query.Scope{Grants: []query.Grant{
		{Clusters: []string{"gone-1", "east"}, Namespaces: []string{"nowhere", "shop", ""}, Resources: []query.Resource{{Resource: "pods"}, {Resource: "nodes"}}},
		{Clusters: []string{"gone-2"}, Namespaces: []string{"shop"}},
		{Namespaces: []string{"kube-system", "nowhere"}, Resources: []query.Resource{{Resource: "widgets", Group: "example.com"}, {Resource: "pods"}}},
	}}
	for _, c := range []struct {
		params string
		scope  *query.Scope
	}{
		{"labelSelector=app.kubernetes.io/name=web", absent},
		{"labelSelector=app!=nothing,tier notin (nothing,frontend)", nil},
		{"labelSelector=!nothing&fieldSelector=spec.nodeName!=node-9", nil},
		{"fieldSelector=spec.nodeName=,metadata.namespace!=nowhere", absent},
		{"resources=pods,widgets.example.com&clusters=east,gone", nil},
	} {
		q := parse(t, c.params)
		q.Scope = c.scope
		unpruned, err := compile(q, nil)
		if err != nil {
			t.Fatal(err)
		}
		pruned, err := prune(unpruned, r)
		if err != nil {
			t.Fatal(err)
		}
		want, got := matches(unpruned), matches(pruned)
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("%s: pruned %q, unpruned %q", c.params, got, want)
		}
	}
}

// Without a snapshot (every one the subject may hold is in use), pages read the live index and
// continue after the last item's place: an object that comes to sort before it is not served, an
// item is never served twice, and what comes to sort after it is.
func TestPagesWithoutSnapshotFollowThePlace(t *testing.T) {
	s, err := New(Options{Dir: t.TempDir(), TokenKey: testKey, Limits: store.Limits{SnapshotsPerSubject: 1, Snapshots: 100}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ops []store.Op
	for i := range 10 {
		ops = append(ops, pod("east", "shop", fmt.Sprintf("p%02d", 2*i), 1, nil, "", "Running", "nginx").op(t))
	}
	write(t, s, ops...)
	q := parse(t, "limit=3&sort=name")
	q.Subject = "alice"
	held := find(t, s, q) // alice's one snapshot, kept in use
	tok, err := s.tokens.decode(held.Continue)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.snaps.Acquire(tok.Snapshot); !ok {
		t.Fatal("alice's snapshot is gone")
	}

	res := find(t, s, q)
	if len(res.Warnings) == 0 || res.Continue == "" {
		t.Fatalf("a first page past alice's snapshots: warnings %q, continue %q", res.Warnings, res.Continue)
	}
	got := names(res)
	write(t, s, pod("east", "shop", "p01", 1, nil, "", "Running", "nginx").op(t), // before the place
		pod("east", "shop", "p09", 1, nil, "", "Running", "nginx").op(t)) // after it
	for res.Continue != "" {
		q.Continue = res.Continue
		res = find(t, s, q)
		if len(res.Warnings) == 0 {
			t.Errorf("a page without a snapshot says nothing")
		}
		got = append(got, names(res)...)
	}
	want := []string{"east/shop/p00", "east/shop/p02", "east/shop/p04", "east/shop/p06", "east/shop/p08", "east/shop/p09",
		"east/shop/p10", "east/shop/p12", "east/shop/p14", "east/shop/p16", "east/shop/p18"}
	if !slices.Equal(got, want) {
		t.Errorf("pages:\n got  %q\n want %q", got, want)
	}
}

// A token of the earlier version (an offset, no place) was minted by another process: expired, as
// its snapshot is, so a Kubernetes client lists again.
func TestEarlierTokenExpired(t *testing.T) {
	s := newStore(t, t.TempDir())
	defer s.Close()
	write(t, s, fleet(t)...)
	q := parse(t, "limit=2")
	old, err := s.tokens.Encode(map[string]any{"v": 1, "q": q.Fingerprint(), "off": 2, "now": 1, "total": 16, "exp": time.Now().Add(time.Minute).UnixNano()})
	if err != nil {
		t.Fatal(err)
	}
	q.Continue = old
	if _, err := s.Search(t.Context(), q); !errors.Is(err, store.ErrExpired) {
		t.Errorf("a version 1 token: %v; want ErrExpired", err)
	}
}

// A kind's own columns (sort=columns.<id>) walk one order too, across the page and whole-ranking
// paths: restart counts compare as numbers (10 after 9), Pods without a node sort last in either
// direction, ties by uid then cluster.
func TestColumnPagesFollowOneOrder(t *testing.T) {
	s := newStore(t, t.TempDir())
	defer s.Close()
	type obj struct {
		cluster, uid, node string
		restarts           int
	}
	var objs []obj
	var ops []store.Op
	for i, c := range []string{"west", "east", "north"} {
		for j := range 15 {
			restarts := (j*7 + i) % 13
			node := fmt.Sprintf("node-%d", (i+j)%3)
			if j%4 == 3 {
				node = "" // pending: NODE prints <none>, which has no key
			}
			o := pod(c, "shop", fmt.Sprintf("web-%02d", j), int64(100*i+j), map[string]string{"app": "web"}, node, "Running", "nginx")
			o.uid = fmt.Sprintf("uid-%02d-%s", (j*7+i)%45, c)
			o.status = fmt.Sprintf(`{"phase":"Running","containerStatuses":[{"name":"c0","ready":true,"restartCount":%d,"state":{"running":{}}}]}`, restarts)
			ops = append(ops, o.op(t))
			objs = append(objs, obj{c, o.uid, node, restarts})
		}
	}
	write(t, s, ops...)
	ties := func(a, b obj) int {
		return cmp.Or(strings.Compare(a.uid, b.uid), strings.Compare(a.cluster, b.cluster))
	}
	for _, c := range []struct {
		params string
		order  func(a, b obj) int
	}{
		{"resources=pods&sort=columns.restarts", func(a, b obj) int { return cmp.Or(cmp.Compare(a.restarts, b.restarts), ties(a, b)) }},
		{"resources=pods&sort=columns.restarts:desc", func(a, b obj) int { return cmp.Or(cmp.Compare(b.restarts, a.restarts), ties(a, b)) }},
		{"resources=pods&sort=columns.node,columns.restarts:desc", func(a, b obj) int {
			switch {
			case a.node == "" && b.node != "":
				return 1
			case b.node == "" && a.node != "":
				return -1
			}
			return cmp.Or(strings.Compare(a.node, b.node), cmp.Compare(b.restarts, a.restarts), ties(a, b))
		}},
		{"resources=pods&sort=columns.node:desc", func(a, b obj) int {
			switch {
			case a.node == "" && b.node != "":
				return 1
			case b.node == "" && a.node != "":
				return -1
			}
			return cmp.Or(strings.Compare(b.node, a.node), ties(a, b))
		}},
	} {
		t.Run(c.params, func(t *testing.T) {
			o := slices.Clone(objs)
			slices.SortFunc(o, c.order)
			var want []string
			for _, x := range o {
				want = append(want, x.cluster+"/"+x.uid)
			}
			for _, w := range []struct {
				name   string
				limits []int
				drain  bool
			}{
				{"one page", []int{1000}, false},
				{"pages of 4", []int{4}, false},
				{"pages of 1, then 5", []int{1, 1, 5}, false},
				{"pages of 7 read to the end", []int{7}, true},
			} {
				q := parse(t, c.params)
				q.Drain = w.drain
				var got []string
				for i := 0; ; i++ {
					q.Limit = w.limits[min(i, len(w.limits)-1)]
					res := find(t, s, q)
					for _, it := range res.Items {
						m := gjson.GetManyBytes(it, "metadata.annotations."+gjson.Escape(document.CachedFromClusterAnnotation), "metadata.uid")
						got = append(got, m[0].Str+"/"+m[1].Str)
					}
					if res.Continue == "" {
						break
					}
					q.Continue = res.Continue
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s:\n got  %q\n want %q", w.name, got, want)
				}
			}
		})
	}
}
