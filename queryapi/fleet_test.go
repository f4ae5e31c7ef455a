package queryapi

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/registry"
	"github.com/kubesearch/kubesearch/internal/store"
)

// fakeSources stand in for the indexer's watermarks and a collector's /status.
type fakeSources struct {
	mu   sync.Mutex
	wms  []store.Watermark
	rows []registry.ResourceStatus
}

func (f *fakeSources) set(wmRV int64, collectedRV string, publishedAt time.Time, state string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wms = []store.Watermark{{Cluster: "member1", Resource: "pods", Kind: "Pod", ResourceVersion: wmRV, Epoch: 1,
		Scopes: []store.WatermarkScope{{ResourceVersion: wmRV, Epoch: 1, Synced: true}}}}
	f.rows = []registry.ResourceStatus{{Registry: "r", Cluster: "member1", Resource: "pods", Kind: "Pod", State: state,
		Reason:          map[bool]string{true: "connection refused"}[state == registry.StateFailed],
		ResourceVersion: collectedRV, PublishedAt: &publishedAt}}
}

func newTestFleet(t *testing.T, src *fakeSources, now *time.Time) *fleet {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		src.mu.Lock()
		defer src.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"items": src.rows})
	}))
	t.Cleanup(srv.Close)
	return &fleet{
		readWatermarks: func(context.Context) ([]store.Watermark, error) {
			src.mu.Lock()
			defer src.mu.Unlock()
			return src.wms, nil
		},
		collectors: []string{srv.URL}, client: srv.Client(), interval: time.Second, staleAfter: 30 * time.Second,
		log: slog.New(slog.DiscardHandler), now: func() time.Time { return *now },
	}
}

func TestFreshnessLagAndWarnings(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	src := &fakeSources{}
	f := newTestFleet(t, src, &now)
	q := &query.Query{Resources: []query.Resource{{Resource: "pods", AnyGroup: true}}}

	src.set(100, "100", now, registry.StateRunning)
	f.poll(t.Context())
	clusters, warnings := f.freshness(q)
	if len(clusters) != 1 || clusters[0].State != registry.StateRunning || *clusters[0].LagSeconds != 0 || len(warnings) != 0 {
		t.Fatalf("caught up: %+v %q", clusters, warnings)
	}

	// The collector publishes rv 105 at 12:00:10; the index stays at 100.
	published := now.Add(10 * time.Second)
	now = published.Add(time.Second)
	src.set(100, "105", published, registry.StateRunning)
	f.poll(t.Context())
	now = published.Add(45 * time.Second)
	f.poll(t.Context()) // still behind: the lag is counted from the first time it was seen
	clusters, warnings = f.freshness(q)
	if lag := *clusters[0].LagSeconds; lag != 45 {
		t.Errorf("lag %v, want 45 (since the event was published)", lag)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "index 45s behind collection") {
		t.Errorf("warnings %q, want one saying the index is 45s behind", warnings)
	}

	// The index catches up: no lag, no warning.
	src.set(105, "105", published, registry.StateRunning)
	f.poll(t.Context())
	if clusters, warnings = f.freshness(q); *clusters[0].LagSeconds != 0 || len(warnings) != 0 {
		t.Errorf("caught up again: %+v %q", clusters[0], warnings)
	}

	// A failed collection is a warning with its reason; a query for other resources is not concerned.
	src.set(105, "105", published, registry.StateFailed)
	f.poll(t.Context())
	if clusters, warnings = f.freshness(q); clusters[0].State != registry.StateFailed || len(warnings) != 1 || !strings.Contains(warnings[0], "connection refused") {
		t.Errorf("failed: %+v %q", clusters, warnings)
	}
	if clusters, warnings = f.freshness(&query.Query{Resources: []query.Resource{{Resource: "services", AnyGroup: true}}}); len(clusters)+len(warnings) != 0 {
		t.Errorf("a query for services reports %+v %q", clusters, warnings)
	}
}

