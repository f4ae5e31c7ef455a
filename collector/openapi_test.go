package collector

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/openapi"

	"github.com/kubesearch/kubesearch/internal/registry"
	"github.com/kubesearch/kubesearch/internal/stream"
)

// fakeOpenAPI is a member's /openapi/v3: documents by path, each with its hash; it counts the
// documents fetched.
type fakeOpenAPI struct {
	mu      sync.Mutex
	docs    map[string]fakeDoc
	fetched []string
	down    bool
}

type fakeDoc struct{ hash, body string }

func (f *fakeOpenAPI) PathsWithContext(context.Context) (map[string]openapi.GroupVersionWithContext, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return nil, errors.New("connection refused")
	}
	out := map[string]openapi.GroupVersionWithContext{}
	for p, d := range f.docs {
		out[p] = fakeGV{f: f, path: p, url: "/openapi/v3/" + p + "?hash=" + d.hash}
	}
	return out, nil
}

type fakeGV struct {
	f         *fakeOpenAPI
	path, url string
}

func (g fakeGV) SchemaWithContext(_ context.Context, contentType string) ([]byte, error) {
	g.f.mu.Lock()
	defer g.f.mu.Unlock()
	if contentType != "application/json" {
		return nil, errors.New("want JSON")
	}
	g.f.fetched = append(g.f.fetched, g.path)
	return []byte(g.f.docs[g.path].body), nil
}

func (g fakeGV) ServerRelativeURL() string { return g.url }

func (f *fakeOpenAPI) takeFetched() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.fetched
	f.fetched = nil
	return out
}

