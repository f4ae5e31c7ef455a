package queryapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/auth"
	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/registry"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/queryapi/watchcache"
)

// fakeStore answers searches from objects in memory: the filters the facade sets (resource,
// clusters, namespaces, names, field selectors), sorted by namespace, name, cluster, paged by an offset token.
type fakeStore struct {
	mu      sync.Mutex
	objects []fakeObject
	// failPage makes the search of that page number (0 the first) fail.
	failPage int
	searches int
}

type fakeObject struct {
	cluster, group, resource, namespace, name string
	rv                                        int64
	// body is the stored object when set; else a Pod of that name.
	body string
}

func (o fakeObject) json() json.RawMessage {
	if o.body != "" {
		return json.RawMessage(o.body)
	}
	return json.RawMessage(fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":%q,"uid":"uid-%s-%s-%s","resourceVersion":"%d","creationTimestamp":"2026-11-30T10:00:00Z","labels":{"app.kubernetes.io/name":"web"},"annotations":{"resource.karmada.io/cached-from-cluster":%q}},"spec":{"containers":[{"name":"app","image":"nginx:1.27"}]}}`,
		o.name, o.namespace, o.cluster, o.namespace, o.name, o.rv, o.cluster))
}

func (f *fakeStore) Search(_ context.Context, q *query.Query) (*store.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	page := 0
	offset := 0
	if q.Continue != "" {
		fmt.Sscanf(q.Continue, "page-%d-offset-%d", &page, &offset)
	}
	f.searches++
	if f.failPage > 0 && page == f.failPage {
		return nil, fmt.Errorf("page %d: %w", page, store.ErrUnavailable)
	}
	var match []fakeObject
	for _, o := range f.objects {
		if len(q.Resources) > 0 && (o.resource != q.Resources[0].Resource || o.group != q.Resources[0].Group) ||
			(len(q.Clusters) > 0 && !slices.Contains(q.Clusters, o.cluster)) ||
			(len(q.Namespaces) > 0 && !slices.Contains(q.Namespaces, o.namespace)) ||
			(len(q.Names) > 0 && !slices.Contains(q.Names, o.name)) ||
			!q.Scope.Allows(o.cluster, o.namespace, o.group, o.resource) ||
			(len(q.Fields) > 0 && !matches(&query.Query{Fields: q.Fields}, o.json())) {
			continue
		}
		match = append(match, o)
	}
	slices.SortFunc(match, func(a, b fakeObject) int {
		return strings.Compare(a.namespace+"/"+a.name+"/"+a.cluster, b.namespace+"/"+b.name+"/"+b.cluster)
	})
	res := &store.Result{Total: int64(len(match))}
	for _, f := range q.Facets {
		if f.Dimension != query.FacetNamespace {
			continue
		}
		counts := map[string]int64{}
		for _, o := range match {
			counts[o.namespace]++
		}
		fr := store.FacetResult{Name: f.Name()}
		for _, ns := range slices.Sorted(maps.Keys(counts)) {
			fr.Buckets = append(fr.Buckets, store.Bucket{Value: ns, Count: counts[ns]})
		}
		res.Facets = append(res.Facets, fr)
	}
	end := min(offset+q.Limit, len(match))
	for _, o := range match[offset:end] {
		res.Items = append(res.Items, o.json())
	}
	if end < len(match) {
		res.Continue = fmt.Sprintf("page-%d-offset-%d", page+1, end)
	}
	return res, nil
}

func (f *fakeStore) Release(context.Context, string) {}

func (f *fakeStore) Counts(context.Context, *query.Scope) ([]store.Count, error) { return nil, nil }

