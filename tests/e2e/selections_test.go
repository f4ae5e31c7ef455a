//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"maps"
	"path/filepath"
	"testing"
	"time"

	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"
	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/mappings"
	"github.com/kubesearch/kubesearch/tests/testbed"
)

// countDocsWhere counts the documents of one kind of the pipeline matching a query.
func (p *pipeline) countDocsWhere(t *testing.T, kind string, query map[string]any) int64 {
	t.Helper()
	index := mappings.IndexName(p.prefix, kind)
	_, _ = p.os.Indices.Refresh(t.Context(), &opensearchapi.IndicesRefreshReq{Index: []string{index}})
	body, _ := json.Marshal(map[string]any{"query": query})
	out := mustHTTP(t, "POST", p.env.OpenSearchURL+"/"+index+"/_count?ignore_unavailable=true", string(body))
	return gjson.GetBytes(out, "count").Int()
}

// Widening a selection (ConfigMaps of one namespace to every namespace) PURGEs the namespace scope and
// lists everything within seconds, inside index.gc_deletes: every unchanged ConfigMap of the namespace
// must be indexed again, not refused against the PURGE's tombstones. Narrowing back PURGEs the
// cluster-wide scope and lists the namespace: nothing outside it stays. Both happen while objects
// churn. Then selections removed while the collector is down — stopped with SIGTERM, or killed with
// SIGKILL — are purged at its next start from its ledger, and a restart's re-list does not make
// unchanged objects look changed.
func TestSelectionsWidenNarrowAndRestart(t *testing.T) {
	env := testbed.Get(t)
	f := seedFleet(t, env)
	waitRolledOut(t, env, f.shop)
	p := startPipeline(t, env, f)
	p.waitIndexMatchesMembers(t, "after the first lists", 2*time.Minute)
	apps := filepath.Join(p.registries, "apps.yaml")
	narrow := f.selected()
	wide := maps.Clone(narrow)
	wide[gvrConfigMaps] = ""

	start := time.Now()
	writeFile(t, apps, appsRegistry(f, "", false))
	churn(t, env, f, 6)
	churned := time.Now()
	p.sel = wide
	p.waitIndexMatchesMembers(t, "after widening ConfigMaps to every namespace", 2*time.Minute)
	t.Logf("widened: the index equals the members %s after the edit, %s after the churn ended",
		time.Since(start).Round(100*time.Millisecond), time.Since(churned).Round(100*time.Millisecond))
	outside := map[string]any{"bool": map[string]any{"must_not": []any{map[string]any{"term": map[string]any{"namespace": f.shop}}}}}
	if n := p.countDocsWhere(t, "ConfigMap", outside); n == 0 {
		t.Fatal("widened, but no ConfigMap outside the shop namespace is indexed")
	}

	start = time.Now()
	writeFile(t, apps, appsRegistry(f, f.shop, false))
	churn(t, env, f, 6)
	churned = time.Now()
	p.sel = narrow
	p.waitIndexMatchesMembers(t, "after narrowing ConfigMaps back to one namespace", 2*time.Minute)
	pollUntil(t, "ConfigMaps outside the namespace purged", time.Minute, func(_ context.Context) (bool, error) {
		return p.countDocsWhere(t, "ConfigMap", outside) == 0, nil
	})
	t.Logf("narrowed: the index equals the members %s after the edit, %s after the churn ended",
		time.Since(start).Round(100*time.Millisecond), time.Since(churned).Round(100*time.Millisecond))

	// Removed while the collector is down: its ledger still lists the Secrets, so the next start
	// purges them. Once after a clean stop, once after kill -9.
	secrets := map[string]any{"term": map[string]any{"kind": "Secret"}}
	if n := p.countDocsWhere(t, "Secret", secrets); n != int64(len(env.Clusters)) {
		t.Fatalf("%d Secret documents, want one per member", n)
	}
	for _, how := range []string{"SIGTERM", "SIGKILL"} {
		if how == "SIGTERM" {
			if err := p.collector.stop(30 * time.Second); err != nil {
				t.Fatalf("collector did not exit cleanly: %v", err)
			}
			writeFile(t, apps, appsRegistry(f, f.shop, true))
		} else {
			writeFile(t, apps, appsRegistry(f, f.shop, false))
			p.startCollector(t)
			pollUntil(t, "Secrets indexed again", time.Minute, func(_ context.Context) (bool, error) {
				return p.countDocsWhere(t, "Secret", secrets) == int64(len(env.Clusters)), nil
			})
			p.collector.kill() // SIGKILL
			writeFile(t, apps, appsRegistry(f, f.shop, true))
		}
		start := time.Now()
		p.startCollector(t)
		pollUntil(t, "Secrets removed while the collector was down ("+how+") purged", time.Minute, func(_ context.Context) (bool, error) {
			return p.countDocsWhere(t, "Secret", secrets) == 0, nil
		})
		t.Logf("removed while down (%s): purged %s after the collector started", how, time.Since(start).Round(100*time.Millisecond))
	}
	delete(narrow, gvrSecrets)
	p.sel = narrow
	p.waitIndexMatchesMembers(t, "after the restarts", 2*time.Minute)

	// A restart re-lists everything; the unchanged ConfigMaps keep their change times.
	waitGroupCaughtUp(t, env, p.topic, p.topic+"-indexer", time.Minute)
	restarted := time.Now().UTC()
	if err := p.collector.stop(30 * time.Second); err != nil {
		t.Fatalf("collector did not exit cleanly: %v", err)
	}
	p.startCollector(t) // ready once every selection listed again
	waitGroupCaughtUp(t, env, p.topic, p.topic+"-indexer", time.Minute)
	time.Sleep(time.Second) // the indexer's refresh
	changed := map[string]any{"bool": map[string]any{"filter": []any{
		map[string]any{"term": map[string]any{"namespace": f.shop}},
		map[string]any{"range": map[string]any{"lastChangedAt": map[string]any{"gte": restarted.Format(time.RFC3339Nano)}}},
	}}}
	all := p.countDocsWhere(t, "ConfigMap", map[string]any{"term": map[string]any{"namespace": f.shop}})
	if n := p.countDocsWhere(t, "ConfigMap", changed); n != 0 || all == 0 {
		t.Fatalf("after a restart %d of %d unchanged ConfigMaps look changed since the restart", n, all)
	}
}