// ledgerRecords reads the ledger topic whole, the last value of each key (nil for a tombstone).
func ledgerRecords(t *testing.T, client stream.Broker) map[string][]byte {
	t.Helper()
	msgs, err := client.ReadPartition(t.Context(), registry.LedgerTopic("events"), 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, m := range msgs {
		out[string(m.Key)] = m.Value
	}
	return out
}

// A member relays the OpenAPI documents of the group-versions it collects, each once per hash, also
// across a restart; a group-version no longer collected becomes a tombstone; a member whose
// /openapi/v3 fails keeps what the ledger holds. A document of a few MiB fits.
func TestMemberRelaysOpenAPI(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	client := stream.NewClient(c.ListenAddrs(), stream.Connection{}, log)
	t.Cleanup(client.Close)
	ctx := t.Context()

	big := `{"openapi":"3.0.0","components":{"schemas":{"x":{"description":"` + strings.Repeat("<pod> & spec ", 250_000) + `"}}}}` // 3.25 MB
	api := &fakeOpenAPI{docs: map[string]fakeDoc{
		"api/v1":        {"CORE1", big},
		"apis/apps/v1":  {"APPS1", `{"openapi":"3.0.0","info":{"title":"apps"}}`},
		"apis/batch/v1": {"BATCH1", `{"openapi":"3.0.0"}`},
	}}
	newMemberOn := func() (*member, *ledger) {
		t.Helper()
		l := newLedger(client, "events", "collector-a", log)
		t.Cleanup(func() { l.close() })
		if _, err := l.load(ctx); err != nil {
			t.Fatal(err)
		}
		m := &member{cluster: registry.Cluster{Name: "member1"}, c: &Collector{ledger: l}, log: log, openapi: api,
			running: map[registry.SelectionKey]*running{
				{Kind: "Pod"}:                       {res: resolved{gvr: schema.GroupVersionResource{Version: "v1", Resource: "pods"}}},
				{Kind: "ConfigMap"}:                 {res: resolved{gvr: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}}},
				{Group: "apps", Kind: "Deployment"}: {res: resolved{gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}}},
			}}
		return m, l
	}

	m, _ := newMemberOn()
	if err := m.syncOpenAPI(ctx); err != nil {
		t.Fatal(err)
	}
	if got := api.takeFetched(); strings.Join(got, " ") != "api/v1 apis/apps/v1" {
		t.Errorf("fetched %v, want api/v1 and apis/apps/v1 (batch is not collected)", got)
	}
	recs := ledgerRecords(t, client)
	var core registry.OpenAPIRecord
	if err := json.Unmarshal(recs["openapi/member1/api/v1"], &core); err != nil {
		t.Fatal(err)
	}
	if core.Hash != "CORE1" || core.Cluster != "member1" || core.Path != "api/v1" || core.Owner != "collector-a" || string(core.Document) != big {
		t.Errorf("api/v1 record: hash %s cluster %s path %s owner %s, document of %d bytes (want %d, unchanged)",
			core.Hash, core.Cluster, core.Path, core.Owner, len(core.Document), len(big))
	}
	if _, ok := recs["openapi/member1/apis/batch/v1"]; ok {
		t.Error("batch/v1 relayed, though nothing of it is collected")
	}

	// Unchanged: nothing fetched or written, also after a restart.
	if err := m.syncOpenAPI(ctx); err != nil {
		t.Fatal(err)
	}
	m, _ = newMemberOn()
	if err := m.syncOpenAPI(ctx); err != nil {
		t.Fatal(err)
	}
	if got := api.takeFetched(); len(got) != 0 {
		t.Errorf("unchanged documents fetched again: %v", got)
	}

	// The member's api/v1 changes; its /openapi/v3 then fails for a round.
	api.mu.Lock()
	api.docs["api/v1"] = fakeDoc{"CORE2", `{"openapi":"3.0.0","info":{"title":"core 2"}}`}
	api.down = true
	api.mu.Unlock()
	if err := m.syncOpenAPI(ctx); err == nil {
		t.Error("a failed /openapi/v3 reported no error")
	}
	if _, ok := ledgerRecords(t, client)["openapi/member1/api/v1"]; !ok {
		t.Error("a failed /openapi/v3 dropped what the ledger held")
	}
	api.mu.Lock()
	api.down = false
	api.mu.Unlock()
	if err := m.syncOpenAPI(ctx); err != nil {
		t.Fatal(err)
	}
	if got := api.takeFetched(); strings.Join(got, " ") != "api/v1" {
		t.Errorf("fetched %v, want the changed api/v1 only", got)
	}

	// Deployments no longer collected: apps/v1's record becomes a tombstone.
	delete(m.running, registry.SelectionKey{Group: "apps", Kind: "Deployment"})
	if err := m.syncOpenAPI(ctx); err != nil {
		t.Fatal(err)
	}
	recs = ledgerRecords(t, client)
	if v, ok := recs["openapi/member1/apis/apps/v1"]; !ok || v != nil {
		t.Errorf("apps/v1 after deployments stopped: present %v, value %.40s; want a tombstone", ok, v)
	}
	if err := json.Unmarshal(recs["openapi/member1/api/v1"], &core); err != nil || core.Hash != "CORE2" {
		t.Errorf("api/v1 hash %q (%v), want CORE2", core.Hash, err)
	}

	// Restarted without member1 in the plan, a named collector deletes member1's records.
	_, l := newMemberOn()
	forgotten := l.forgottenOpenAPI(registry.Plan{})
	if strings.Join(forgotten["member1"], " ") != "api/v1" {
		t.Fatalf("forgotten OpenAPI records: %v", forgotten)
	}
	if err := l.dropOpenAPI(ctx, "member1", forgotten["member1"]); err != nil {
		t.Fatal(err)
	}
	if v := ledgerRecords(t, client)["openapi/member1/api/v1"]; v != nil {
		t.Errorf("api/v1 of a cluster left out of the plan: %.40s; want a tombstone", v)
	}
}

// Events collected in one group are served by the query API in both: the other group's document is
// relayed too.
func TestOpenAPIPathsOfEvents(t *testing.T) {
	for _, c := range []struct {
		gvr  schema.GroupVersionResource
		want string
	}{
		{schema.GroupVersionResource{Version: "v1", Resource: "events"}, "api/v1 apis/events.k8s.io/v1"},
		{schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"}, "api/v1 apis/events.k8s.io/v1"},
		{schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1beta1", Resource: "events"}, "apis/events.k8s.io/v1beta1"},
		{schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "api/v1"},
	} {
		m := &member{running: map[registry.SelectionKey]*running{{Group: c.gvr.Group, Kind: "X"}: {res: resolved{gvr: c.gvr}}}}
		got := slices.Sorted(maps.Keys(m.openAPIPaths()))
		if strings.Join(got, " ") != c.want {
			t.Errorf("%s: relays %v, want %s", c.gvr, got, c.want)
		}
	}
}