func testCatalog() *catalog {
	c := newCatalog()
	for _, cl := range []string{"member1", "member2"} {
		c.apply("selection/"+cl+"//Pod/", &registry.SelectionRecord{Cluster: cl, Version: "v1", Resource: "pods", Kind: "Pod",
			Namespaced: true, Singular: "pod", ShortNames: []string{"po"}, Categories: []string{"all"}})
		c.apply("selection/"+cl+"//ConfigMap/shop", &registry.SelectionRecord{Cluster: cl, Version: "v1", Resource: "configmaps", Kind: "ConfigMap",
			Namespace: "shop", Namespaced: true, Singular: "configmap", ShortNames: []string{"cm"}})
		c.apply("selection/"+cl+"//Node/", &registry.SelectionRecord{Cluster: cl, Version: "v1", Resource: "nodes", Kind: "Node",
			Singular: "node", ShortNames: []string{"no"}})
	}
	// A CRD only member2 serves.
	c.apply("selection/member2/example.com/Widget/", &registry.SelectionRecord{Cluster: "member2", Group: "example.com",
		Version: "v1beta1", Resource: "widgets", Kind: "Widget", Namespaced: true, Singular: "widget"})
	c.apply("selection/member1/apps/Deployment/", &registry.SelectionRecord{Cluster: "member1", Group: "apps",
		Version: "v1", Resource: "deployments", Kind: "Deployment", Namespaced: true, ShortNames: []string{"deploy"}, Categories: []string{"all"}})
	c.markSynced()
	return c
}

func newFacadeServer(t *testing.T, st *fakeStore) *httptest.Server {
	t.Helper()
	srv, _ := newFacadeTestServer(t, st)
	return srv
}

// newFacadeServerWithCache is a facade with a ready watch cache, fed by the test.
func newFacadeServerWithCache(t *testing.T, st *fakeStore) (string, *Server) {
	t.Helper()
	srv, s := newFacadeTestServer(t, st)
	return srv.URL, s
}

func newFacadeTestServer(t *testing.T, st searcher) (*httptest.Server, *Server) {
	t.Helper()
	wms := []store.Watermark{
		{Cluster: "member1", Resource: "pods", Kind: "Pod", ResourceVersion: 500},
		{Cluster: "member2", Resource: "pods", Kind: "Pod", ResourceVersion: 700},
	}
	f := &fleet{readWatermarks: func(context.Context) ([]store.Watermark, error) { return wms, nil },
		interval: time.Second, staleAfter: time.Minute, log: slog.New(slog.DiscardHandler), now: time.Now}
	f.poll(t.Context())
	s := &Server{opts: Options{RequestTimeout: 5 * time.Second, ResourceVersionWait: 300 * time.Millisecond},
		log: slog.New(slog.DiscardHandler), store: st, fleet: f, metrics: newMetrics(), catalog: testCatalog(), authn: anonymous(t)}
	c := watchcache.New(watchcache.Options{Log: s.log, MaxEvents: 1000, MaxBytes: 1 << 20})
	c.CaughtUp()
	s.cache = c
	s.engine = s.routes()
	srv := httptest.NewServer(s.engine)
	t.Cleanup(srv.Close)
	return srv, s
}

// cacheOf is the watch cache of a test server, to feed it events.
func cacheOf(s *Server) *watchcache.Cache { return s.cache.(*watchcache.Cache) }

func fetch(t *testing.T, method, url, accept string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, url, err)
	}
	return resp.StatusCode, resp.Header, body
}

func fleetObjects() []fakeObject {
	var objs []fakeObject
	for _, cl := range []string{"member1", "member2"} {
		for i := range 1200 {
			objs = append(objs, fakeObject{cluster: cl, resource: "pods", namespace: "shop", name: fmt.Sprintf("web-%04d", i), rv: int64(100 + i)})
		}
	}
	// Only member2 has this one.
	objs = append(objs, fakeObject{cluster: "member2", resource: "pods", namespace: "web", name: "only-here", rv: 42})
	return objs
}