// The checked-in OpenAPI document describes every parameter the parser accepts, and no other.
func TestOpenAPIListsEveryParameter(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct{ Name string } `json:"parameters"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range doc.Paths[PathSearch]["get"].Parameters {
		names = append(names, p.Name)
	}
	if strings.Join(names, ",") != strings.Join(query.Params, ",") {
		t.Errorf("openapi.json lists %v; the parser accepts %v", names, query.Params)
	}
	for _, path := range []string{PathFleet, PathClusters, "/healthz", "/livez", "/readyz", "/metrics", "/openapi.json"} {
		if _, ok := doc.Paths[path]["get"]; !ok {
			t.Errorf("openapi.json lacks GET %s", path)
		}
	}
}

func TestEncodeSearchResultKeepsItemsAndFields(t *testing.T) {
	out := SearchResult{APIVersion: APIVersion, Kind: KindSearchResult, Total: 2,
		Items:    []json.RawMessage{[]byte(`{"metadata":{"name":"a \"items\":null"}}`), []byte(`{"kind":"Pod"}`)},
		Clusters: []ClusterFreshness{{Name: "member1", State: "Running"}}}
	out.Metadata.Continue = `tok"items":null`
	b, err := encodeSearchResult(out)
	if err != nil {
		t.Fatal(err)
	}
	var back SearchResult
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if len(back.Items) != 2 || string(back.Items[0]) != string(out.Items[0]) || back.Metadata.Continue != out.Metadata.Continue ||
		back.Total != 2 || len(back.Clusters) != 1 {
		t.Fatalf("round trip lost something: %s", b)
	}
	empty, _ := encodeSearchResult(SearchResult{})
	if !strings.Contains(string(empty), `"items":[]`) {
		t.Errorf("no items encode as %s, want an empty list", empty)
	}
}

// TestFreshnessOfNamespacesOutOfScope: a subject sees the collection state of the namespaces it may
// see; of a cluster-wide collection, its state but not the member's error text, which may name any
// namespace.
func TestFreshnessOfNamespacesOutOfScope(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	src := &fakeSources{}
	f := newTestFleet(t, src, &now)
	shop := &query.Scope{Grants: []query.Grant{{Clusters: []string{"member1"}, Namespaces: []string{"shop"}}}}
	row := func(ns, state, reason string) registry.ResourceStatus {
		return registry.ResourceStatus{Registry: "r", Cluster: "member1", Resource: "pods", Kind: "Pod", Namespace: ns,
			State: state, Reason: reason, ResourceVersion: "100", PublishedAt: &now}
	}
	src.wms = []store.Watermark{{Cluster: "member1", Resource: "pods", Kind: "Pod", ResourceVersion: 100, Epoch: 1,
		Scopes: []store.WatermarkScope{{ResourceVersion: 100, Epoch: 1, Synced: true}}}}
	q := &query.Query{Resources: []query.Resource{{Resource: "pods", AnyGroup: true}}, Scope: shop}

	// Selections of one namespace each: finance's failure is not shop's subject's business.
	src.rows = []registry.ResourceStatus{row("shop", registry.StateRunning, ""), row("finance", registry.StateFailed, `pods is forbidden in the namespace "finance"; project payroll-2027`)}
	f.poll(t.Context())
	clusters, warnings := f.freshness(q)
	if len(clusters) != 1 || clusters[0].State != registry.StateRunning || len(warnings) != 0 {
		t.Errorf("shop's subject, finance failing: %+v, warnings %q", clusters, warnings)
	}
	// The control: a subject that sees everything is told.
	q.Scope = nil
	if _, warnings := f.freshness(q); len(warnings) != 1 || !strings.Contains(warnings[0], "payroll") {
		t.Errorf("unrestricted subject: warnings %q, want finance's failure", warnings)
	}

	// One cluster-wide selection: its state is everyone's, its reason only a subject's that sees
	// every namespace.
	src.rows = []registry.ResourceStatus{row("", registry.StateFailed, `pods "payroll-7f9" is forbidden in the namespace "finance"`)}
	f.poll(t.Context())
	q.Scope = shop
	clusters, warnings = f.freshness(q)
	if len(clusters) != 1 || clusters[0].State != registry.StateFailed || strings.Contains(strings.Join(warnings, " "), "payroll") {
		t.Errorf("shop's subject, cluster-wide failure: %+v, warnings %q", clusters, warnings)
	}
	if pairs := f.pairs(shop); len(pairs) != 1 || strings.Contains(pairs[0].Reason, "payroll") {
		t.Errorf("fleet status of shop's subject: %+v", pairs)
	}
}

// A dns+ status URL reads every replica its name resolves to, each of which reports the members it
// holds (collector --lease): the fleet shows both halves, and a replica that does not answer is a
// warning naming the configured URL while the other's members are still shown.
func TestCollectorReplicasBehindOneName(t *testing.T) {
	// Two replicas on one port of two loopback addresses, as two pods behind a headless Service.
	l1, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l1.Addr().String())
	l2, err := net.Listen("tcp", net.JoinHostPort("127.0.0.2", port))
	if err != nil {
		l1.Close()
		t.Skipf("no second loopback address here: %v", err)
	}
	var hosts sync.Map
	replica := func(l net.Listener, member string) *httptest.Server {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hosts.Store(r.Host, true)
			_ = json.NewEncoder(w).Encode(map[string]any{"items": []registry.ResourceStatus{{Registry: "r", Cluster: member,
				Resource: "pods", Kind: "Pod", State: registry.StateRunning, ResourceVersion: "10"}}})
		}))
		srv.Listener.Close()
		srv.Listener = l
		srv.Start()
		t.Cleanup(srv.Close)
		return srv
	}
	replica(l1, "member1")
	second := replica(l2, "member2")
	configured := "dns+http://collector-replicas:" + port + "/status"
	f := &fleet{
		readWatermarks: func(context.Context) ([]store.Watermark, error) { return nil, nil },
		collectors:     []string{configured}, client: &http.Client{Timeout: 2 * time.Second},
		interval: time.Second, staleAfter: 30 * time.Second, log: slog.New(slog.DiscardHandler), now: time.Now,
		lookup: func(_ context.Context, host string) ([]string, error) {
			if host != "collector-replicas" {
				return nil, fmt.Errorf("no such host %s", host)
			}
			return []string{"127.0.0.2", "127.0.0.1"}, nil
		},
	}
	members := func() []string {
		var out []string
		for _, p := range f.pairs(nil) {
			if p.State == registry.StateRunning {
				out = append(out, p.Cluster)
			}
		}
		return out
	}
	f.poll(t.Context())
	if got := members(); !slices.Equal(got, []string{"member1", "member2"}) {
		t.Errorf("members running: %v, want both replicas' (member1, member2)", got)
	}
	if _, ok := hosts.Load("collector-replicas:" + port); !ok {
		t.Error("the replicas were not asked with the configured name as Host")
	}
	second.Close()
	f.poll(t.Context())
	if got := members(); !slices.Equal(got, []string{"member1"}) {
		t.Errorf("members running with one replica away: %v, want member1", got)
	}
	if _, warnings := f.freshness(&query.Query{}); !slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, configured) }) {
		t.Errorf("warnings %q name no unreadable %s", warnings, configured)
	}
	if err := (&Options{OpenSearchAddresses: []string{"http://os:9200"}, CollectorStatusURLs: []string{"dns+ftp://x/status"}}).Validate(); err == nil ||
		!strings.Contains(err.Error(), "--collector-status-urls") {
		t.Errorf("a dns+ftp URL: %v, want an error naming --collector-status-urls", err)
	}
}
