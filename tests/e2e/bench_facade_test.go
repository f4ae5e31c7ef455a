//go:build e2e && bench

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubesearch/kubesearch/queryapi"
	"github.com/kubesearch/kubesearch/tests/testbed"
)

const (
	benchFacadePodNS = "bench-facade"     // BENCH_FACADE_PODS Pods in every member, selected
	benchFacadeOneNS = "bench-facade-one" // as many Pods as the whole fleet's, in member1 only, not selected
	benchStampKey    = "bench.kubesearch.io/written"
)

// TestBenchFacade measures the Kubernetes facade against what users do without it, on one pipeline
// (collector, indexer, query API built without -race) over the same data:
//
//  1. LIST of every Pod of the fleet through the facade (dynamic client, JSON, no limit, decoded),
//     against a loop of paged LISTs (limit 500) over every member apiserver and against one
//     apiserver listing as many Pods from its watch cache (resourceVersion=0); medians of
//     BENCH_FACADE_ROUNDS (5) rounds after a warm-up. Goals: faster than the loop, within 2× of one
//     apiserver. The members' Pods carry managedFields, which the facade prunes, so their answers
//     are bigger (both sizes are logged).
//  2. client-go dynamic informer initial sync (until HasSynced) of member1's Pods through
//     /clusters/member1 and straight against member1, with paged LIST+WATCH and with streaming lists
//     (WatchListClient); medians of 3.
//  3. Watch delivery latency, member write → event decoded at the facade: BENCH_WATCHERS (100) raw
//     HTTP watches of one namespace's ConfigMaps in the fleet view while ConfigMaps are created and
//     updated across the members at BENCH_WATCH_RATE (200) writes/s, or as fast as the machine
//     allows, for BENCH_WATCH_SECONDS (20); each write stamps its time in an annotation, taken just
//     before the write is sent. p50/p99 over every (watcher, event) pair. Goal: p99 ≤ 1 s.
//  4. Resident memory of a fresh query API under BENCH_FACADE_LISTERS (10) concurrent full LISTs of
//     every Pod of the fleet (VmRSS before, VmHWM after). Goal: growth ≤ 512 MiB.
//
// Data: BENCH_FACADE_PODS (3,000) Pods of realistic size (createPods) in namespace bench-facade of
// every member, and 3×BENCH_FACADE_PODS in bench-facade-one of member1; both are kept between runs
// and trimmed or filled to the asked size. The defaults take about ten minutes on a 2-core machine
// once the Pods exist. Figures are logged with a BENCH prefix and a summary table at the end; no
// timing is asserted, only that every answer holds what it should (counts, delivered events).
// Run it with `make bench-facade`.
func TestBenchFacade(t *testing.T) {
	buildFlags = nil    // measure the binary users run, not a race-detector build
	kubesearchBinary(t) // built now, not inside a timed process start
	env := testbed.Get(t)
	n := envInt("BENCH_FACADE_PODS", 3000)
	if len(env.Clusters) < 2 {
		t.Fatalf("the benchmark needs a fleet; the test bed has %v", env.Clusters)
	}
	one := env.Clusters[0]
	clientset := func(cluster string) kubernetes.Interface {
		cfg := env.RESTConfig(t, cluster)
		cfg.QPS, cfg.Burst = 1000, 2000
		return kubernetes.NewForConfigOrDie(cfg)
	}

	start := time.Now()
	fleetPods := 0
	for _, c := range env.Clusters {
		fleetPods += ensureBenchPods(t, clientset(c), benchFacadePodNS, n)
	}
	ensureBenchPods(t, clientset(one), benchFacadeOneNS, fleetPods)
	// ConfigMaps for the watch: a namespace of this run, with a "seed" ConfigMap in every member so
	// that the test knows every member's (cluster, configmaps) pair is indexed before the watches
	// start (the controller-manager's kube-root-ca.crt is there too, but when is its business).
	cmNS := uniqueName("bench-facade-cm")
	for _, c := range env.Clusters {
		cs := clientset(c)
		createNamespace(t, cs, cmNS)
		t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), cmNS, metav1.DeleteOptions{}) })
		if _, err := cs.CoreV1().ConfigMaps(cmNS).Create(t.Context(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "seed"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("BENCH data: %d Pods in %s of %d members, %d in %s of %s (ready in %s)",
		fleetPods, benchFacadePodNS, len(env.Clusters), fleetPods, benchFacadeOneNS, one, time.Since(start).Round(time.Second))

	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "bench.yaml"), fmt.Sprintf(`apiVersion: search.karmada.io/v1alpha1
kind: ResourceRegistry
metadata: {name: bench-facade}
spec:
  resourceSelectors:
  - {apiVersion: v1, kind: Pod, namespace: %s}
  - {apiVersion: v1, kind: ConfigMap, namespace: %s}
`, benchFacadePodNS, cmNS))
	start = time.Now()
	p := startQueryPipeline(t, env, dir)
	pollUntil(t, "every Pod and seed ConfigMap indexed", 20*time.Minute, func(context.Context) (bool, error) {
		pods := get(t, p.base, queryapi.PathSearch, url.Values{"resources": {"pods"}, "namespaces": {benchFacadePodNS}, "limit": {"1"}}).result.Total
		cms := get(t, p.base, queryapi.PathSearch, url.Values{"resources": {"configmaps"}, "namespaces": {cmNS}, "names": {"seed"}, "limit": {"1"}}).result.Total
		return pods == int64(fleetPods) && cms == int64(len(env.Clusters)), nil
	})
	t.Logf("BENCH pipeline started and %d Pods indexed in %s", fleetPods, time.Since(start).Round(time.Second))

	var rows []benchRow
	rows = append(rows, benchFacadeList(t, env, p.base, one, fleetPods)...)
	rows = append(rows, benchFacadeInformer(t, env, p.base, one)...)
	rows = append(rows, benchFacadeWatch(t, env, p.base, cmNS)...)
	rows = append(rows, benchFacadeMemory(t, p, fleetPods)...)

	t.Logf("BENCH summary (%d members, %d Pods in the fleet):", len(env.Clusters), fleetPods)
	t.Logf("BENCH   %-78s %-34s %-18s %s", "figure", "value", "goal", "")
	for _, r := range rows {
		verdict := ""
		if r.goal != "" {
			verdict = map[bool]string{true: "met", false: "MISSED"}[r.met]
		}
		t.Logf("BENCH   %-78s %-34s %-18s %s", r.what, r.value, r.goal, verdict)
	}
	recordRows(t, "facade", rows)
}