func TestFacadeDiscovery(t *testing.T) {
	srv := newFacadeServer(t, &fakeStore{})
	code, h, body := fetch(t, "GET", srv.URL+"/apis", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json")
	if code != 200 || h.Get("Content-Type") != aggregatedContentType {
		t.Fatalf("aggregated /apis: %d %s: %s", code, h.Get("Content-Type"), body)
	}
	groups := gjson.GetBytes(body, "items.#.metadata.name").String()
	if groups != `["apps","example.com","search.karmada.io"]` {
		t.Errorf("aggregated /apis groups = %s, want apps and example.com (the union of the members), then Karmada's search API", groups)
	}
	if got := gjson.GetBytes(body, `items.#(metadata.name=="apps").versions.0.resources.0`).Raw; !strings.Contains(got, `"scope":"Namespaced"`) ||
		!strings.Contains(got, `"shortNames":["deploy"]`) || !strings.Contains(got, `"verbs":["get","list","watch"]`) {
		t.Errorf("deployments discovery = %s", got)
	}
	_, _, body = fetch(t, "GET", srv.URL+"/api", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
	if got := gjson.GetBytes(body, "items.0.versions.0.resources.#.resource").String(); got != `["configmaps","nodes","pods"]` {
		t.Errorf("aggregated /api resources = %s", got)
	}
	// Legacy forms.
	_, _, body = fetch(t, "GET", srv.URL+"/api", "application/json")
	if got := gjson.GetBytes(body, "versions").String(); got != `["v1"]` {
		t.Errorf("/api = %s", body)
	}
	_, _, body = fetch(t, "GET", srv.URL+"/api/v1", "")
	if got := gjson.GetBytes(body, `resources.#(name=="pods").shortNames`).String(); got != `["po"]` {
		t.Errorf("/api/v1 pods short names = %s in %s", got, body)
	}
	// One cluster's view has only its own resources.
	code, _, body = fetch(t, "GET", srv.URL+"/clusters/member1/apis", "")
	if code != 200 || gjson.GetBytes(body, "groups.#.name").String() != `["apps"]` {
		t.Errorf("/clusters/member1/apis: %d %s", code, body)
	}
	code, _, body = fetch(t, "GET", srv.URL+"/clusters/member1/apis/example.com/v1beta1", "")
	if code != 404 || gjson.GetBytes(body, "kind").Str != "Status" {
		t.Errorf("member1 serves no example.com: %d %s", code, body)
	}
	code, _, body = fetch(t, "GET", srv.URL+"/clusters/nosuch/api/v1/pods", "")
	if code != 404 || !strings.Contains(gjson.GetBytes(body, "message").Str, "member1, member2") {
		t.Errorf("unknown cluster: %d %s", code, body)
	}
	code, _, body = fetch(t, "GET", srv.URL+"/version", "")
	if code != 200 || gjson.GetBytes(body, "major").Str != "1" {
		t.Errorf("/version: %d %s", code, body)
	}
}

func TestFacadeRefusesWrites(t *testing.T) {
	srv := newFacadeServer(t, &fakeStore{objects: fleetObjects()})
	for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		code, _, body := fetch(t, m, srv.URL+"/api/v1/namespaces/shop/pods/web-0001", "")
		if code != 405 || gjson.GetBytes(body, "reason").Str != "MethodNotAllowed" || !strings.Contains(string(body), "read-only") {
			t.Errorf("%s: %d %s", m, code, body)
		}
	}
}

func TestFacadeListStreamsEveryPage(t *testing.T) {
	st := &fakeStore{objects: fleetObjects()}
	srv := newFacadeServer(t, st)
	code, _, body := fetch(t, "GET", srv.URL+"/api/v1/pods", "application/json")
	if code != 200 {
		t.Fatalf("list: %d %s", code, body)
	}
	var list struct {
		Kind     string `json:"kind"`
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
			Continue        string `json:"continue"`
		} `json:"metadata"`
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatalf("list is not JSON: %v", err)
	}
	if list.Kind != "PodList" || len(list.Items) != 2401 || list.Metadata.Continue != "" {
		t.Fatalf("list: kind %s, %d items, continue %q; want PodList, 2401, none", list.Kind, len(list.Items), list.Metadata.Continue)
	}
	if want := (2401 + fullListPage - 1) / fullListPage; st.searches != want {
		t.Errorf("%d searches for 2401 objects, want %d pages of %d", st.searches, want, fullListPage)
	}
	v, err := parseRV(list.Metadata.ResourceVersion, view{})
	if err != nil || v["member1"] != 500 || v["member2"] != 700 {
		t.Errorf("list resourceVersion %q = %v (%v), want member1 500, member2 700", list.Metadata.ResourceVersion, v, err)
	}
	// Fleet objects carry a vector of their own cluster's resourceVersion.
	first := list.Items[0]
	ov, err := parseRV(gjson.GetBytes(first, "metadata.resourceVersion").Str, view{})
	if err != nil || len(ov) != 1 || ov["member1"] != 100 {
		t.Errorf("first object's resourceVersion %s: %v %v", gjson.GetBytes(first, "metadata.resourceVersion"), ov, err)
	}

	// A limit gives one page, a continue token and the count left.
	_, _, body = fetch(t, "GET", srv.URL+"/api/v1/namespaces/shop/pods?limit=50", "")
	if n := len(gjson.GetBytes(body, "items").Array()); n != 50 || gjson.GetBytes(body, "metadata.continue").Str == "" ||
		gjson.GetBytes(body, "metadata.remainingItemCount").Int() != 2350 {
		t.Errorf("limit=50: %d items, metadata %s", n, gjson.GetBytes(body, "metadata"))
	}

	// One cluster's view: the member's own resourceVersions, its objects only.
	_, _, body = fetch(t, "GET", srv.URL+"/clusters/member2/api/v1/namespaces/web/pods", "")
	if got := gjson.GetBytes(body, "metadata.resourceVersion").Str; got != "700" {
		t.Errorf("member2 list resourceVersion %q, want 700", got)
	}
	if got := gjson.GetBytes(body, "items.#.metadata.resourceVersion").String(); got != `["42"]` {
		t.Errorf("member2 web pods resourceVersions %s", got)
	}
}

