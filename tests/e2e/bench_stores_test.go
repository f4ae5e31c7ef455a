//go:build e2e && bench

package e2e

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/url"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/internal/auth"
	"github.com/kubesearch/kubesearch/internal/authz"
	"github.com/kubesearch/kubesearch/internal/blevestore"
	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/osstore"
	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/mappings"
	"github.com/kubesearch/kubesearch/tests/testbed"
)

// benchStore is what the benchmark asks of both backends.
type benchStore interface {
	Write(ctx context.Context, ops []store.Op) ([]store.Failure, error)
	Refresh(ctx context.Context, kinds ...string) error
	Search(ctx context.Context, q *query.Query) (*store.Result, error)
}

// TestBenchStores puts the embedded store beside OpenSearch on the same corpus in the same run:
// BENCH_STORE_PODS (100,000) realistic Pod documents of three clusters written in batches of 1,000
// (docs/s), then p50/p99 of BENCH_STORE_QUERIES (300) queries of each kind through each backend's
// Search (the store alone: no HTTP, no query API), the embedded store's heap and disk per 10k Pods,
// and the cold start of `kubesearch standalone` on the data folder it leaves. Run it with
// `make bench-stores`.
func TestBenchStores(t *testing.T) {
	buildFlags = nil // measure the binary users run, not a race-detector build
	env := testbed.Get(t)
	ctx := t.Context()
	n := envInt("BENCH_STORE_PODS", 100000)
	queries := envInt("BENCH_STORE_QUERIES", 300)
	clusters := []string{"bench-1", "bench-2", "bench-3"}
	const namespaces = 20

	dataDir := t.TempDir()
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	bleve, err := blevestore.New(blevestore.Options{Dir: filepath.Join(dataDir, "index")})
	if err != nil {
		t.Fatal(err)
	}
	if err := bleve.Setup(ctx, store.SetupOptions{}); err != nil {
		t.Fatal(err)
	}
	prefix := uniqueName("bench-stores")
	oss, err := osstore.New(osstore.Options{Addresses: []string{env.OpenSearchURL}, Index: mappings.Options{Prefix: prefix}})
	if err != nil {
		t.Fatal(err)
	}
	defer oss.Close()
	if err := oss.Setup(ctx, store.SetupOptions{}); err != nil {
		t.Fatal(err)
	}
	backends := []struct {
		name string
		s    benchStore
	}{{"OpenSearch", oss}, {"embedded (bleve)", bleve}}

	// The same ops for both, built as the indexer builds them.
	observed := time.Now().UTC()
	ops := make([]store.Op, n)
	docBytes := 0
	for i := range n {
		cluster := clusters[i%len(clusters)]
		local := i / len(clusters)
		ns := fmt.Sprintf("team-%02d", local%namespaces)
		ev := benchPodEvent(cluster, ns, local, fmt.Sprintf("00000000-0000-4000-%04d-%012d", i%len(clusters), local), 1000+local,
			observed.Add(-time.Duration(local)*time.Second), observed)
		doc, err := document.Build(ev)
		if err != nil {
			t.Fatal(err)
		}
		docBytes += len(doc)
		ops[i] = store.Op{Kind: "Pod", UID: ev.UID, Doc: doc, Epoch: 1, Versioned: true, Version: int64(1000 + local)}
	}
	t.Logf("BENCH corpus: %d Pod documents, %.1f KB each on average", n, float64(docBytes)/float64(n)/1000)
	size := fmt.Sprintf("%d Pod documents, %.1f KB average, %d queries per kind", n, float64(docBytes)/float64(n)/1000, queries)
	var results []benchResult
	for _, b := range backends {
		t0 := time.Now()
		for from := 0; from < n; from += 1000 {
			fails, err := b.s.Write(ctx, ops[from:min(from+1000, n)])
			if err != nil || len(fails) > 0 {
				t.Fatalf("%s write: %v %v", b.name, err, fails)
			}
		}
		if err := b.s.Refresh(ctx, "Pod"); err != nil {
			t.Fatal(err)
		}
		d := time.Since(t0)
		t.Logf("BENCH %-18s indexing %d docs in batches of 1,000: %.1f s, %.0f docs/s", b.name, n, d.Seconds(), float64(n)/d.Seconds())
		results = append(results, benchResult{Bench: "stores", What: "indexing, " + b.name, Value: float64(n) / d.Seconds(), Unit: "docs/s", Note: size})
	}
	ops = nil
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	disk := dirSize(t, filepath.Join(dataDir, "index"))
	t.Logf("BENCH embedded store per 10k Pods: heap %s (in use after GC, whole process: %s), disk %s",
		mib(int64(after.HeapInuse-before.HeapInuse)*10000/int64(n)), mib(int64(after.HeapInuse)), mib(disk*10000/int64(n)))
	results = append(results,
		benchResult{Bench: "stores", What: "embedded heap per 10k Pods", Value: float64(int64(after.HeapInuse-before.HeapInuse)*10000/int64(n)) / (1 << 20), Unit: "MiB", Note: size},
		benchResult{Bench: "stores", What: "embedded disk per 10k Pods", Value: float64(disk*10000/int64(n)) / (1 << 20), Unit: "MiB", Note: size})

	r := rand.New(rand.NewPCG(1, 2))
	app := func() string { return fmt.Sprintf("svc-%03d", r.IntN(200)) }
	// A subject allowed 5,000 namespaces across 50 clusters (100 in each, the corpus's among them), as
	// a policy file says it and package authz compiles it.
	var pol strings.Builder
	pol.WriteString("rules:\n")
	for c := 1; c <= 50; c++ {
		fmt.Fprintf(&pol, "- subjects: [{kind: User, name: wide}]\n  clusters: [bench-%d]\n  resources: [pods]\n  verbs: [list]\n  namespaces: [", c)
		for n := range 100 {
			if n > 0 {
				pol.WriteString(", ")
			}
			if n < namespaces {
				fmt.Fprintf(&pol, "team-%02d", n) // the corpus's
			} else {
				fmt.Fprintf(&pol, "c%02d-ns-%02d", c, n) // 5,000 distinct names in all
			}
		}
		pol.WriteString("]\n")
	}
	policy, err := authz.Parse([]byte(pol.String()))
	if err != nil {
		t.Fatal(err)
	}
	wide := policy.Scope(auth.User{Name: "wide"}, authz.VerbList)
	t.Logf("BENCH scope of 5,000 namespaces × 50 clusters compiles to %d grants", len(wide.Grants))
	kinds := []struct {
		name  string
		short string // the figure's name in the results
		make  func() url.Values
		want  func(res *store.Result) bool
		scope *query.Scope
	}{
		{"label selector (~0.5%: one app)", "selector", func() url.Values {
			return url.Values{"resources": {"pods"}, "labelSelector": {"app.kubernetes.io/name=" + app()}, "limit": {"50"}}
		}, func(res *store.Result) bool { return res.Total > 0 }, nil},
		{"GET by name", "GET", func() url.Values {
			local := r.IntN(n / len(clusters))
			return url.Values{"resources": {"pods"}, "clusters": {clusters[r.IntN(3)]}, "namespaces": {fmt.Sprintf("team-%02d", local%namespaces)},
				"names": {benchPod("", local).Name}}
		}, func(res *store.Result) bool { return res.Total == 1 }, nil},
		{"facets cluster+namespace over a field selector", "facets", func() url.Values {
			return url.Values{"resources": {"pods"}, "fieldSelector": {"spec.nodeName=kwok-node-" + strconv.Itoa(r.IntN(3)+1)},
				"facets": {"cluster,namespace"}, "limit": {"10"}}
		}, func(res *store.Result) bool { return len(res.Facets) == 2 && res.Total > 0 }, nil},
		{"full text (app name and image word)", "text", func() url.Values {
			return url.Values{"q": {app() + " istio"}, "limit": {"20"}}
		}, func(res *store.Result) bool { return res.Total > 0 }, nil},
		{"label selector under a 5,000-namespace, 50-cluster scope", "scoped selector", func() url.Values {
			return url.Values{"resources": {"pods"}, "labelSelector": {"app.kubernetes.io/name=" + app()}, "limit": {"50"}}
		}, func(res *store.Result) bool { return res.Total > 0 }, wide},
	}
	for _, k := range kinds {
		lat := map[string][]time.Duration{}
		for range queries {
			params := k.make()
			for _, b := range backends {
				q, err := query.Parse(params, time.Now())
				if err != nil {
					t.Fatal(err)
				}
				q.Scope = k.scope
				t0 := time.Now()
				res, err := b.s.Search(ctx, q)
				d := time.Since(t0)
				if err != nil || !k.want(res) {
					t.Fatalf("%s, %s ?%s: %v (total %v)", k.name, b.name, params.Encode(), err, res)
				}
				lat[b.name] = append(lat[b.name], d)
			}
		}
		line := fmt.Sprintf("BENCH %-48s", k.name)
		p50 := map[string]float64{}
		for _, b := range backends {
			l := lat[b.name]
			slices.Sort(l)
			p50[b.name] = ms(l[len(l)/2])
			line += fmt.Sprintf(" | %s p50 %6.1f ms p99 %6.1f ms", b.name, ms(l[len(l)/2]), ms(l[len(l)*99/100]))
			results = append(results,
				benchResult{Bench: "stores", What: k.short + ", " + b.name + " p50", Value: ms(l[len(l)/2]), Unit: "ms", Note: size},
				benchResult{Bench: "stores", What: k.short + ", " + b.name + " p99", Value: ms(l[len(l)*99/100]), Unit: "ms", Note: size})
		}
		t.Log(line)
		if k.short == "facets" || k.short == "scoped selector" { // issue 29's goals
			r := p50["embedded (bleve)"] / p50["OpenSearch"]
			results = append(results, benchResult{Bench: "stores", What: k.short + ", embedded ÷ OpenSearch p50", Value: r, Unit: "ratio",
				Goal: "≤ 2×", Met: met(r <= 2), Note: size})
		}
	}
	if err := bleve.Close(); err != nil {
		t.Fatal(err)
	}

	// The standalone process's memory without documents, so that what the documents cost is told
	// apart from the process's fixed base (Go runtime, client-go, the HTTP servers).
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	writeKubeconfig(t, env, kubeconfig, env.Clusters[:1])
	emptyPort := freePort(t)
	empty := startProcess(t, "standalone-empty", "standalone", "--kubeconfig", kubeconfig, "--data-dir", t.TempDir(),
		"--listen", fmt.Sprintf("127.0.0.1:%d", emptyPort), "--registry", writeRegistry(t, "v1", "ConfigMap"))
	waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/readyz", emptyPort), 5*time.Minute)
	base0, err := procStatus(empty.cmd.Process.Pid, "VmRSS")
	if err != nil {
		t.Fatal(err)
	}
	empty.stop(10 * time.Second)

	// Cold start of the standalone process on the folder: until it answers /readyz, and until a
	// search counts the documents already there (they are not the member's, so no list removes them).
	port := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	kubesearchBinary(t) // built before the clock starts
	t0 := time.Now()
	proc := startProcess(t, "standalone", "standalone", "--kubeconfig", kubeconfig, "--data-dir", dataDir,
		"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--registry", writeRegistry(t, "v1", "ConfigMap"))
	waitHTTP(t, base+"/readyz", 5*time.Minute)
	ready := time.Since(t0)
	eventually(t, "the kept documents answer", 5*time.Minute, func() bool {
		a := get(t, base, "/v1alpha1/search", url.Values{"clusters": {"bench-1"}, "limit": {"1"}})
		return a.code == 200 && a.result.Total == int64((n+len(clusters)-1)/len(clusters)) // bench-1 has the remainder
	})
	firstSearch := time.Since(t0)
	t.Logf("BENCH cold start of kubesearch standalone on a data folder of %d documents: /readyz after %.2f s, first search counting them after %.2f s",
		n, ready.Seconds(), firstSearch.Seconds())
	// Its memory once started, then after a client polled a first page of 1 every 100 ms for 30 s
	// (each leaves a snapshot for its continue token, kept for the keep-alive).
	rss := func() int64 {
		v, err := procStatus(proc.cmd.Process.Pid, "VmRSS")
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	started := rss()
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		get(t, base, "/v1alpha1/search", url.Values{"clusters": {"bench-1"}, "limit": {"1"}})
	}
	polled := rss()
	t.Logf("BENCH standalone RSS on %d documents: %s after the start (%s per 10k), %s after 30 s of limit=1 polling",
		n, mib(started), mib(started*10000/int64(n)), mib(polled))
	results = append(results,
		benchResult{Bench: "stores", What: "standalone cold start to /readyz", Value: ready.Seconds(), Unit: "s", Note: size},
		benchResult{Bench: "stores", What: "standalone cold start to the first search counting them", Value: firstSearch.Seconds(), Unit: "s", Note: size},
		benchResult{Bench: "stores", What: "standalone RSS after the start", Value: float64(started) / (1 << 20), Unit: "MiB", Note: size},
		benchResult{Bench: "stores", What: "standalone RSS after 30 s of limit=1 polling", Value: float64(polled) / (1 << 20), Unit: "MiB", Note: size},
		benchResult{Bench: "stores", What: "standalone RSS without documents", Value: float64(base0) / (1 << 20), Unit: "MiB", Note: "the same flags on an empty data folder (it collects only member1's few ConfigMaps)"},
		benchResult{Bench: "stores", What: "standalone RSS per 10k Pods over the empty one", Value: float64((started-base0)*10000/int64(n)) / (1 << 20), Unit: "MiB",
			Goal: "≤ 30 MiB", Met: met((started-base0)*10000/int64(n) <= 30<<20), Note: size + "; RSS after the start minus the empty process's"})
	recordBench(t, results...)
}

func dirSize(t *testing.T, dir string) int64 {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			total += info.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}

// writeRegistry writes a registry selecting one kind in every member and returns its path.
func writeRegistry(t *testing.T, apiVersion, kind string) string {
	path := filepath.Join(t.TempDir(), "registry.yaml")
	writeFile(t, path, fmt.Sprintf("apiVersion: search.karmada.io/v1alpha1\nkind: ResourceRegistry\nmetadata: {name: bench}\nspec:\n  targetCluster: {}\n  resourceSelectors:\n  - {apiVersion: %s, kind: %s}\n", apiVersion, kind))
	return path
}