// benchRow is one line of the summary: a figure and, when the issue sets one, its goal.
type benchRow struct {
	what, value, goal string
	met               bool
	// results are the row's figures as numbers for make bench, Bench left to the caller (the
	// memory step serves two benchmarks).
	results []benchResult
}

// recordRows records the figures of rows under the benchmark's name.
func recordRows(t *testing.T, bench string, rows []benchRow) {
	t.Helper()
	var results []benchResult
	for _, r := range rows {
		for _, res := range r.results {
			res.Bench = bench
			results = append(results, res)
		}
	}
	recordBench(t, results...)
}

// ensureBenchPods makes ns of the member hold exactly the benchPods 0..n-1, creating the missing
// ones (a run at a smaller size, or one interrupted while creating) and deleting the others (a run
// at a larger size), and returns n.
func ensureBenchPods(t *testing.T, cs kubernetes.Interface, ns string, n int) int {
	t.Helper()
	createNamespace(t, cs, ns)
	have, err := cs.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	present := map[string]bool{}
	for _, p := range have.Items {
		present[p.Name] = true
	}
	start, created := time.Now(), 0
	for i := 0; i < n; {
		if present[benchPod(ns, i).Name] {
			delete(present, benchPod(ns, i).Name)
			i++
			continue
		}
		from := i
		for i < n && !present[benchPod(ns, i).Name] {
			i++
		}
		createPods(t, cs, ns, from, i-from)
		created += i - from
	}
	if created > 0 {
		t.Logf("created %d pods in %s in %s", created, ns, time.Since(start).Round(time.Second))
	}
	if len(present) == 0 {
		return n
	}
	// What is left in present is surplus. Without a kubelet's confirmation, kwok Pods go at once
	// with a grace period of 0.
	var wg sync.WaitGroup
	var failed atomic.Value
	jobs := make(chan string)
	for range 8 {
		wg.Go(func() {
			for name := range jobs {
				err := cs.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
				if err != nil && !apierrors.IsNotFound(err) {
					failed.Store(err)
				}
			}
		})
	}
	for name := range present {
		jobs <- name
	}
	close(jobs)
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		t.Fatalf("delete surplus pods in %s: %v", ns, err)
	}
	pollUntil(t, "the surplus pods of "+ns+" gone", 5*time.Minute, func(ctx context.Context) (bool, error) {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		return err == nil && len(l.Items) == n, nil
	})
	t.Logf("deleted %d surplus pods from %s", len(present), ns)
	return n
}

