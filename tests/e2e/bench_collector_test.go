//go:build e2e && bench

package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/tests/testbed"
)

// TestBenchCollectorList measures the collector listing BENCH_PODS (10,000) Pods of realistic size
// from one test bed member: publish rate and the collector's peak resident memory, also as a multiple
// of the pruned JSON it published — whole, and what the list adds to the peak of the same collector
// with nothing to list (the Go runtime, client-go, kafka-go and the binary's own pages, which no
// list size changes). It reports figures; it asserts only that every Pod was published.
// Run it with `make bench-collector`.
func TestBenchCollectorList(t *testing.T) {
	buildFlags = nil    // measure the binary users run, not a race-detector build
	kubesearchBinary(t) // built now, not inside a timed process start
	env := testbed.Get(t)
	n := envInt("BENCH_PODS", 10000)
	cluster := env.Clusters[0]
	// No owner references: the garbage collector would delete Pods whose owner does not exist.
	ns := "bench-pods-2"
	cfg := env.RESTConfig(t, cluster)
	cfg.QPS, cfg.Burst = 1000, 2000
	cs := kubernetes.NewForConfigOrDie(cfg)
	createNamespace(t, cs, ns)
	have, err := cs.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if missing := n - len(have.Items); missing > 0 {
		start := time.Now()
		createPods(t, cs, ns, len(have.Items), missing)
		t.Logf("created %d pods in %s", missing, time.Since(start).Round(time.Second))
	}
	waitPodsRunning(t, ns, cs)

	registry := func(ns string) string {
		dir := t.TempDir()
		writeFile(t, dir+"/pods.yaml", fmt.Sprintf(`apiVersion: search.karmada.io/v1alpha1
kind: ResourceRegistry
metadata: {name: bench}
spec:
  targetCluster: {clusterNames: [%s]}
  resourceSelectors:
  - {apiVersion: v1, kind: Pod, namespace: %s}
`, cluster, ns))
		return dir
	}
	pageSize := "100"
	if v := os.Getenv("BENCH_PAGE_SIZE"); v != "" {
		pageSize = v
	}
	// The idle collector: the same process on the same member, listing the Pods of an empty
	// namespace (discovery, the OpenAPI relay, the ledger, Kafka's topics: all it does before its
	// first object), stopped once its SYNC is read back. Its peak is the baseline the measured
	// collector's peak is compared with.
	idleNS := "bench-pods-idle"
	createNamespace(t, cs, idleNS)
	idleTopic := uniqueName("bench-collector-idle")
	idleLog := tailTopic(t, env.KafkaBrokers, idleTopic)
	idle, _ := startCollector(t, env, registry(idleNS), idleTopic, "--page-size", pageSize)
	idleLog.waitFor(t, "the SYNC of the idle collector's empty list", 2*time.Minute, func(evs []*envelope.Event) bool {
		return slices.ContainsFunc(evs, func(ev *envelope.Event) bool { return ev.Type == envelope.Sync })
	})
	idlePeak := peakRSS(t, idle.cmd.Process.Pid)
	_ = idle.stop(10 * time.Second)
	t.Logf("idle collector (an empty namespace listed): peak RSS %.1f MiB", float64(idlePeak)/(1<<20))

	dir := registry(ns)
	topic := uniqueName("bench-collector")
	log := tailTopic(t, env.KafkaBrokers, topic)
	// The baseline, in the same run, before and after the collector: a plain paged GET of the
	// same Pods from the same apiserver at the same page size, JSON decoded, one client (what the
	// collector's reflector does before it prunes and publishes).
	limit, _ := strconv.ParseInt(pageSize, 10, 64)
	rawList := func() (int, time.Duration) {
		start, n, cont := time.Now(), 0, ""
		for {
			l, err := cs.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{Limit: limit, Continue: cont})
			if err != nil {
				t.Fatalf("raw list: %v", err)
			}
			n += len(l.Items)
			if cont = l.Continue; cont == "" {
				return n, time.Since(start)
			}
		}
	}
	rawBefore, rawBeforeTime := rawList()
	// The SYNC is timed as it is read back, by a reader following the topic live: polling the topic
	// (as log.waitFor does, every 500 ms, decoding every event) put up to half a second of the
	// harness into a list of a second or two. The events are read afterwards, for the figures.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	syncs := make(chan syncSeen, 1)
	stopTail := tailSyncs(ctx, t, env.KafkaBrokers, topic, syncs)
	defer stopTail()
	start := time.Now()
	p, _ := startCollector(t, env, dir, topic, "--page-size", pageSize)
	stopRSS := sampleRSS(t, p.cmd.Process.Pid, 200*time.Millisecond)
	var done time.Time
	select {
	case s := <-syncs:
		done = s.at
	case <-ctx.Done():
		t.Fatal("no SYNC read back within 10 minutes")
	}
	rss := stopRSS()
	elapsed := done.Sub(start)
	peak := peakRSS(t, p.cmd.Process.Pid)
	evs := log.waitFor(t, "the SYNC of the list", time.Minute, func(evs []*envelope.Event) bool {
		return slices.ContainsFunc(evs, func(ev *envelope.Event) bool { return ev.Type == envelope.Sync })
	})
	var objects, bytes, msgBytes int
	var sync *envelope.Event
	var firstSeen time.Time
	for _, ev := range evs {
		switch ev.Type {
		case envelope.Added:
			if firstSeen.IsZero() || ev.ObservedAt.Before(firstSeen) {
				firstSeen = ev.ObservedAt
			}
			objects++
			bytes += len(ev.Object)
			b, _ := ev.Marshal()
			msgBytes += len(b)
		case envelope.Sync:
			sync = ev
		}
	}
	if sync.Count == nil || *sync.Count < n || objects < n {
		t.Fatalf("published %d objects, SYNC counts %v, want %d", objects, sync.Count, n)
	}
	mb := float64(msgBytes) / (1 << 20)
	t.Logf("listed and published %d pods (pruned JSON %.1f MiB, %.1f KB average; %.1f MiB of envelopes) in %s",
		objects, float64(bytes)/(1<<20), float64(bytes)/float64(objects)/1000, mb, elapsed.Round(time.Millisecond))
	t.Logf("rate: %.0f objects/s, %.1f MB/s of envelopes (start of process to SYNC read back from Kafka)",
		float64(objects)/elapsed.Seconds(), float64(msgBytes)/1e6/elapsed.Seconds())
	t.Logf("collector peak RSS (VmHWM): %.1f MiB = %.1f MiB per 10k objects = %.2f× the pruned JSON",
		float64(peak)/(1<<20), float64(peak)/(1<<20)*10000/float64(objects), float64(peak)/float64(bytes))
	growth := peak - idlePeak
	t.Logf("collector peak RSS over the idle collector's (%.1f MiB): +%.1f MiB = %.2f× the pruned JSON",
		float64(idlePeak)/(1<<20), float64(growth)/(1<<20), float64(growth)/float64(bytes))
	size := fmt.Sprintf("%d Pods of %s, page size %s", objects, cluster, pageSize)
	memRatio := float64(peak) / float64(bytes)
	rawAfter, rawAfterTime := rawList()
	raw := rawBefore
	rawTime := (rawBeforeTime + rawAfterTime) / 2
	rawRate := float64(raw) / rawTime.Seconds()
	t.Logf("raw paged list before the collector %.0f objects/s, after it %.0f objects/s: the baseline is their mean time",
		float64(rawBefore)/rawBeforeTime.Seconds(), float64(rawAfter)/rawAfterTime.Seconds())
	rate := float64(objects) / elapsed.Seconds()
	// The collector's list itself: from its first object's event (observedAt) to the SYNC read back
	// from Kafka, plus the first page's fetch, which the raw list also pays (its time ÷ pages):
	// process start, discovery and topic setup left out, as the raw list has none.
	listTime := done.Sub(firstSeen) + rawTime/time.Duration(max(1, (int64(raw)+limit-1)/limit))
	listRate := float64(objects) / listTime.Seconds()
	t.Logf("raw paged list of the same %d pods (limit %d, decoded): %.0f objects/s; collector's list and publish %.0f objects/s (%s), ÷ raw = %.2f; with process start %.0f objects/s",
		raw, limit, rawRate, listRate, listTime.Round(time.Millisecond), listRate/rawRate, rate)
	recordBench(t,
		benchResult{Bench: "collector", What: "raw paged list rate (same Pods, same page size, decoded)", Value: rawRate, Unit: "objects/s", Note: size},
		benchResult{Bench: "collector", What: "list and publish rate", Value: listRate, Unit: "objects/s", Note: size + "; first object's event to SYNC read back from Kafka, plus one page's fetch"},
		benchResult{Bench: "collector", What: "list and publish rate ÷ raw list rate", Value: listRate / rawRate, Unit: "ratio",
			Goal: "≥ 0.9×", Met: met(listRate/rawRate >= 0.9), Note: size},
		benchResult{Bench: "collector", What: "list and publish rate with process start", Value: rate, Unit: "objects/s", Note: size + "; process start to SYNC read back from Kafka"},
		benchResult{Bench: "collector", What: "envelope throughput", Value: float64(msgBytes) / 1e6 / elapsed.Seconds(), Unit: "MB/s", Note: size},
		benchResult{Bench: "collector", What: "pruned JSON published", Value: float64(bytes) / (1 << 20), Unit: "MiB", Note: size},
		benchResult{Bench: "collector", What: "peak RSS (VmHWM)", Value: float64(peak) / (1 << 20), Unit: "MiB", Note: size},
		benchResult{Bench: "collector", What: "resident memory over time (VmRSS every 200 ms), peak", Value: peakOf(rss), Unit: "MiB",
			Note: size + "; from the collector's start to the SYNC", Series: rss},
		benchResult{Bench: "collector", What: "peak RSS ÷ pruned JSON", Value: memRatio, Unit: "ratio", Goal: "≤ 1×", Met: met(memRatio <= 1), Note: size},
		benchResult{Bench: "collector", What: "idle peak RSS (VmHWM; the same collector listing an empty namespace)", Value: float64(idlePeak) / (1 << 20), Unit: "MiB",
			Note: "the baseline: the Go runtime, client-go, kafka-go and the binary's pages, before any object"},
		benchResult{Bench: "collector", What: "peak RSS over the idle peak", Value: float64(growth) / (1 << 20), Unit: "MiB", Note: size},
		benchResult{Bench: "collector", What: "peak RSS over the idle peak ÷ pruned JSON", Value: float64(growth) / float64(bytes), Unit: "ratio",
			Note: size + "; what the list's objects in flight cost, the baseline left out"},
	)
}

// peakRSS reads VmHWM, the process's peak resident set, in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// createPods creates count Pods shaped like a real workload's: a dozen labels with
// dotted keys, sidecar-injection annotations, two containers with env, probes, resources and mounts —
// about 10 KB of JSON before kwok adds status.
func createPods(t *testing.T, cs kubernetes.Interface, ns string, from, count int) {
	t.Helper()
	jobs := make(chan int)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if _, err := cs.CoreV1().Pods(ns).Create(context.Background(), benchPod(ns, i), metav1.CreateOptions{}); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := from; i < from+count; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatalf("create pods: %v", err)
	default:
	}
}
