package collector

import (
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kubesearch/kubesearch/internal/registry"
	"github.com/kubesearch/kubesearch/internal/stream"
)

func planOf(clusters map[string][]registry.SelectionKey) registry.Plan {
	var p registry.Plan
	for name, keys := range clusters {
		cp := registry.ClusterPlan{Cluster: registry.Cluster{Name: name}}
		for _, k := range keys {
			cp.Selections = append(cp.Selections, registry.Selection{SelectionKey: k})
		}
		p.Clusters = append(p.Clusters, cp)
	}
	slices.SortFunc(p.Clusters, func(a, b registry.ClusterPlan) int {
		if a.Cluster.Name < b.Cluster.Name {
			return -1
		}
		return 1
	})
	return p
}

// The ledger survives restarts: what a run started collecting and never purged is what the next run
// finds forgotten once the configuration no longer selects it, the epoch bound carries over, and a
// cluster left without selections is forgotten by compaction (a tombstone).
func TestLedgerRemembersAcrossRestarts(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	brokers := c.ListenAddrs()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	open := func(owner string) *ledger {
		t.Helper()
		client := stream.NewClient(brokers, stream.Connection{}, log)
		l := newLedger(client, "events", owner, log)
		t.Cleanup(func() { l.close(); client.Close() })
		return l
	}
	pods := registry.SelectionKey{Kind: "Pod", Namespace: "shop"}
	deploys := registry.SelectionKey{Group: "apps", Kind: "Deployment"}
	cms := registry.SelectionKey{Kind: "ConfigMap"}
	ctx := t.Context()

	first := open("collector-a")
	if floor, err := first.load(ctx); err != nil || floor != 0 {
		t.Fatalf("empty ledger: floor %d, %v", floor, err)
	}
	first.serve(planOf(map[string][]registry.SelectionKey{"member1": {pods, deploys}, "member2": {cms}}))
	for _, a := range []struct {
		cluster string
		e       registry.SelectionRecord
	}{
		{"member1", registry.SelectionRecord{Version: "v1", Resource: "pods", Kind: "Pod", Namespace: "shop"}},
		{"member1", registry.SelectionRecord{Group: "apps", Version: "v1", Resource: "deployments", Kind: "Deployment"}},
		{"member2", registry.SelectionRecord{Version: "v1", Resource: "configmaps", Kind: "ConfigMap"}},
	} {
		if err := first.add(ctx, a.cluster, a.e); err != nil {
			t.Fatal(err)
		}
	}
	if err := first.reserve(ctx, 1_700_000_600_000_000); err != nil {
		t.Fatal(err)
	}

	// Restarted with member2 gone and member1's pods no longer selected.
	next := planOf(map[string][]registry.SelectionKey{"member1": {deploys}})
	second := open("collector-a")
	floor, err := second.load(ctx)
	if err != nil || floor != 1_700_000_600_000_000 {
		t.Fatalf("floor after restart: %d, %v", floor, err)
	}
	got := second.forgotten(next)
	if len(got) != 2 || len(got["member1"]) != 1 || got["member1"][0].Resource != "pods" || len(got["member2"]) != 1 {
		t.Fatalf("forgotten: %+v", got)
	}
	// Unnamed, or named otherwise, it cannot tell member2's record is its own.
	other := open("")
	if _, err := other.load(ctx); err != nil {
		t.Fatal(err)
	}
	if got := other.forgotten(next); len(got) != 1 || got["member2"] != nil {
		t.Fatalf("an unnamed collector purges a cluster it does not serve: %+v", got)
	}

	second.serve(next)
	if err := second.drop(ctx, "member1", []registry.SelectionKey{pods}); err != nil {
		t.Fatal(err)
	}
	if err := second.drop(ctx, "member2", []registry.SelectionKey{cms}); err != nil {
		t.Fatal(err)
	}
	third := open("collector-a")
	if _, err := third.load(ctx); err != nil {
		t.Fatal(err)
	}
	if got := third.forgotten(next); len(got) != 0 {
		t.Fatalf("forgotten after the purges: %+v", got)
	}
	if _, ok := third.entry("member2", cms); ok {
		t.Error("member2's record survived its purge")
	}
	if e, ok := third.entry("member1", deploys); !ok || e.Resource != "deployments" {
		t.Errorf("member1's deployments: %+v %v", e, ok)
	}
}
