package blevestore

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/fixtures"
	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/store"

	"k8s.io/apimachinery/pkg/types"
)

// storesCorpus is the corpus of BenchmarkStores: BLEVESTORE_BENCH_PODS (20,000) of the fixtures'
// typical Pod (about 9 KB as a document) spread as bench-stores spreads its Pods (tests/e2e): three
// clusters, the same names in each, 20 namespaces, 200 apps on three nodes. It is written in
// batches of 1,000, and the heap the store holds afterwards (in use after a GC, as bench-stores
// measures it) and its folder's size are what it costs per 10k Pods.
type storesCorpus struct {
	s                      *Store
	dir                    string
	n                      int
	heapPer10k, diskPer10k float64 // MiB
	docKB                  float64
}

func newStoresCorpus(b *testing.B) *storesCorpus {
	b.Helper()
	n := 20000
	if v, err := strconv.Atoi(os.Getenv("BLEVESTORE_BENCH_PODS")); err == nil && v > 0 {
		n = v
	}
	clusters := []string{"bench-1", "bench-2", "bench-3"}
	dir := b.TempDir()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s, err := New(Options{Dir: dir, TokenKey: testKey})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	docBytes := 0
	for from := 0; from < n; from += 1000 {
		ops := make([]store.Op, 0, 1000)
		for i := from; i < min(from+1000, n); i++ {
			local := i / len(clusters)
			uid := fmt.Sprintf("00000000-0000-4000-%04d-%012d", i%len(clusters), local)
			ev := storesPodEvent(b, clusters[i%len(clusters)], fmt.Sprintf("team-%02d", local%20), local, uid)
			doc, err := document.Build(ev)
			if err != nil {
				b.Fatal(err)
			}
			docBytes += len(doc)
			ops = append(ops, store.Op{Kind: "Pod", UID: uid, Doc: doc, Epoch: 1, Versioned: true, Version: int64(1000 + local)})
		}
		if fails, err := s.Write(b.Context(), ops); err != nil || len(fails) > 0 {
			b.Fatalf("write: %v %v", err, fails)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	var disk int64
	err = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			disk += info.Size()
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	per10k := func(v int64) float64 { return float64(v) * 10000 / float64(n) / (1 << 20) }
	return &storesCorpus{s: s, dir: dir, n: n, heapPer10k: per10k(int64(after.HeapInuse) - int64(before.HeapInuse)),
		diskPer10k: per10k(disk), docKB: float64(docBytes) / float64(n) / 1000}
}

// storesPodEvent is the ADDED event of the local-th Pod of a namespace: the fixtures' Pod of app
// svc-(local mod 200), on node kwok-node-(local mod 3 + 1).
func storesPodEvent(b *testing.B, cluster, ns string, local int, uid string) *envelope.Event {
	b.Helper()
	app := fmt.Sprintf("svc-%03d", local%200)
	pod := fixtures.Pod(strconv.Itoa(1000 + local))
	pod.Name = fmt.Sprintf("%s-7d9f8c6b5-%05d", app, local)
	pod.GenerateName, pod.Namespace, pod.UID = app+"-7d9f8c6b5-", ns, types.UID(uid)
	pod.Labels["app"], pod.Labels["app.kubernetes.io/name"] = app, app
	pod.Labels["topology.kubernetes.io/zone"] = fmt.Sprintf("zone-%d", local%3)
	pod.Spec.NodeName = fmt.Sprintf("kwok-node-%d", local%3+1)
	pod.Spec.Containers[0].Image = "registry.example.com/shop/" + app + ":1.27.3"
	raw, err := json.Marshal(pod)
	if err != nil {
		b.Fatal(err)
	}
	return &envelope.Event{V: envelope.Version, Type: envelope.Added, Cluster: cluster, Version: "v1", Resource: "pods", Kind: "Pod",
		Namespace: ns, Name: pod.Name, UID: uid, ResourceVersion: pod.ResourceVersion, Epoch: 1,
		ObservedAt: fixtures.At, Object: raw}
}

// BenchmarkStores is bench-stores' queries of the embedded store (tests/e2e/bench_stores_test.go),
// on a corpus like its own: each iteration one query of the kind, its parameters drawn as
// bench-stores draws them. "corpus" reports the store's heap and disk per 10k Pods.
func BenchmarkStores(b *testing.B) {
	c := newStoresCorpus(b)
	b.Logf("%d Pod documents, %.1f KB each on average", c.n, c.docKB)
	clusters := []string{"bench-1", "bench-2", "bench-3"}
	wide := wideScope()
	b.Run("corpus", func(b *testing.B) {
		for b.Loop() {
		}
		b.ReportMetric(c.heapPer10k, "heap-MiB/10kPods")
		b.ReportMetric(c.diskPer10k, "disk-MiB/10kPods")
	})
	for _, k := range []struct {
		name  string
		make  func(r *rand.Rand) url.Values
		want  func(res *store.Result) bool
		scope *query.Scope
	}{
		{"selector", func(r *rand.Rand) url.Values {
			return url.Values{"resources": {"pods"}, "labelSelector": {fmt.Sprintf("app.kubernetes.io/name=svc-%03d", r.IntN(200))}, "limit": {"50"}}
		}, func(res *store.Result) bool { return res.Total > 0 }, nil},
		{"GET", func(r *rand.Rand) url.Values {
			local := r.IntN(c.n / len(clusters))
			return url.Values{"resources": {"pods"}, "clusters": {clusters[r.IntN(3)]}, "namespaces": {fmt.Sprintf("team-%02d", local%20)},
				"names": {fmt.Sprintf("svc-%03d-7d9f8c6b5-%05d", local%200, local)}}
		}, func(res *store.Result) bool { return res.Total == 1 }, nil},
		{"facets", func(r *rand.Rand) url.Values {
			return url.Values{"resources": {"pods"}, "fieldSelector": {"spec.nodeName=kwok-node-" + strconv.Itoa(r.IntN(3)+1)},
				"facets": {"cluster,namespace"}, "limit": {"10"}}
		}, func(res *store.Result) bool { return len(res.Facets) == 2 && res.Total > 0 }, nil},
		{"facets newest first", func(r *rand.Rand) url.Values { // not in bench-stores: the facets in an order not reading the namespace
			return url.Values{"resources": {"pods"}, "fieldSelector": {"spec.nodeName=kwok-node-" + strconv.Itoa(r.IntN(3)+1)},
				"facets": {"cluster,namespace"}, "limit": {"10"}, "sort": {"creationTimestamp:desc"}}
		}, func(res *store.Result) bool { return len(res.Facets) == 2 && res.Total > 0 }, nil},
		{"text", func(r *rand.Rand) url.Values {
			return url.Values{"q": {fmt.Sprintf("svc-%03d istio", r.IntN(200))}, "limit": {"20"}}
		}, func(res *store.Result) bool { return res.Total > 0 }, nil},
		{"scoped selector", func(r *rand.Rand) url.Values {
			return url.Values{"resources": {"pods"}, "labelSelector": {fmt.Sprintf("app.kubernetes.io/name=svc-%03d", r.IntN(200))}, "limit": {"50"}}
		}, func(res *store.Result) bool { return res.Total > 0 }, wide},
	} {
		b.Run(k.name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			b.ReportAllocs()
			start := cpuTime(b)
			for b.Loop() {
				params := k.make(r)
				q, err := query.Parse(params, time.Now())
				if err != nil {
					b.Fatal(err)
				}
				q.Scope = k.scope
				res, err := c.s.Search(b.Context(), q)
				if err != nil || !k.want(res) {
					b.Fatalf("?%s: %v (%v)", params.Encode(), err, res)
				}
				c.s.Release(b.Context(), res.Continue)
			}
			b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the CPU time the process used so far: on a machine whose other work competes for
// the cores, a search's CPU time varies less than its wall time (ns/op). It counts the index's
// background work (merges) too.
func cpuTime(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkStoresReopen is what a process holding the store costs once it opened a folder of
// BLEVESTORE_BENCH_PODS Pods (BenchmarkStores' corpus) and answered a first search counting them,
// as bench-stores measures the standalone process after its cold start: the resident set of a
// child process (this test binary, see TestMain) on the corpus, less that of one on an
// empty folder, per 10k Pods.
func BenchmarkStoresReopen(b *testing.B) {
	c := newStoresCorpus(b)
	if err := c.s.Close(); err != nil {
		b.Fatal(err)
	}
	empty := b.TempDir()
	var rss, base int64
	for b.Loop() {
		rss, base = reopenRSS(b, c.dir), reopenRSS(b, empty)
	}
	b.ReportMetric(float64(rss-base)*10000/float64(c.n)/(1<<20), "rss-MiB/10kPods")
	b.ReportMetric(float64(rss)/(1<<20), "rss-MiB")
}

// reopenRSS runs this test binary as reopenChild on dir and returns its resident set in bytes.
func reopenRSS(b *testing.B, dir string) int64 {
	b.Helper()
	cmd := exec.CommandContext(b.Context(), os.Args[0])
	cmd.Env = append(os.Environ(), "BLEVESTORE_REOPEN_DIR="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("%v: %s", err, out)
	}
	for line := range strings.Lines(string(out)) {
		if strings.HasPrefix(line, "REOPEN ") {
			b.Logf("%s: %s", filepath.Base(dir), strings.TrimSpace(line))
		}
	}
	_, after, ok := strings.Cut(string(out), "REOPEN RSS ")
	kb, err := strconv.ParseInt(strings.TrimSpace(strings.SplitN(after, "\n", 2)[0]), 10, 64)
	if !ok || err != nil {
		b.Fatalf("no RSS in %s", out)
	}
	return kb << 10
}

// TestMain runs the tests, or, with BLEVESTORE_REOPEN_DIR set, BenchmarkStoresReopen's child process
// instead (reopenChild): a process of its own, so that its resident set is the store's alone.
func TestMain(m *testing.M) {
	if dir := os.Getenv("BLEVESTORE_REOPEN_DIR"); dir != "" {
		if err := reopenChild(dir); err != nil {
			fmt.Fprintln(os.Stderr, "reopen child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// reopenChild opens the folder dir, counts the Pods of a cluster, and prints its resident set.
func reopenChild(dir string) error {
	ctx := context.Background()
	s, err := New(Options{Dir: dir, TokenKey: testKey})
	if err != nil {
		return err
	}
	defer s.Close()
	q, err := query.Parse(url.Values{"clusters": {"bench-1"}, "limit": {"1"}}, time.Now())
	if err != nil {
		return err
	}
	res, err := s.Search(ctx, q)
	if err != nil {
		return err
	}
	s.Release(ctx, res.Continue)
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return err
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			fmt.Printf("REOPEN RSS %s\n", strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
		if strings.HasPrefix(line, "RssAnon") || strings.HasPrefix(line, "RssFile") {
			fmt.Print("REOPEN ", line)
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("REOPEN heap in use %d MiB, heap sys %d MiB, heap released %d MiB\n", ms.HeapInuse>>20, ms.HeapSys>>20, ms.HeapReleased>>20)
	return nil
}