func TestFacadeListBrokenOffWhenAPageFails(t *testing.T) {
	srv := newFacadeServer(t, &fakeStore{objects: fleetObjects(), failPage: 2})
	req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/api/v1/pods", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil || json.Valid(body) {
		t.Fatalf("a list whose third page failed was answered whole: read error %v, %d bytes, valid JSON %v", err, len(body), json.Valid(body))
	}
}

func TestFacadeGet(t *testing.T) {
	srv := newFacadeServer(t, &fakeStore{objects: fleetObjects()})
	code, _, body := fetch(t, "GET", srv.URL+"/api/v1/namespaces/web/pods/only-here", "")
	if code != 200 || gjson.GetBytes(body, "metadata.name").Str != "only-here" {
		t.Errorf("unique get: %d %s", code, body)
	}
	code, _, body = fetch(t, "GET", srv.URL+"/api/v1/namespaces/shop/pods/web-0007", "")
	msg := gjson.GetBytes(body, "message").Str
	if code != 409 || gjson.GetBytes(body, "reason").Str != "Conflict" || !strings.Contains(msg, "member1, member2") || !strings.Contains(msg, "web-0007_member1") {
		t.Errorf("ambiguous get: %d %s", code, body)
	}
	code, _, body = fetch(t, "GET", srv.URL+"/clusters/member2/api/v1/namespaces/shop/pods/web-0007", "")
	if code != 200 || gjson.GetBytes(body, "metadata.resourceVersion").Str != "107" {
		t.Errorf("one-cluster get: %d %s", code, body)
	}
	code, _, body = fetch(t, "GET", srv.URL+"/qualified/api/v1/namespaces/shop/pods/web-0007_member2", "")
	if code != 200 || gjson.GetBytes(body, "metadata.name").Str != "web-0007_member2" {
		t.Errorf("qualified get: %d %s", code, body)
	}
	code, _, body = fetch(t, "GET", srv.URL+"/api/v1/namespaces/shop/pods/nosuch", "")
	if code != 404 || gjson.GetBytes(body, "message").Str != `pods "nosuch" not found` {
		t.Errorf("missing: %d %s", code, body)
	}
	// Namespaces are not cached: one holding cached objects exists, as kubectl checks after a 404.
	code, _, body = fetch(t, "GET", srv.URL+"/clusters/member2/api/v1/namespaces/web", "")
	if code != 200 || gjson.GetBytes(body, "metadata.name").Str != "web" {
		t.Errorf("implied namespace: %d %s", code, body)
	}
	code, _, body = fetch(t, "GET", srv.URL+"/clusters/member1/api/v1/namespaces/web", "")
	if code != 404 || gjson.GetBytes(body, "message").Str != `namespaces "web" not found` {
		t.Errorf("namespace without cached objects in member1: %d %s", code, body)
	}
	code, _, _ = fetch(t, "GET", srv.URL+"/api/v1/namespaces/shop/pods/web-0007/log", "")
	if code != 404 {
		t.Errorf("subresource: %d", code)
	}
}

