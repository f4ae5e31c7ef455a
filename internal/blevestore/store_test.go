package blevestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/store"
)

var testKey = []byte("0123456789abcdef")

func newStore(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := New(Options{Dir: dir, TokenKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Setup(t.Context(), store.SetupOptions{}); err != nil {
		t.Fatal(err)
	}
	return s
}

// object describes one Kubernetes object of the test fleet.
type object struct {
	cluster, group, version, resource, kind string
	namespace, name, uid                    string
	rv                                      int64
	epoch                                   int64
	labels                                  map[string]string
	created                                 string
	owner                                   string // "Kind/name/uid"
	spec, status                            string // JSON
}

func (o object) event(t testing.TB) *envelope.Event {
	t.Helper()
	meta := map[string]any{"name": o.name, "uid": o.uid, "resourceVersion": fmt.Sprint(o.rv)}
	if o.namespace != "" {
		meta["namespace"] = o.namespace
	}
	if o.labels != nil {
		meta["labels"] = o.labels
	}
	if o.created != "" {
		meta["creationTimestamp"] = o.created
	}
	if o.owner != "" {
		p := strings.Split(o.owner, "/")
		meta["ownerReferences"] = []any{map[string]any{"apiVersion": "apps/v1", "kind": p[0], "name": p[1], "uid": p[2]}}
	}
	apiVersion := o.version
	if o.group != "" {
		apiVersion = o.group + "/" + o.version
	}
	obj := map[string]any{"apiVersion": apiVersion, "kind": o.kind, "metadata": meta}
	if o.spec != "" {
		obj["spec"] = json.RawMessage(o.spec)
	}
	if o.status != "" {
		obj["status"] = json.RawMessage(o.status)
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &envelope.Event{V: envelope.Version, Type: envelope.Modified, Cluster: o.cluster, Group: o.group,
		Version: o.version, Resource: o.resource, Kind: o.kind, Namespace: o.namespace, Name: o.name, UID: o.uid,
		ResourceVersion: fmt.Sprint(o.rv), Epoch: o.epoch, ObservedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Object: raw}
}

func (o object) op(t testing.TB) store.Op {
	t.Helper()
	doc, err := document.Build(o.event(t))
	if err != nil {
		t.Fatal(err)
	}
	return store.Op{Kind: o.kind, UID: o.uid, Doc: doc, Epoch: o.epoch, Version: o.rv, Versioned: true}
}

func pod(cluster, ns, name string, rv int64, labels map[string]string, node, phase string, images ...string) object {
	var cs []string
	for i, im := range images {
		cs = append(cs, fmt.Sprintf(`{"name":"c%d","image":%q}`, i, im))
	}
	spec := `{"containers":[` + strings.Join(cs, ",") + `]`
	if node != "" {
		spec += `,"nodeName":"` + node + `"`
	}
	spec += "}"
	return object{cluster: cluster, version: "v1", resource: "pods", kind: "Pod", namespace: ns, name: name,
		uid: cluster + "-pod-" + ns + "-" + name, rv: rv, epoch: 1, labels: labels, created: "2026-01-01T10:00:00Z",
		owner: "ReplicaSet/" + name + "-rs/" + cluster + "-rs-" + name, spec: spec, status: `{"phase":"` + phase + `"}`}
}

// fleet is three clusters running the same applications: names repeat across clusters, labels
// have dotted and slashed keys, Pods have several containers, Nodes are cluster-scoped.
func fleet(t *testing.T) []store.Op {
	var ops []store.Op
	for i, c := range []string{"east", "west", "north"} {
		web := map[string]string{"app.kubernetes.io/name": "web", "app": "web", "tier": "frontend"}
		ops = append(ops,
			pod(c, "shop", "web-1", int64(100+i), web, "node-1", "Running", "nginx:1.27", "envoy:1.31").op(t),
			pod(c, "shop", "web-2", int64(110+i), web, "", "Pending", "nginx:1.27").op(t),
			pod(c, "shop", "db-0", int64(120+i), map[string]string{"app.kubernetes.io/name": "postgres", "tier": "backend"}, "node-1", "Running", "postgres:16").op(t),
			object{cluster: c, group: "apps", version: "v1", resource: "deployments", kind: "Deployment", namespace: "shop", name: "web",
				uid: c + "-deploy-web", rv: int64(130 + i), epoch: 1, labels: web, created: fmt.Sprintf("2026-01-0%dT00:00:00Z", i+1),
				spec: `{"replicas":2,"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.27"}]}}}`}.op(t),
			object{cluster: c, version: "v1", resource: "nodes", kind: "Node", name: "node-1", uid: c + "-node-1", rv: int64(140 + i), epoch: 1,
				labels: map[string]string{"kubernetes.io/hostname": "node-1"}, created: "2025-06-01T00:00:00Z",
				status: `{"conditions":[{"type":"Ready","status":"True"}],"nodeInfo":{"kubeletVersion":"v1.33.1"}}`}.op(t),
		)
	}
	ops = append(ops, pod("east", "kube-system", "coredns-1", 150, map[string]string{"k8s-app": "kube-dns"}, "node-1", "Running", "coredns:1.11").op(t))
	return ops
}

func write(t *testing.T, s *Store, ops ...store.Op) {
	t.Helper()
	failed, err := s.Write(t.Context(), ops)
	if err != nil || len(failed) > 0 {
		t.Fatalf("write: %v %v", failed, err)
	}
}

// names are "cluster/namespace/name" of the items.
func names(res *store.Result) []string {
	var out []string
	for _, it := range res.Items {
		m := gjson.GetManyBytes(it, "metadata.annotations."+gjson.Escape(document.CachedFromClusterAnnotation), "metadata.namespace", "metadata.name")
		out = append(out, m[0].Str+"/"+m[1].Str+"/"+m[2].Str)
	}
	return out
}

func find(t *testing.T, s *Store, q *query.Query) *store.Result {
	t.Helper()
	if q.Limit == 0 {
		q.Limit = query.MaxLimit
	}
	res, err := s.Search(t.Context(), q)
	if err != nil {
		t.Fatalf("search %+v: %v", q, err)
	}
	return res
}

func parse(t *testing.T, params string) *query.Query {
	t.Helper()
	v, err := urlValues(params)
	if err != nil {
		t.Fatal(err)
	}
	q, err := query.Parse(v, time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatalf("parse %q: %v", params, err)
	}
	return q
}

func TestSearchFleet(t *testing.T) {
	s := newStore(t, t.TempDir())
	defer s.Close()
	write(t, s, fleet(t)...)
	tests := []struct {
		params string
		want   []string
	}{
		{"resources=nodes", []string{"east//node-1", "north//node-1", "west//node-1"}},
		{"resources=deployments.apps&clusters=west,north", []string{"north/shop/web", "west/shop/web"}},
		{"resources=deployments.core", nil},
		{"resources=pods&namespaces=kube-system", []string{"east/kube-system/coredns-1"}},
		{"names=web-1&clusters=east", []string{"east/shop/web-1"}},
		{"namePrefix=web-&clusters=west", []string{"west/shop/web-1", "west/shop/web-2"}},
		{"labelSelector=app.kubernetes.io/name=web&clusters=east", []string{"east/shop/web", "east/shop/web-1", "east/shop/web-2"}},
		{"labelSelector=app.kubernetes.io/name==postgres", []string{"east/shop/db-0", "north/shop/db-0", "west/shop/db-0"}},
		{"labelSelector=app.kubernetes.io/name in (postgres,dns),tier&clusters=east", []string{"east/shop/db-0"}},
		{"labelSelector=app.kubernetes.io/name notin (web)&clusters=east", []string{"east/kube-system/coredns-1", "east/shop/db-0", "east//node-1"}},
		{"labelSelector=tier!=frontend&clusters=east&resources=pods", []string{"east/kube-system/coredns-1", "east/shop/db-0"}},
		{"labelSelector=!tier&clusters=east", []string{"east/kube-system/coredns-1", "east//node-1"}},
		{"labelSelector=kubernetes.io/hostname&clusters=north", []string{"north//node-1"}},
		{"labelSelector=app=web,app.kubernetes.io/name!=web", nil},
		// Any element of a list matches: the second container's image.
		{"fieldSelector=spec.containers.image=envoy:1.31", []string{"east/shop/web-1", "north/shop/web-1", "west/shop/web-1"}},
		{"fieldSelector=spec.containers.image!=envoy:1.31&clusters=east&resources=pods", []string{"east/kube-system/coredns-1", "east/shop/db-0", "east/shop/web-2"}},
		{"fieldSelector=spec.nodeName=&resources=pods", []string{"east/shop/web-2", "north/shop/web-2", "west/shop/web-2"}},
		{"fieldSelector=spec.nodeName!=,status.phase!=Running&resources=pods", nil},
		{"fieldSelector=metadata.namespace=&clusters=west", []string{"west//node-1"}},
		{"fieldSelector=metadata.namespace!=&clusters=west&resources=deployments", []string{"west/shop/web"}},
		{"fieldSelector=metadata.namespace==kube-system", []string{"east/kube-system/coredns-1"}},
		{"fieldSelector=metadata.name=web,metadata.namespace=shop&clusters=east", []string{"east/shop/web"}},
		{"fieldSelector=spec.replicas=2&clusters=north", []string{"north/shop/web"}},
		{"fieldSelector=metadata.labels.app.kubernetes.io/name=postgres&clusters=west", []string{"west/shop/db-0"}},
		{"fieldSelector=metadata.annotations.resource.karmada.io/cached-from-cluster=north&resources=nodes", []string{"north//node-1"}},
		{"fieldSelector=status.conditions.type=Ready&clusters=east", []string{"east//node-1"}},
		{"fieldSelector=spec.nosuch=x", nil},
		{"q=coredns", []string{"east/kube-system/coredns-1"}},
		{"q=NGINX web-2&clusters=north", []string{"north/shop/web-2"}},
		{"q=!!!", nil},
		{"fuzzyName=ngnix", nil},
		{"fuzzyName=CoreDN", []string{"east/kube-system/coredns-1"}},
		{"fuzzyName=postgress", nil},
		{"fuzzyName=nodd&clusters=east", []string{"east//node-1"}},
		{"owner=ReplicaSet/db-0-rs&clusters=north", []string{"north/shop/db-0"}},
		{"owner=west-rs-web-2", []string{"west/shop/web-2"}},
		{"createdSince=2026-01-02T00:00:00Z&resources=deployments", []string{"north/shop/web", "west/shop/web"}},
		{"createdBefore=2026-01-02T00:00:00Z&resources=deployments", []string{"east/shop/web"}},
		{"createdSince=30h&resources=deployments", []string{"north/shop/web", "west/shop/web"}},
		{"changedSince=2026-01-01T00:00:00Z&resources=nodes&clusters=east", []string{"east//node-1"}},
		{"changedSince=2026-01-01T00:00:00.001Z&resources=nodes", nil},
		{"sort=namespace:desc,name&clusters=north", []string{"north/shop/db-0", "north/shop/web", "north/shop/web-1", "north/shop/web-2", "north//node-1"}},
		{"sort=creationTimestamp:desc&resources=deployments,nodes", []string{"north/shop/web", "west/shop/web", "east/shop/web", "east//node-1", "north//node-1", "west//node-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.params, func(t *testing.T) {
			res := find(t, s, parse(t, tt.params))
			if got := names(res); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if res.Total != int64(len(tt.want)) || len(res.Epochs) != len(res.Items) {
				t.Errorf("total %d, epochs %d for %d items", res.Total, len(res.Epochs), len(res.Items))
			}
		})
	}
}

func TestFuzzyTranspositions(t *testing.T) {
	s := newStore(t, t.TempDir())
	defer s.Close()
	p := pod("east", "shop", "nginx-7d9f", 1, nil, "", "Running", "nginx")
	write(t, s, p.op(t))
	for _, f := range []string{"ngnix", "nginx", "NGINX-7D", "7d9f", "ngin", "nginx 7d9e"} {
		if got := names(find(t, s, parse(t, "fuzzyName="+f))); len(got) != 1 {
			t.Errorf("fuzzyName=%s: got %q", f, got)
		}
	}
	for _, f := range []string{"apache", "nxgnixx", "nginx 7x", "nginx zzzz"} {
		if got := names(find(t, s, parse(t, "fuzzyName="+f))); len(got) != 0 {
			t.Errorf("fuzzyName=%s: got %q", f, got)
		}
	}
}

func TestScope(t *testing.T) {
	s := newStore(t, t.TempDir())
	defer s.Close()
	write(t, s, fleet(t)...)
	q := parse(t, "")
	q.Scope = &query.Scope{Grants: []query.Grant{
		{Clusters: []string{"east"}, Namespaces: []string{"kube-system", ""}},
		{Clusters: []string{"west"}, Resources: []query.Resource{{Resource: "deployments", Group: "apps"}}},
	}}
	want := []string{"east/kube-system/coredns-1", "east//node-1", "west/shop/web"}
	if got := names(find(t, s, q)); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	q.Scope = &query.Scope{}
	if got := find(t, s, q); got.Total != 0 {
		t.Errorf("no grant: %d matches", got.Total)
	}
	counts, err := s.Counts(t.Context(), &query.Scope{Grants: []query.Grant{{Clusters: []string{"east"}, Namespaces: []string{""}}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []store.Count{{Cluster: "east", Group: "", Resource: "nodes", Documents: 1}}; !slices.Equal(counts, want) {
		t.Errorf("scoped counts %v, want %v", counts, want)
	}
}

func TestCounts(t *testing.T) {
	s := newStore(t, t.TempDir())
	defer s.Close()
	write(t, s, fleet(t)...)
	got, err := s.Counts(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.Count{
		{Cluster: "east", Group: "", Resource: "nodes", Documents: 1}, {Cluster: "east", Group: "", Resource: "pods", Documents: 4}, {Cluster: "east", Group: "apps", Resource: "deployments", Documents: 1},
		{Cluster: "north", Group: "", Resource: "nodes", Documents: 1}, {Cluster: "north", Group: "", Resource: "pods", Documents: 3}, {Cluster: "north", Group: "apps", Resource: "deployments", Documents: 1},
		{Cluster: "west", Group: "", Resource: "nodes", Documents: 1}, {Cluster: "west", Group: "", Resource: "pods", Documents: 3}, {Cluster: "west", Group: "apps", Resource: "deployments", Documents: 1},
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestFacetsAndVersions(t *testing.T) {
	s := newStore(t, t.TempDir())
	defer s.Close()
	write(t, s, fleet(t)...)
	q := parse(t, "facets=cluster,namespace,resource,labels,label:app.kubernetes.io/name&facetSize=2&labelSelector=tier&limit=2")
	q.Versions = true
	q.Clusters = []string{"east", "west"}
	res := find(t, s, q)
	got, _ := json.Marshal(res.Facets)
	want := `[{"name":"cluster","buckets":[{"value":"east","count":4},{"value":"west","count":4}],"other":0},` +
		`{"name":"namespace","buckets":[{"value":"shop","count":8}],"other":0},` +
		`{"name":"resource","buckets":[{"value":"pods","count":6},{"value":"deployments.apps","count":2}],"other":0},` +
		`{"name":"labels","buckets":[{"value":"app.kubernetes.io/name=web","count":6},{"value":"app=web","count":6}],"other":10},` +
		`{"name":"label:app.kubernetes.io/name","buckets":[{"value":"web","count":6},{"value":"postgres","count":2}],"other":0}]`
	if string(got) != want {
		t.Errorf("facets\n got %s\nwant %s", got, want)
	}
	// The newest resourceVersion per cluster of the query's clusters, whatever its label selector.
	if want := map[string]int64{"east": 150, "west": 141}; fmt.Sprint(res.Versions) != fmt.Sprint(want) {
		t.Errorf("versions %v, want %v", res.Versions, want)
	}
	if res.Total != 8 || len(res.Items) != 2 || res.Continue == "" {
		t.Fatalf("total %d, %d items, continue %q", res.Total, len(res.Items), res.Continue)
	}
	q.Continue = res.Continue
	next := find(t, s, q)
	if next.Facets != nil || next.Versions != nil || next.Total != 8 {
		t.Errorf("second page: facets %v, versions %v, total %d", next.Facets, next.Versions, next.Total)
	}
	s.Release(t.Context(), next.Continue)
}

func TestItems(t *testing.T) {
	s := newStore(t, t.TempDir())
	defer s.Close()
	o := pod("east", "shop", "web-1", 5, map[string]string{"a": "<b>&\u00e9"}, "", "Running", "nginx")
	o.spec = `{"containers":[{"name":"c","image":"nginx"}],"f":1.5e10,"g":100,"h":0.25,"i":1E2,"j":null,"k":[],"l":{},"m":"tab\tnl\nq\"\u0001/"}`
	write(t, s, o.op(t))
	res := find(t, s, parse(t, ""))
	got := string(res.Items[0])
	for _, want := range []string{`"a":"<b>&é"`, `"f":1.5E10`, `"g":100,`, `"h":0.25`, `"i":100.0`, `"j":null`, `"k":[]`, `"l":{}`, `"m":"tab\tnl\nq\"\u0001/"`,
		`"resource.karmada.io/cached-from-cluster":"east"`} {
		if !strings.Contains(got, want) {
			t.Errorf("item lacks %s: %s", want, got)
		}
	}
	if res.Epochs[0] != 1 {
		t.Errorf("epoch %d", res.Epochs[0])
	}
	q := parse(t, "metadataOnly=true")
	meta := string(find(t, s, q).Items[0])
	if !strings.HasPrefix(meta, `{"apiVersion":"v1","kind":"Pod","metadata":{`) || strings.Contains(meta, "spec") || strings.Contains(meta, "status") {
		t.Errorf("metadata only: %s", meta)
	}
}

func TestPagingSnapshot(t *testing.T) {
	s := newStore(t, t.TempDir())
	defer s.Close()
	var ops []store.Op
	for i := range 25 {
		ops = append(ops, pod("east", "shop", fmt.Sprintf("p%02d", i), int64(i+1), nil, "", "Running", "nginx").op(t))
	}
	write(t, s, ops...)
	q := parse(t, "limit=10&sort=name")
	var all []string
	res := find(t, s, q)
	first := res.Continue
	all = append(all, names(res)...)
	// Changes after the first page are not seen by its pages: a deletion, a new object, a rename.
	gone := ops[12]
	write(t, s, store.Op{Delete: true, Kind: "Pod", UID: gone.UID, Epoch: 1, Version: 100, Versioned: true},
		pod("east", "shop", "p00a", 1, nil, "", "Running", "nginx").op(t))
	for res.Continue != "" {
		if res.Total != 25 {
			t.Fatalf("total %d", res.Total)
		}
		q.Continue = res.Continue
		res = find(t, s, q)
		all = append(all, names(res)...)
	}
	if len(all) != 25 || all[12] != "east/shop/p12" || slices.Contains(all, "east/shop/p00a") {
		t.Errorf("pages: %q", all)
	}
	// After the last page the snapshot is gone.
	q.Continue = first
	if _, err := s.Search(t.Context(), q); !errors.Is(err, store.ErrExpired) {
		t.Errorf("a token of a finished walk: %v", err)
	}
	// A new walk sees the changes.
	q.Continue = ""
	if res := find(t, s, q); res.Total != 25 || names(res)[1] != "east/shop/p00a" {
		t.Errorf("new walk: %d %q", res.Total, names(res))
	}

	// Tokens belong to their query and store.
	q.Continue = ""
	res = find(t, s, q)
	other := parse(t, "limit=10&sort=name:desc")
	other.Continue = res.Continue
	if _, err := s.Search(t.Context(), other); !errors.Is(err, store.ErrBadToken) {
		t.Errorf("another query's token: %v", err)
	}
	q.Continue = res.Continue[:len(res.Continue)-2] + "xx"
	if _, err := s.Search(t.Context(), q); !errors.Is(err, store.ErrBadToken) {
		t.Errorf("a tampered token: %v", err)
	}
	q.Continue = "garbage"
	if _, err := s.Search(t.Context(), q); !errors.Is(err, store.ErrBadToken) {
		t.Errorf("garbage: %v", err)
	}
	// Released, a token's snapshot is gone.
	s.Release(t.Context(), res.Continue)
	q.Continue = res.Continue
	if _, err := s.Search(t.Context(), q); !errors.Is(err, store.ErrExpired) {
		t.Errorf("a released token: %v", err)
	}
	// Past its keep-alive, a token is expired, and the janitor frees the snapshot.
	q.Continue = ""
	res = find(t, s, q)
	s.now = func() time.Time { return time.Now().Add(6 * time.Minute) }
	q.Continue = res.Continue
	if _, err := s.Search(t.Context(), q); !errors.Is(err, store.ErrExpired) {
		t.Errorf("an expired token: %v", err)
	}
	// This walk's and the unfinished "new walk" above.
	if n := len(s.snaps.Expire(s.now())); n != 2 {
		t.Errorf("expired %d snapshots, want 2", n)
	}
}

func TestSnapshotsExpireByJanitor(t *testing.T) {
	s, err := New(Options{Dir: t.TempDir(), KeepAlive: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ops []store.Op
	for i := range 3 {
		ops = append(ops, pod("east", "shop", fmt.Sprintf("p%d", i), 1, nil, "", "Running", "nginx").op(t))
	}
	write(t, s, ops...)
	res := find(t, s, parse(t, "limit=1"))
	if res.Continue == "" {
		t.Fatal("no continue")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, n := s.snaps.Count(""); n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the janitor did not free the snapshot")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRelevance(t *testing.T) {
	s := newStore(t, t.TempDir())
	defer s.Close()
	write(t, s, fleet(t)...)
	res := find(t, s, parse(t, "q=nginx&clusters=east&resources=pods"))
	if got := names(res); !slices.Equal(got, []string{"east/shop/web-2", "east/shop/web-1"}) && !slices.Equal(got, []string{"east/shop/web-1", "east/shop/web-2"}) {
		t.Errorf("got %q", got)
	}
}

func TestRejected(t *testing.T) {
	s := newStore(t, t.TempDir())
	defer s.Close()
	for _, q := range []*query.Query{
		{Limit: 0},
		{Limit: 10, Labels: []query.Requirement{{Key: "a", Op: "gt", Values: []string{"1"}}}},
		{Limit: 10, Fields: []query.Requirement{{Key: "a", Op: query.In, Values: []string{"1", "2"}}}},
	} {
		if _, err := s.Search(t.Context(), q); !errors.Is(err, store.ErrRejected) {
			t.Errorf("%+v: %v", q, err)
		}
	}
}

func TestClosedContext(t *testing.T) {
	s := newStore(t, t.TempDir())
	defer s.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Write(ctx, fleet(t)); !errors.Is(err, context.Canceled) {
		t.Errorf("write: %v", err)
	}
}

// TestConcurrentWritesAndPages pages through a snapshot while writers change the index: every
// walk sees exactly the documents of its first page's snapshot.
func TestConcurrentWritesAndPages(t *testing.T) {
	s := newStore(t, t.TempDir())
	defer s.Close()
	var ops []store.Op
	for i := range 40 {
		ops = append(ops, pod("east", "shop", fmt.Sprintf("p%02d", i), int64(i+1), nil, "", "Running", "nginx").op(t))
	}
	write(t, s, ops...)
	var more []store.Op
	for i := range 500 {
		more = append(more, pod("west", "shop", fmt.Sprintf("w%03d", i), 1, nil, "", "Running", "nginx").op(t))
	}
	done := make(chan struct{})
	writerErr := make(chan error, 1)
	go func() {
		defer close(writerErr)
		for _, o := range more {
			select {
			case <-done:
				return
			default:
			}
			if _, err := s.Write(context.Background(), []store.Op{o}); err != nil {
				writerErr <- err
				return
			}
		}
	}()
	for range 5 {
		q := parse(t, "limit=7&clusters=east")
		res := find(t, s, q)
		seen := len(res.Items)
		for res.Continue != "" {
			q.Continue = res.Continue
			res = find(t, s, q)
			seen += len(res.Items)
		}
		if seen != 40 {
			t.Errorf("walk saw %d, want 40", seen)
		}
	}
	close(done)
	if err := <-writerErr; err != nil {
		t.Fatal(err)
	}
}