// warningLog keeps the distinct Warning headers a client was sent.
type warningLog struct {
	mu   sync.Mutex
	seen map[string]int
}

func (w *warningLog) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen == nil {
		w.seen = map[string]int{}
	}
	w.seen[text]++
}

func (w *warningLog) report(t *testing.T, who string) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for text, count := range w.seen {
		t.Logf("BENCH warning from %s (%d×): %s", who, count, text)
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f s", d.Seconds()) }

// benchFacadeList times the three ways of listing every Pod of the fleet.
func benchFacadeList(t *testing.T, env *testbed.Env, base, one string, fleetPods int) []benchRow {
	rounds := envInt("BENCH_FACADE_ROUNDS", 5)
	warnings := &warningLog{}
	fcfg := facadeConfig(base, "")
	fcfg.WarningHandler = warnings
	facade := dynamic.NewForConfigOrDie(fcfg)
	members := map[string]dynamic.Interface{}
	for _, c := range env.Clusters {
		members[c] = dynamic.NewForConfigOrDie(env.RESTConfig(t, c))
	}
	type lister struct {
		name  string
		list  func(ctx context.Context) (int, error)
		times []time.Duration
	}
	listers := []*lister{
		{name: "facade", list: func(ctx context.Context) (int, error) {
			l, err := facade.Resource(gvrPods).List(ctx, metav1.ListOptions{})
			if err != nil {
				return 0, err
			}
			return len(l.Items), nil
		}},
		{name: "loop over members", list: func(ctx context.Context) (int, error) {
			count := 0
			for _, c := range env.Clusters {
				opts := metav1.ListOptions{Limit: 500}
				for {
					l, err := members[c].Resource(gvrPods).Namespace(benchFacadePodNS).List(ctx, opts)
					if err != nil {
						return count, fmt.Errorf("list pods in %s: %w", c, err)
					}
					count += len(l.Items)
					if opts.Continue = l.GetContinue(); opts.Continue == "" {
						break
					}
				}
			}
			return count, nil
		}},
		{name: "one apiserver", list: func(ctx context.Context) (int, error) {
			l, err := members[one].Resource(gvrPods).Namespace(benchFacadeOneNS).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
			if err != nil {
				return 0, err
			}
			return len(l.Items), nil
		}},
	}

	// Warm-up, and the size of the facade's answer.
	resp, err := http.Get(base + "/api/v1/pods")
	if err != nil {
		t.Fatal(err)
	}
	size, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/pods: %s, %v", resp.Status, err)
	}
	for _, l := range listers[1:] {
		if _, err := l.list(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	// The member's answer is bigger for the same Pods: it keeps managedFields, the facade prunes them.
	raw, err := kubernetes.NewForConfigOrDie(env.RESTConfig(t, one)).CoreV1().RESTClient().Get().
		AbsPath("/api/v1/namespaces", benchFacadeOneNS, "pods").Param("resourceVersion", "0").
		SetHeader("Accept", "application/json").DoRaw(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for r := range rounds {
		for i := range listers {
			l := listers[(i+r)%len(listers)] // rotate, so that none always goes first
			t0 := time.Now()
			got, err := l.list(t.Context())
			d := time.Since(t0)
			if err != nil {
				t.Fatalf("%s: %v", l.name, err)
			}
			if got != fleetPods {
				t.Fatalf("%s listed %d pods, want %d", l.name, got, fleetPods)
			}
			l.times = append(l.times, d)
		}
	}
	warnings.report(t, "the facade's LIST")
	f, loop, single := median(listers[0].times), median(listers[1].times), median(listers[2].times)
	t.Logf("BENCH LIST of %d pods (JSON: facade %.1f MiB, one apiserver %.1f MiB), median of %d: facade %s, loop over %d members (limit 500) %s, one apiserver (resourceVersion=0) %s",
		fleetPods, float64(size)/(1<<20), float64(len(raw))/(1<<20), rounds, seconds(f), len(env.Clusters), seconds(loop), seconds(single))
	for _, l := range listers {
		t.Logf("BENCH   %-18s rounds: %v", l.name, l.times)
	}
	note := fmt.Sprintf("%d Pods in %d members, median of %d", fleetPods, len(env.Clusters), rounds)
	return []benchRow{
		{what: fmt.Sprintf("LIST %d pods: facade, /api/v1/pods, no limit, decoded", fleetPods), value: seconds(f),
			results: []benchResult{{What: "LIST through the facade", Value: f.Seconds(), Unit: "s", Note: note}}},
		{what: fmt.Sprintf("LIST %d pods: loop over %d member apiservers, limit 500", fleetPods, len(env.Clusters)), value: seconds(loop),
			results: []benchResult{{What: "LIST: loop over the members (limit 500)", Value: loop.Seconds(), Unit: "s", Note: note}}},
		{what: fmt.Sprintf("LIST %d pods: one apiserver, resourceVersion=0", fleetPods), value: seconds(single),
			results: []benchResult{{What: "LIST: one apiserver as many Pods (resourceVersion=0)", Value: single.Seconds(), Unit: "s", Note: note}}},
		{what: "LIST: facade ÷ loop over members", value: fmt.Sprintf("%.2f×", f.Seconds()/loop.Seconds()), goal: "< 1×", met: f < loop,
			results: []benchResult{{What: "LIST: facade ÷ loop over the members", Value: f.Seconds() / loop.Seconds(), Unit: "ratio", Goal: "< 1×", Met: met(f < loop), Note: note}}},
		{what: "LIST: facade ÷ one apiserver", value: fmt.Sprintf("%.2f×", f.Seconds()/single.Seconds()), goal: "≤ 2×", met: f <= 2*single,
			results: []benchResult{{What: "LIST: facade ÷ one apiserver", Value: f.Seconds() / single.Seconds(), Unit: "ratio", Goal: "≤ 2×", Met: met(f <= 2*single), Note: note}}},
	}
}

// benchFacadeInformer times a dynamic informer's initial sync of one member's Pods through its
// one-cluster view and straight against the member.
func benchFacadeInformer(t *testing.T, env *testbed.Env, base, one string) []benchRow {
	const rounds = 3
	want, err := kubernetes.NewForConfigOrDie(env.RESTConfig(t, one)).CoreV1().Pods(benchFacadePodNS).List(t.Context(), metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	syncOnce := func(cfg *rest.Config) time.Duration {
		t.Helper()
		factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dynamic.NewForConfigOrDie(cfg), 0, benchFacadePodNS, nil)
		inf := factory.ForResource(gvrPods).Informer()
		stop := make(chan struct{})
		defer factory.Shutdown()
		defer close(stop)
		t0 := time.Now()
		factory.Start(stop)
		// cache.WaitForCacheSync polls every 100 ms: too coarse for this.
		err := wait.PollUntilContextTimeout(t.Context(), 2*time.Millisecond, 5*time.Minute, true, func(context.Context) (bool, error) {
			return inf.HasSynced(), nil
		})
		d := time.Since(t0)
		if err != nil {
			t.Fatalf("informer of %s never synced: %v", cfg.Host, err)
		}
		if got := len(inf.GetStore().ListKeys()); got != len(want.Items) {
			t.Fatalf("informer of %s synced with %d pods, %s has %d", cfg.Host, got, one, len(want.Items))
		}
		return d
	}
	defer watchList.set(true)
	var rows []benchRow
	for _, streaming := range []bool{false, true} {
		watchList.set(streaming)
		mode := "LIST+WATCH"
		if streaming {
			mode = "streaming list"
		}
		var viaFacade, direct []time.Duration
		for r := range rounds {
			fc, dc := facadeConfig(base, "/clusters/"+one), env.RESTConfig(t, one)
			if r%2 == 0 {
				viaFacade = append(viaFacade, syncOnce(fc))
				direct = append(direct, syncOnce(dc))
			} else {
				direct = append(direct, syncOnce(dc))
				viaFacade = append(viaFacade, syncOnce(fc))
			}
		}
		f, d := median(viaFacade), median(direct)
		t.Logf("BENCH informer initial sync of %d pods of %s (%s), median of %d: via /clusters/%s %s, direct %s: %.2f× (facade %v, direct %v)",
			len(want.Items), one, mode, rounds, one, seconds(f), seconds(d), f.Seconds()/d.Seconds(), viaFacade, direct)
		note := fmt.Sprintf("%d Pods of %s, median of %d", len(want.Items), one, rounds)
		rows = append(rows, benchRow{
			what:  fmt.Sprintf("informer sync, %d pods of %s (%s): /clusters/%s ÷ direct", len(want.Items), one, mode, one),
			value: fmt.Sprintf("%s ÷ %s = %.2f×", seconds(f), seconds(d), f.Seconds()/d.Seconds()),
			results: []benchResult{
				{What: "informer sync via the facade (" + mode + ")", Value: f.Seconds(), Unit: "s", Note: note},
				{What: "informer sync direct (" + mode + ")", Value: d.Seconds(), Unit: "s", Note: note},
				{What: "informer sync ratio, facade ÷ direct (" + mode + ")", Value: f.Seconds() / d.Seconds(), Unit: "ratio", Note: note},
			},
		})
	}
	return rows
}

// benchWatchEvent is what a watcher decodes of an event.
type benchWatchEvent struct {
	Type   string `json:"type"`
	Object struct {
		Metadata struct {
			ResourceVersion string            `json:"resourceVersion"`
			Annotations     map[string]string `json:"annotations"`
		} `json:"metadata"`
		Message string `json:"message"` // of an ERROR's Status
	} `json:"object"`
}

// benchWatcher is one watch of the fleet's ConfigMaps; it is read by its own goroutine and, once
// that has ended, by the test.
type benchWatcher struct {
	got        atomic.Int64 // distinct writes received
	seen       []bool       // by write sequence number
	latencies  []time.Duration
	reconnects int
	failure    atomic.Pointer[string] // why it stopped before the test ended it
}

func (w *benchWatcher) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	w.failure.Store(&msg)
}

func (w *benchWatcher) failed() string {
	if msg := w.failure.Load(); msg != nil {
		return *msg
	}
	return ""
}

// benchFacadeWatch measures the delay from a member write to the event decoded by each of many
// fleet-view watchers.
func benchFacadeWatch(t *testing.T, env *testbed.Env, base, ns string) []benchRow {
	watchers := envInt("BENCH_WATCHERS", 100)
	rate := envInt("BENCH_WATCH_RATE", 200)
	duration := time.Duration(envInt("BENCH_WATCH_SECONDS", 20)) * time.Second
	total := int(float64(rate) * duration.Seconds())
	pool := max(20, rate/2) // ConfigMaps per member: a name is written again 3×pool writes later

	// Watches resume from a LIST's resourceVersion, as clients do.
	var list struct {
		Metadata struct{ ResourceVersion string } `json:"metadata"`
	}
	if err := json.Unmarshal(mustHTTP(t, http.MethodGet, base+"/api/v1/namespaces/"+ns+"/configmaps", ""), &list); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: watchers, DisableCompression: true}}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ws := make([]*benchWatcher, watchers)
	var ready, done sync.WaitGroup
	for i := range ws {
		w := &benchWatcher{seen: make([]bool, total)}
		ws[i] = w
		ready.Add(1)
		done.Go(func() {
			var once sync.Once
			defer once.Do(ready.Done)
			rv := list.Metadata.ResourceVersion
			for attempt := 0; ctx.Err() == nil; attempt++ {
				if attempt > 0 {
					w.reconnects++
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/namespaces/"+ns+
					"/configmaps?watch=1&allowWatchBookmarks=true&resourceVersion="+url.QueryEscape(rv), nil)
				resp, err := client.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						w.fail("%v", err)
					}
					return
				}
				if resp.StatusCode != http.StatusOK {
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					w.fail("watch: %s %s", resp.Status, body)
					return
				}
				once.Do(ready.Done)
				dec := json.NewDecoder(resp.Body)
				for {
					var e benchWatchEvent
					if err := dec.Decode(&e); err != nil {
						break // the stream ended: resume where it was
					}
					received := time.Now()
					if e.Object.Metadata.ResourceVersion != "" {
						rv = e.Object.Metadata.ResourceVersion
					}
					switch e.Type {
					case "BOOKMARK":
						continue
					case "ERROR":
						resp.Body.Close()
						w.fail("ERROR event: %s", e.Object.Message)
						return
					}
					seqText, stamp, ok := strings.Cut(e.Object.Metadata.Annotations[benchStampKey], "/")
					seq, err1 := strconv.Atoi(seqText)
					nanos, err2 := strconv.ParseInt(stamp, 10, 64)
					if !ok || err1 != nil || err2 != nil || seq < 0 || seq >= total || w.seen[seq] {
						continue // the seed ConfigMaps, or a repeat
					}
					w.seen[seq] = true
					w.latencies = append(w.latencies, received.Sub(time.Unix(0, nanos)))
					w.got.Add(1)
				}
				resp.Body.Close()
			}
		})
	}
	readyCh := make(chan struct{})
	go func() { ready.Wait(); close(readyCh) }()
	select {
	case <-readyCh:
	case <-time.After(2 * time.Minute):
		t.Fatal("the watches did not all start within 2 minutes")
	}
	for i, w := range ws {
		if msg := w.failed(); msg != "" {
			cancel()
			done.Wait()
			t.Fatalf("watcher %d: %s", i, msg)
		}
	}

	// Writes, spread over the members, each due at start + seq/rate; late ones go at once.
	cms := map[string]kubernetes.Interface{}
	for _, c := range env.Clusters {
		cfg := env.RESTConfig(t, c)
		cfg.QPS, cfg.Burst = float32(2*rate), 2*rate
		cms[c] = kubernetes.NewForConfigOrDie(cfg)
	}
	interval := time.Second / time.Duration(rate)
	deadline := duration * 3 / 2 // past it the machine cannot keep the rate: stop writing
	var next, written atomic.Int64
	var writeErr atomic.Value
	var writers sync.WaitGroup
	writeStart := time.Now().Add(100 * time.Millisecond)
	var lastWrite atomic.Int64
	for range 32 {
		writers.Go(func() {
			for {
				seq := int(next.Add(1) - 1)
				if seq >= total || time.Since(writeStart) > deadline || ctx.Err() != nil {
					return
				}
				if d := time.Until(writeStart.Add(time.Duration(seq) * interval)); d > 0 {
					time.Sleep(d)
				}
				cluster := env.Clusters[seq%len(env.Clusters)]
				k := seq / len(env.Clusters)
				cm := &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%04d", k%pool),
						Annotations: map[string]string{benchStampKey: fmt.Sprintf("%d/%d", seq, time.Now().UnixNano())}},
					Data: map[string]string{"seq": strconv.Itoa(seq)},
				}
				api := cms[cluster].CoreV1().ConfigMaps(ns)
				var err error
				if k < pool {
					_, err = api.Create(ctx, cm, metav1.CreateOptions{})
				} else if _, err = api.Update(ctx, cm, metav1.UpdateOptions{}); apierrors.IsNotFound(err) {
					_, err = api.Create(ctx, cm, metav1.CreateOptions{}) // its create is still on the way
				}
				if err != nil {
					writeErr.Store(fmt.Errorf("write %d to %s: %w", seq, cluster, err))
					continue
				}
				written.Add(1)
				lastWrite.Store(time.Now().UnixNano())
			}
		})
	}
	writers.Wait()
	if err, ok := writeErr.Load().(error); ok {
		cancel()
		done.Wait()
		t.Fatal(err)
	}
	writes := int(written.Load())
	if writes == 0 {
		cancel()
		done.Wait()
		t.Fatal("no write succeeded")
	}
	elapsed := time.Unix(0, lastWrite.Load()).Sub(writeStart)
	achieved := float64(writes) / elapsed.Seconds()

	// Every watcher should get every write; stragglers get a minute.
	drainStart := time.Now()
	_ = wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		for _, w := range ws {
			if w.got.Load() < int64(writes) {
				return false, nil
			}
		}
		return true, nil
	})
	drained := time.Since(drainStart)
	cancel()
	done.Wait()

	var all []time.Duration
	reconnects, failures := 0, 0
	for i, w := range ws {
		all = append(all, w.latencies...)
		reconnects += w.reconnects
		if msg := w.failed(); msg != "" {
			failures++
			t.Logf("watcher %d: %s", i, msg)
		}
	}
	expected := writes * watchers
	if len(all) < expected {
		t.Errorf("the watchers received %d of the %d (watcher, write) events (%d watchers failed, %d reconnects)",
			len(all), expected, failures, reconnects)
	}
	if len(all) == 0 {
		t.Fatal("no event received")
	}
	slices.Sort(all)
	p50, p99, worst := all[len(all)/2], all[len(all)*99/100], all[len(all)-1]
	t.Logf("BENCH watch: %d watchers, %d writes (create/update over %d members) at %.0f/s achieved (asked %d/s) over %s; %d of %d events delivered, last ones %s after the writes ended; %d reconnects",
		watchers, writes, len(env.Clusters), achieved, rate, elapsed.Round(time.Millisecond), len(all), expected, drained.Round(time.Millisecond), reconnects)
	t.Logf("BENCH watch delivery latency (member write → event decoded at the facade): p50 %.1f ms, p99 %.1f ms, max %.1f ms",
		ms(p50), ms(p99), ms(worst))
	note := fmt.Sprintf("%d watchers, %d writes asked at %d/s over %d members", watchers, total, rate, len(env.Clusters))
	return []benchRow{
		{what: fmt.Sprintf("watch writes: achieved rate (asked %d/s), %d watchers", rate, watchers), value: fmt.Sprintf("%.0f/s", achieved),
			results: []benchResult{{What: "watch writes achieved", Value: achieved, Unit: "writes/s", Note: note}}},
		{what: "watch delivery latency p50 (member write → facade event)", value: fmt.Sprintf("%.1f ms", ms(p50)),
			results: []benchResult{{What: "watch delivery p50", Value: ms(p50), Unit: "ms", Note: note}}},
		{what: fmt.Sprintf("watch delivery latency p99 (%d of %d events)", len(all), expected), value: fmt.Sprintf("%.1f ms", ms(p99)),
			goal: "≤ 1 s", met: p99 <= time.Second && len(all) >= expected,
			results: []benchResult{
				{What: "watch delivery p99", Value: ms(p99), Unit: "ms", Goal: "≤ 1 s, every event delivered", Met: met(p99 <= time.Second && len(all) >= expected), Note: note},
				{What: "watch events delivered", Value: float64(len(all)) / float64(expected) * 100, Unit: "%", Note: note},
			}},
	}
}