func TestFacadeTable(t *testing.T) {
	srv := newFacadeServer(t, &fakeStore{objects: fleetObjects()})
	code, _, body := fetch(t, "GET", srv.URL+"/qualified/api/v1/namespaces/web/pods", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
	if code != 200 || gjson.GetBytes(body, "kind").Str != "Table" {
		t.Fatalf("table: %d %s", code, body)
	}
	if got := gjson.GetBytes(body, "columnDefinitions.0.name").Str; got != "Cluster" {
		t.Errorf("first column %q, want Cluster", got)
	}
	row := gjson.GetBytes(body, "rows.0")
	if row.Get("cells.0").Str != "member2" || row.Get("object.kind").Str != "PartialObjectMetadata" ||
		row.Get("object.metadata.name").Str != "only-here_member2" {
		t.Errorf("row = %s", row.Raw)
	}
	code, _, body = fetch(t, "GET", srv.URL+"/api/v1/pods?includeObject=Nope", "application/json;as=Table;v=v1;g=meta.k8s.io")
	if code != 400 {
		t.Errorf("bad includeObject: %d %s", code, body)
	}
}

func TestFacadeResourceVersion(t *testing.T) {
	srv := newFacadeServer(t, &fakeStore{objects: fleetObjects()})
	ahead := rvVector{"member1": 501}.encode(view{})
	code, _, body := fetch(t, "GET", srv.URL+"/api/v1/pods?limit=1&resourceVersionMatch=NotOlderThan&resourceVersion="+ahead, "")
	if code != 504 || gjson.GetBytes(body, "details.causes.0.reason").Str != "ResourceVersionTooLarge" {
		t.Errorf("ahead of the index: %d %s", code, body)
	}
	reached := rvVector{"member1": 400, "member2": 700}.encode(view{})
	code, _, _ = fetch(t, "GET", srv.URL+"/api/v1/pods?limit=1&resourceVersionMatch=NotOlderThan&resourceVersion="+reached, "")
	if code != 200 {
		t.Errorf("reached: %d", code)
	}
	code, _, body = fetch(t, "GET", srv.URL+"/clusters/member1/api/v1/pods?limit=1&resourceVersionMatch=Exact&resourceVersion=3", "")
	if code != 410 || gjson.GetBytes(body, "reason").Str != "Expired" {
		t.Errorf("exact old: %d %s", code, body)
	}
	code, _, body = fetch(t, "GET", srv.URL+"/api/v1/pods?limit=1&resourceVersion=notavector", "")
	if code != 400 {
		t.Errorf("garbage resourceVersion: %d %s", code, body)
	}
}

// anonymous is an authenticator that lets every request in as system:anonymous.
func anonymous(t *testing.T) *auth.Authenticator {
	t.Helper()
	a, err := auth.New(auth.Options{Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// /readyz waits for the watch cache to catch up with the stream once, so a replica that just started
// takes no watch it cannot place yet (watchcache's TestReadyIsSticky: a later restart of the cache
// leaves it ready).
func TestReadyzWaitsForTheWatchCache(t *testing.T) {
	srv, s := newFacadeTestServer(t, &fakeStore{})
	c := watchcache.New(watchcache.Options{Log: s.log, MaxEvents: 1000, MaxBytes: 1 << 20})
	s.cache = c
	get := func() (int, string) {
		resp, err := http.Get(srv.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(); code != http.StatusServiceUnavailable || !strings.Contains(body, "watch cache") {
		t.Errorf("before the cache caught up: %d %q, want 503 naming the watch cache", code, body)
	}
	c.CaughtUp()
	if code, body := get(); code != http.StatusOK {
		t.Errorf("after the cache caught up: %d %q, want 200", code, body)
	}
}