// procStatus reads one size field (VmRSS, VmHWM) of /proc/<pid>/status, in bytes.
func procStatus(pid int, field string) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == field+":" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// settledRSS is the resident set (VmRSS) of process pid once it moved less than 2 MiB in a second,
// or after 30 s.
func settledRSS(t *testing.T, pid int) int64 {
	t.Helper()
	var rss, prev int64
	_ = wait.PollUntilContextTimeout(t.Context(), time.Second, 30*time.Second, true, func(context.Context) (bool, error) {
		now, err := procStatus(pid, "VmRSS")
		if err != nil {
			return false, err
		}
		rss, prev = now, rss
		return rss-prev < 2<<20 && prev-rss < 2<<20, nil
	})
	return rss
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// benchFacadeMemory reads the resident memory of a fresh query API before and after concurrent full
// LISTs of every Pod of the fleet.
func benchFacadeMemory(t *testing.T, p *queryPipeline, fleetPods int, queryAPIArgs ...string) []benchRow {
	listers := envInt("BENCH_FACADE_LISTERS", 10)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	api := p.startQueryAPIAt(t, addr, append([]string{"--stale-after", "3s", "--poll-interval", "500ms"}, queryAPIArgs...)...)
	base, pid := "http://"+addr, api.cmd.Process.Pid
	mustHTTP(t, http.MethodGet, base+"/api/v1/namespaces/"+benchFacadePodNS+"/pods?limit=1", "")
	// The baseline is taken once the resident set settles: the watch cache reads the event stream
	// after /readyz.
	baseline := settledRSS(t, pid)
	hwmBefore := peakRSS(t, pid)

	type result struct {
		items int
		d     time.Duration
		err   error
	}
	results := make([]result, listers)
	var wg sync.WaitGroup
	stopRSS := sampleRSS(t, pid, 500*time.Millisecond) // from just before the LISTs to after them
	t0 := time.Now()
	for i := range results {
		wg.Go(func() {
			start := time.Now()
			resp, err := http.Get(base + "/api/v1/pods")
			if err != nil {
				results[i].err = err
				return
			}
			defer resp.Body.Close()
			var l struct {
				Items []struct {
					Metadata struct{ Name string } `json:"metadata"`
				} `json:"items"`
			}
			if resp.StatusCode != http.StatusOK {
				results[i].err = fmt.Errorf("GET /api/v1/pods: %s", resp.Status)
				return
			}
			results[i].err = json.NewDecoder(resp.Body).Decode(&l)
			results[i].items, results[i].d = len(l.Items), time.Since(start)
		})
	}
	wg.Wait()
	wall := time.Since(t0)
	rss := stopRSS()
	peak := peakRSS(t, pid)
	var times []time.Duration
	for i, r := range results {
		if r.err != nil || r.items != fleetPods {
			t.Errorf("concurrent LIST %d: %d pods, %v; want %d", i, r.items, r.err, fleetPods)
			continue
		}
		times = append(times, r.d)
	}
	if len(times) == 0 {
		t.Fatal("no concurrent LIST succeeded")
	}
	growth := peak - baseline
	t.Logf("BENCH query API memory under %d concurrent LISTs of %d pods (all done in %s, each median %s): VmRSS before %s (VmHWM %s), VmHWM after %s, growth %s",
		listers, fleetPods, wall.Round(time.Millisecond), seconds(median(times)), mib(baseline), mib(hwmBefore), mib(peak), mib(growth))
	note := fmt.Sprintf("%d concurrent full LISTs of %d Pods", listers, fleetPods)
	toMiB := func(b int64) float64 { return float64(b) / (1 << 20) }
	return []benchRow{
		{what: fmt.Sprintf("query API RSS before %d concurrent LISTs of %d pods", listers, fleetPods), value: mib(baseline),
			results: []benchResult{{What: "query API RSS before (VmRSS)", Value: toMiB(baseline), Unit: "MiB", Note: note}}},
		{what: "query API peak RSS (VmHWM) after them", value: mib(peak),
			results: []benchResult{{What: "query API peak RSS after (VmHWM)", Value: toMiB(peak), Unit: "MiB", Note: note}}},
		{what: "query API RSS growth", value: mib(growth), goal: "≤ 512 MiB", met: growth <= 512<<20,
			results: []benchResult{{What: "query API RSS growth", Value: toMiB(growth), Unit: "MiB", Goal: "≤ 512 MiB", Met: met(growth <= 512<<20), Note: note}}},
		{what: "query API peak of VmRSS sampled every 500 ms during them", value: fmt.Sprintf("%.0f MiB", peakOf(rss)),
			results: []benchResult{{What: "query API resident memory over time (VmRSS every 500 ms), peak", Value: peakOf(rss), Unit: "MiB",
				Note: note + "; from just before the LISTs to after them", Series: rss}}},
		{what: fmt.Sprintf("%d concurrent LISTs: wall time / median each", listers), value: fmt.Sprintf("%s / %s", seconds(wall), seconds(median(times))),
			results: []benchResult{
				{What: "concurrent LISTs, wall time", Value: wall.Seconds(), Unit: "s", Note: note},
				{What: "concurrent LISTs, median each", Value: median(times).Seconds(), Unit: "s", Note: note},
			}},
	}
}
