//go:build e2e && bench

package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
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
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/tidwall/gjson"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/registry"
	"github.com/kubesearch/kubesearch/queryapi"
	"github.com/kubesearch/kubesearch/tests/testbed"
)

// TestBenchFleetWatch measures fleet-view watches at a fleet's size (issue 25): the simulator
// publishes BENCH_FLEET_WATCH_CLUSTERS (1,000) clusters of BENCH_FLEET_WATCH_OBJECTS (20) objects,
// Pods only, and then churns them at BENCH_FLEET_WATCH_RATE (200) changes/s until it is stopped;
// an indexer publishing the change feed and a query API following it (both at their defaults, the
// query API with a --continue-key-file) serve them. Once the index has caught up it takes a fleet
// LIST and a paged one (limit=500), opens BENCH_FLEET_WATCH_WATCHERS (100) raw HTTP watches of
// /api/v1/pods from the paged LIST's resourceVersion and one client-go informer of the qualified
// view, and lets the churn run BENCH_FLEET_WATCH_SECONDS (120) more.
//
// Figures: delivery latency from the change's time (the envelope's changedAt, which the simulator
// stamps when it makes the change, before publishing it) to the line read by the watcher, p50/p99
// over every (watcher, change) pair made after every watch was open; events delivered per watcher
// beside the changes made; bytes per event line; the length of the resourceVersion of events, of
// bookmarks, of the LISTs and of the paged LIST's continue token; the query API's CPU-seconds and
// resident memory during the churn. Asserted, as the README promises: every watcher and the
// informer get every change made after their LIST, once and in each cluster's order (the changes
// are read back from the topic); a watch resumed from one watcher's event resourceVersion gets
// exactly the events that watcher got after it, without a 410. No timing is asserted.
//
// With BENCH_FLEET_WATCH_OUT (make bench-fleet-watch sets bench/results/<date>-fleet-watch) the
// figures are written there as report.md and results.json. A query API whose resident memory
// passes BENCH_FLEET_WATCH_MAX_RSS_MIB (4096) is stopped with SIGQUIT (its goroutines go to its log)
// and the run fails: the machine is shared.
func TestBenchFleetWatch(t *testing.T) {
	buildFlags = nil    // measure the binary users run, not a race-detector build
	kubesearchBinary(t) // built now, not inside a timed process start
	env := testbed.Get(t)
	clusters := envInt("BENCH_FLEET_WATCH_CLUSTERS", 1000)
	objects := envInt("BENCH_FLEET_WATCH_OBJECTS", 20)
	watchers := envInt("BENCH_FLEET_WATCH_WATCHERS", 100)
	rate := envInt("BENCH_FLEET_WATCH_RATE", 200)
	duration := time.Duration(envInt("BENCH_FLEET_WATCH_SECONDS", 120)) * time.Second
	brokers := strings.Join(env.KafkaBrokers, ",")

	topic, prefix := uniqueName("fleetwatch"), uniqueName("fleetwatch")
	tailTopic(t, env.KafkaBrokers, topic) // creates the topic
	t.Cleanup(func() {
		req, _ := http.NewRequest(http.MethodDelete, env.OpenSearchURL+"/"+prefix+"-*", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	// The key sealing the fleet positions, as an installation gives its replicas (the chart
	// requires one above one replica), rather than the random one a process draws without it.
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "continue-key")
	writeFile(t, keyFile, string(key))

	indexerAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startProcess(t, "indexer", "indexer", "--kafka-brokers", brokers, "--topic", topic, "--group", topic+"-indexer",
		"--opensearch-addresses", env.OpenSearchURL, "--index-prefix", prefix, "--listen", indexerAddr)
	waitHTTP(t, "http://"+indexerAddr+"/readyz", 2*time.Minute)

	// The simulator lists its clusters, then churns until it is stopped: the watches are opened
	// once the index has caught up, so the churn has to outlast the ingest, whatever it takes.
	simAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	simBase := "http://" + simAddr
	published := time.Now()
	sim := startProcess(t, "simulate", "simulate", "--kafka-brokers", brokers, "--topic", topic, "--listen", simAddr,
		"--clusters", strconv.Itoa(clusters), "--objects", strconv.Itoa(objects), "--kinds", "pods", "--seed", "1",
		"--churn-rate", strconv.Itoa(rate))
	waitHTTP(t, simBase+"/readyz", 10*time.Minute) // every list acknowledged by Kafka
	listed := getSimStatus(t, simBase)
	t.Logf("BENCH published %d clusters × %d objects (%d Pods, %d pairs) in %s; churning at %d/s from now on",
		clusters, objects, listed.Simulation.Objects, len(listed.Items), time.Since(published).Round(100*time.Millisecond), rate)

	apiAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	base := "http://" + apiAddr
	api := startProcess(t, "queryapi", "queryapi", "--anonymous", "--listen", apiAddr, "--opensearch-addresses", env.OpenSearchURL,
		"--index-prefix", prefix, "--collector-status-urls", simBase+"/status", "--kafka-brokers", brokers, "--topic", topic,
		"--indexer-group", topic+"-indexer", "--continue-key-file", keyFile, "--profiling")
	waitHTTP(t, base+"/readyz", 10*time.Minute)
	waitFleetCaughtUp(t, base, listed, 30*time.Minute)
	ingested := time.Since(published)
	t.Logf("BENCH the index caught up with the lists %s after they began (the churn meanwhile included)", ingested.Round(time.Second))

	var results []benchResult
	note := fmt.Sprintf("%d clusters × %d objects, Pods only (%d Pods)", clusters, objects, listed.Simulation.Objects)
	add := func(what string, value float64, unit, extra string) {
		n := note
		if extra != "" {
			n += "; " + extra
		}
		results = append(results, benchResult{Bench: "fleet-watch", What: what, Value: value, Unit: unit, Note: n})
	}
	add("cold ingest of the lists until every pair is indexed up to them", ingested.Seconds(), "s", fmt.Sprintf("churn at %d/s meanwhile", rate))

	// The positions a client carries at this fleet size.
	full := fleetList(t, base+"/api/v1/pods")
	page := fleetList(t, base+"/api/v1/pods?limit=500")
	if page.cont == "" {
		t.Fatalf("a LIST of %d Pods with limit=500 has no continue token", full.items)
	}
	next := fleetList(t, base+"/api/v1/pods?limit=500&continue="+url.QueryEscape(page.cont))
	t.Logf("BENCH fleet LIST of %d Pods (%.1f MiB) in %s: resourceVersion %d bytes", full.items, float64(full.bytes)/(1<<20),
		full.took.Round(time.Millisecond), len(full.rv))
	// Each sealing draws a new nonce: the second page says the first page's position in other bytes.
	t.Logf("BENCH paged LIST (limit=500): resourceVersion %d bytes, continue token %d bytes; page 2: %d items, resourceVersion %d bytes, continue token %d bytes",
		len(page.rv), len(page.cont), next.items, len(next.rv), len(next.cont))
	add("fleet LIST resourceVersion", float64(len(full.rv)), "bytes", "")
	add("paged LIST (limit=500) resourceVersion", float64(len(page.rv)), "bytes", "")
	add("paged LIST (limit=500) continue token", float64(len(page.cont)), "bytes", "")
	add("fleet LIST of every Pod", full.took.Seconds(), "s", fmt.Sprintf("%d items, %.1f MiB", full.items, float64(full.bytes)/(1<<20)))

	// The watches start from a LIST's resourceVersion, as clients do. A change made after the LIST
	// answered cannot be inside its position: every watch must deliver each of those.
	clusterIndex := map[string]int32{}
	for _, row := range listed.Items {
		if _, ok := clusterIndex[row.Cluster]; !ok {
			clusterIndex[row.Cluster] = int32(len(clusterIndex))
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// The informer first: its initial list is a load of its own, not to be measured with the
	// watches' first events.
	inf := startFleetInformer(t, ctx, base, clusterIndex)

	listStart := time.Now()
	start := fleetList(t, base+"/api/v1/pods?limit=500")
	listDone := time.Now()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: watchers + 1, DisableCompression: true}}
	defer client.CloseIdleConnections()
	ws := make([]*fleetWatcher, watchers)
	var opened, done sync.WaitGroup
	for i := range ws {
		w := &fleetWatcher{keepLog: i == 0, clusters: clusterIndex, last: map[int32]uint64{}, eventRV: map[int]int{}, bookmarkRV: map[int]int{}}
		ws[i] = w
		opened.Add(1)
		done.Go(func() { w.run(ctx, client, base+"/api/v1/pods", start.rv, opened.Done) })
	}
	openedCh := make(chan struct{})
	go func() { opened.Wait(); close(openedCh) }()
	select {
	case <-openedCh:
	case <-time.After(2 * time.Minute):
		cancel()
		done.Wait()
		t.Fatal("the watches did not all open within 2 minutes")
	}
	for i, w := range ws {
		if msg := w.failed(); msg != "" {
			cancel()
			done.Wait()
			t.Fatalf("watcher %d: %s", i, msg)
		}
	}
	ready := time.Now()
	t.Logf("BENCH the watchers' LIST (limit=500) took %s; %d watches open %s after it", listDone.Sub(listStart).Round(time.Millisecond),
		watchers, ready.Sub(listDone).Round(time.Millisecond))

	// The measured churn.
	cpu0 := cpuSeconds(t, api.cmd.Process.Pid)
	guard := guardRSS(t, api, int64(envInt("BENCH_FLEET_WATCH_MAX_RSS_MIB", 4096))<<20)
	stopRSS := sampleRSS(t, api.cmd.Process.Pid, time.Second)
	// Where the query API's CPU goes: a 30 s profile from the churn's first quarter on, kept
	// beside the report (go tool pprof -top bin/kubesearch <file>).
	profiled := make(chan struct{})
	go func() {
		defer close(profiled)
		out := os.Getenv("BENCH_FLEET_WATCH_OUT")
		if out == "" {
			return
		}
		select {
		case <-time.After(duration / 4):
		case <-ctx.Done():
			return
		}
		if err := os.MkdirAll(out, 0o755); err != nil {
			t.Errorf("profile: %v", err)
			return
		}
		prof := filepath.Join(out, "queryapi-cpu.pprof")
		resp, err := http.Get(base + "/debug/pprof/profile?seconds=30")
		if err != nil {
			t.Errorf("profile: %v", err)
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("%s: %.200s", resp.Status, body)
		}
		if err == nil {
			err = os.WriteFile(prof, body, 0o644)
		}
		if err != nil {
			t.Errorf("profile: %v", err)
			return
		}
		t.Logf("BENCH the query API's CPU profile of 30 s of the churn: %s", prof)
	}()
	select {
	case <-time.After(duration):
	case <-guard:
		t.Fatalf("the query API's resident memory passed BENCH_FLEET_WATCH_MAX_RSS_MIB during the churn: stopped with SIGQUIT (its goroutines are in its log below); %d watches at %d changes/s are more than this machine serves", watchers, rate)
	case <-t.Context().Done():
		t.Fatal("the test ended during the churn")
	}
	if err := sim.stop(30 * time.Second); err != nil {
		t.Errorf("the simulator stopped with %v", err) // it flushes what it made before exiting
	}
	churnEnd := time.Now()
	cpu := cpuSeconds(t, api.cmd.Process.Pid) - cpu0
	<-profiled

	// What was made, from the topic: per cluster, the events after its list's SYNC.
	changes, repeats := readChurn(t, env.KafkaBrokers, topic)
	var made, madeAfterList, madeInWindow int
	for _, cs := range changes {
		for _, c := range cs {
			made++
			if c.at.After(listDone) {
				madeAfterList++
			}
			if c.at.After(ready) && !c.at.After(churnEnd) {
				madeInWindow++
			}
		}
	}

	// Delivery is over once every watcher and the informer hold each cluster's last change as the
	// last event they got of it and nothing came for 5 s, or after 5 minutes (then the checks
	// below say what is missing). Counts alone would not do: a query API lagging by tens of
	// seconds can pause longer than any quiet period chosen.
	lastKey := make([]uint64, len(clusterIndex))
	hasLast := make([]bool, len(clusterIndex))
	for name, ci := range clusterIndex {
		if cs := changes[name]; len(cs) > 0 && cs[len(cs)-1].at.After(listDone) {
			lastKey[ci], hasLast[ci] = cs[len(cs)-1].key, true
		}
	}
	drainStart := time.Now()
	var last int64 = -1
	stableSince := time.Now()
	for time.Since(drainStart) < 5*time.Minute {
		var n int64
		behind := false
		for _, w := range ws {
			n += w.count()
			// A watcher that stopped gets nothing more: waiting for it is no use.
			behind = behind || (w.failed() == "" && !w.holdsLast(lastKey, hasLast))
		}
		n += inf.count()
		behind = behind || !inf.holdsLast(lastKey, hasLast)
		if n != last {
			last, stableSince = n, time.Now()
		} else if !behind && time.Since(stableSince) >= 5*time.Second {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	drained := stableSince.Sub(churnEnd)
	select {
	case <-guard:
		t.Fatalf("the query API's resident memory passed BENCH_FLEET_WATCH_MAX_RSS_MIB while it delivered the churn: stopped with SIGQUIT (its goroutines are in its log below)")
	default:
	}
	cpuAll := cpuSeconds(t, api.cmd.Process.Pid) - cpu0 // delivery goes on after the churn when the query API lags
	rss := stopRSS()
	cancel()
	done.Wait()
	inf.stop()

	// Every watcher against what was made.
	var latencies []time.Duration
	var delivered []int
	gaps, unexpected, reconnects, failures := 0, 0, 0, 0
	for i, w := range ws {
		r := w.check(changes, listDone, ready)
		latencies = append(latencies, r.latencies...)
		delivered = append(delivered, r.matched)
		reconnects += w.reconnects
		if r.missing > 0 || r.unexpected > 0 {
			t.Errorf("watcher %d: %d changes made after its LIST missing, %d events that are no change or a repeat (%s)", i, r.missing, r.unexpected, r.example)
		}
		gaps += r.missing
		unexpected += r.unexpected
		if msg := w.failed(); msg != "" {
			failures++
			t.Errorf("watcher %d: %s", i, msg)
		}
	}
	if len(latencies) == 0 {
		t.Fatal("no change made during the churn was delivered")
	}
	slices.Sort(latencies)
	slices.Sort(delivered)
	p50, p99, worst := latencies[len(latencies)/2], latencies[len(latencies)*99/100], latencies[len(latencies)-1]
	achieved := float64(madeInWindow) / churnEnd.Sub(ready).Seconds()
	t.Logf("BENCH churn: %d changes made in all (%d events published twice, counted once), %d after the watchers' LIST, %d in the %s measured (%.0f/s, asked %d/s); the last delivered %s after the churn ended",
		made, repeats, madeAfterList, madeInWindow, churnEnd.Sub(ready).Round(time.Second), achieved, rate, drained.Round(100*time.Millisecond))
	t.Logf("BENCH delivered per watcher: min %d, median %d, max %d events (changes after the LIST: %d; the ones made while the LIST was answered may or may not be in its position); %d gaps, %d unexpected, %d reconnects, %d watchers failed",
		delivered[0], delivered[len(delivered)/2], delivered[len(delivered)-1], madeAfterList, gaps, unexpected, reconnects, failures)
	t.Logf("BENCH watch delivery latency (change made in the simulator → line read by the watcher), %d (watcher, change) pairs: p50 %.1f ms, p99 %.1f ms, max %.1f ms",
		len(latencies), ms(p50), ms(p99), ms(worst))
	watchNote := fmt.Sprintf("%d watchers, churn %d/s asked, %.0f/s made, %s", watchers, rate, achieved, churnEnd.Sub(ready).Round(time.Second))
	add("churn achieved", achieved, "changes/s", watchNote)
	add("watch delivery p50 (change made → line read)", ms(p50), "ms", watchNote)
	add("watch delivery p99 (change made → line read)", ms(p99), "ms", watchNote)
	add("watch delivery max", ms(worst), "ms", watchNote)
	add("events delivered per watcher, min", float64(delivered[0]), "events", fmt.Sprintf("%s; %d changes made after the LIST", watchNote, madeAfterList))
	add("watch gaps (changes made after the LIST not delivered), all watchers", float64(gaps), "events", watchNote)

	// Sizes on the wire.
	var lines, lineBytes, bmLines, bmBytes int64
	minLine, maxLine := int64(-1), int64(0)
	eventRV, bookmarkRV := map[int]int{}, map[int]int{}
	for _, w := range ws {
		lines += w.eventLines
		lineBytes += w.eventBytes
		bmLines += w.bookmarkLines
		bmBytes += w.bookmarkBytes
		if minLine < 0 || w.minLine < minLine {
			minLine = w.minLine
		}
		maxLine = max(maxLine, w.maxLine)
		for n, c := range w.eventRV {
			eventRV[n] += c
		}
		for n, c := range w.bookmarkRV {
			bookmarkRV[n] += c
		}
	}
	evMin, evP50, evMax := lengthStats(eventRV)
	bmMin, bmP50, bmMax := lengthStats(bookmarkRV)
	t.Logf("BENCH event lines: %d, %.0f bytes each on average (min %d, max %d); bookmarks: %d, %.0f bytes each",
		lines, float64(lineBytes)/float64(max(lines, 1)), minLine, maxLine, bmLines, float64(bmBytes)/float64(max(bmLines, 1)))
	t.Logf("BENCH resourceVersion length: events min/p50/max %d/%d/%d bytes, bookmarks %d/%d/%d bytes (the LIST's %d)",
		evMin, evP50, evMax, bmMin, bmP50, bmMax, len(start.rv))
	add("bytes per event line", float64(lineBytes)/float64(max(lines, 1)), "bytes", fmt.Sprintf("%d lines; min %d, max %d", lines, minLine, maxLine))
	add("event resourceVersion, p50", float64(evP50), "bytes", fmt.Sprintf("min %d, max %d", evMin, evMax))
	add("bookmark resourceVersion, p50", float64(bmP50), "bytes", fmt.Sprintf("%d bookmarks; min %d, max %d", bmLines, bmMin, bmMax))

	// The query API during the churn.
	t.Logf("BENCH query API during the churn: %.1f CPU-seconds in %s (%.2f cores), %.1f until the last delivery; RSS %.0f MiB at the start, peak %.0f MiB, %.0f MiB at the end",
		cpu, churnEnd.Sub(ready).Round(time.Second), cpu/churnEnd.Sub(ready).Seconds(), cpuAll, rss[0].Value, peakOf(rss), rss[len(rss)-1].Value)
	add("query API CPU during the churn", cpu, "CPU-s", fmt.Sprintf("%s; %.2f cores; %.1f CPU-s until the last delivery", watchNote, cpu/churnEnd.Sub(ready).Seconds(), cpuAll))
	results = append(results, benchResult{Bench: "fleet-watch", What: "query API resident memory during the churn (VmRSS every 1 s), peak",
		Value: peakOf(rss), Unit: "MiB", Note: fmt.Sprintf("%s; %s; %.0f MiB at the start", note, watchNote, rss[0].Value), Series: rss})

	// Resume: from the resourceVersion of one of watcher 0's events, exactly the events it got after it.
	resumed, same := resumeCheck(t, client, base+"/api/v1/pods", ws[0].log)
	add("resumed watch: events after the resourceVersion", float64(resumed), "events", fmt.Sprintf("exactly the first watcher's after it, in order: %t", same))

	// The informer: every change after its sync, and in the end the objects a LIST shows.
	ir := inf.check(t, changes, base)
	add("informer (qualified view): changes received after its sync", float64(ir), "events", "")

	recordBench(t, results...)
	if out := os.Getenv("BENCH_FLEET_WATCH_OUT"); out != "" {
		writeFleetWatchReport(t, out, results, map[string]string{
			"clusters": strconv.Itoa(clusters), "objects per cluster": strconv.Itoa(objects), "Pods": strconv.FormatInt(listed.Simulation.Objects, 10),
			"watchers": strconv.Itoa(watchers), "churn": fmt.Sprintf("%d/s asked, %.0f/s made", rate, achieved),
			"measured": churnEnd.Sub(ready).Round(time.Second).String(),
		})
	}
}

// waitFleetCaughtUp waits until the query API's fleet status has every simulated pair Running, not
// listing, and indexed at least up to where the simulator was when its lists were acknowledged
// (the churn goes on, so "current" would never hold for long).
func waitFleetCaughtUp(t *testing.T, base string, st simStatus, timeout time.Duration) {
	t.Helper()
	want := map[string]int64{}
	for _, r := range st.Items {
		rv, err := strconv.ParseInt(r.ResourceVersion, 10, 64)
		if err != nil {
			t.Fatalf("simulator status row %s: resourceVersion %q", r.Cluster, r.ResourceVersion)
		}
		want[simPairKey(r.Cluster, r.Group, r.Resource)] = rv
	}
	var behind int
	// Every 2 s: the fleet status is a few MB at 1,000 clusters, and the query API is measured next.
	err := wait.PollUntilContextTimeout(t.Context(), 2*time.Second, timeout, true, func(context.Context) (bool, error) {
		var fleet queryapi.FleetStatus
		if err := json.Unmarshal(mustHTTP(t, http.MethodGet, base+queryapi.PathFleet, ""), &fleet); err != nil {
			return false, err
		}
		behind = len(want)
		for _, p := range fleet.Items {
			rv, ok := want[simPairKey(p.Cluster, p.Group, p.Resource)]
			if ok && p.State == registry.StateRunning && !p.Listing && p.IndexedResourceVersion >= rv {
				behind--
			}
		}
		return behind == 0, nil
	})
	if err != nil {
		t.Fatalf("the index did not catch up with the simulated lists within %s: %d of %d pairs behind (%v)", timeout, behind, len(want), err)
	}
}

// guardRSS watches the query API's resident memory until the test ends: past limit it sends
// SIGQUIT, which ends the process with every goroutine's stack in its log, and closes the channel
// returned. A measurement must not take the memory of a machine it shares.
func guardRSS(t *testing.T, p *process, limit int64) <-chan struct{} {
	t.Helper()
	tripped := make(chan struct{})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if rss, err := procStatus(p.cmd.Process.Pid, "VmRSS"); err == nil && rss > limit {
				_ = p.cmd.Process.Signal(syscall.SIGQUIT)
				close(tripped)
				return
			}
		}
	})
	t.Cleanup(func() {
		close(stop)
		wg.Wait()
	})
	return tripped
}

// fleetPage is what the benchmark keeps of a LIST.
type fleetPage struct {
	rv, cont     string
	items, bytes int
	took         time.Duration
}

func fleetList(t *testing.T, endpoint string) fleetPage {
	t.Helper()
	t0 := time.Now()
	body := mustHTTP(t, http.MethodGet, endpoint, "")
	took := time.Since(t0)
	meta := gjson.GetManyBytes(body, "metadata.resourceVersion", "metadata.continue", "items.#")
	if meta[0].Str == "" {
		t.Fatalf("GET %s: no resourceVersion", endpoint)
	}
	return fleetPage{rv: meta[0].Str, cont: meta[1].Str, items: int(meta[2].Int()), bytes: len(body), took: took}
}

// fleetRecord is one event a watcher read: which change it is (changeKey) and when it came.
type fleetRecord struct {
	cluster int32
	key     uint64
	at      int64 // Unix nanoseconds
}

// fleetLogged is an event of the watcher whose positions the resume check replays.
type fleetLogged struct {
	rv      string
	cluster int32
	key     uint64
}

// fleetWatcher is one raw HTTP watch of the fleet's Pods. Its goroutine owns it until run returns;
// the counters the test reads meanwhile go through mu.
type fleetWatcher struct {
	keepLog  bool
	clusters map[string]int32 // read-only

	mu      sync.Mutex
	records []fleetRecord
	last    map[int32]uint64 // per cluster, the key of the last event got
	failure string

	log                                                  []fleetLogged
	eventLines, eventBytes, bookmarkLines, bookmarkBytes int64
	minLine, maxLine                                     int64
	eventRV, bookmarkRV                                  map[int]int // resourceVersion length → count
	reconnects                                           int
}

func (w *fleetWatcher) fail(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failure = fmt.Sprintf(format, args...)
}

func (w *fleetWatcher) failed() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failure
}

// holdsLast says whether the last event got of each cluster with a wanted last key is that key.
func (w *fleetWatcher) holdsLast(want []uint64, has []bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return holdsLast(w.last, want, has)
}

func holdsLast(last map[int32]uint64, want []uint64, has []bool) bool {
	for c, k := range want {
		if has[c] && last[int32(c)] != k {
			return false
		}
	}
	return true
}

func (w *fleetWatcher) count() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return int64(len(w.records))
}

// run watches from rv until ctx ends, resuming where it was when the server ends the stream;
// opened is called once the first answer is 200 (or the watch failed).
func (w *fleetWatcher) run(ctx context.Context, client *http.Client, endpoint, rv string, opened func()) {
	var once sync.Once
	defer once.Do(opened)
	for attempt := 0; ctx.Err() == nil; attempt++ {
		if attempt > 0 {
			w.reconnects++
		}
		resp, err := openWatch(ctx, client, endpoint, rv)
		if err != nil {
			if ctx.Err() == nil {
				w.fail("%v", err)
			}
			return
		}
		once.Do(opened)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		for sc.Scan() {
			at := time.Now().UnixNano()
			line := sc.Bytes()
			ev := parseFleetEvent(line, w.clusters)
			n := int64(len(line)) + 1 // the newline
			switch ev.typ {
			case "BOOKMARK":
				w.bookmarkLines++
				w.bookmarkBytes += n
				w.bookmarkRV[len(ev.rv)]++
				rv = ev.rv
				continue
			case "ERROR":
				resp.Body.Close()
				w.fail("ERROR event: %s", line)
				return
			}
			if ev.cluster < 0 {
				resp.Body.Close()
				w.fail("an event of no simulated cluster: %.300s", line)
				return
			}
			rv = ev.rv
			w.eventLines++
			w.eventBytes += n
			if w.minLine == 0 || n < w.minLine {
				w.minLine = n
			}
			w.maxLine = max(w.maxLine, n)
			w.eventRV[len(ev.rv)]++
			if w.keepLog {
				w.log = append(w.log, fleetLogged{rv: ev.rv, cluster: ev.cluster, key: ev.key})
			}
			w.mu.Lock()
			w.records = append(w.records, fleetRecord{cluster: ev.cluster, key: ev.key, at: at})
			w.last[ev.cluster] = ev.key
			w.mu.Unlock()
		}
		resp.Body.Close()
		// The stream ended (the server's timeout, or ctx): resume from the last position.
	}
}

func openWatch(ctx context.Context, client *http.Client, endpoint, rv string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"?watch=1&allowWatchBookmarks=true&resourceVersion="+url.QueryEscape(rv), nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("watch from a resourceVersion of %d bytes: %s %s", len(rv), resp.Status, body)
	}
	return resp, nil
}

// fleetEvent is what the benchmark reads of a watch event line.
type fleetEvent struct {
	typ, rv string
	cluster int32 // -1: not a simulated cluster's
	key     uint64
}

var fleetEventPaths = []string{"type", "object.metadata.resourceVersion",
	"object.metadata.annotations." + gjson.Escape(document.CachedFromClusterAnnotation),
	"object.metadata.namespace", "object.metadata.name", "object.metadata.uid", "object.status.containerStatuses.0.restartCount"}

func parseFleetEvent(line []byte, clusters map[string]int32) fleetEvent {
	f := gjson.GetManyBytes(line, fleetEventPaths...)
	ev := fleetEvent{typ: f[0].Str, rv: f[1].Str, cluster: -1}
	if c, ok := clusters[f[2].Str]; ok {
		ev.cluster = c
	}
	ev.key = changeKey(f[3].Str, f[4].Str, f[5].Str, ev.typ == "DELETED", f[6].Int())
	return ev
}

// changeKey names a change of a simulated Pod by what the watch shows of it: the simulator's update
// of a Pod adds a restart to its first container, a delete carries the last state. Pods without
// container statuses (Pending, evicted) change only their resourceVersion, which the fleet views
// replace by the watch's position, so two updates of one of them have one key: the checks compare
// sequences, where that still counts right.
func changeKey(namespace, name, uid string, deleted bool, restarts int64) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%t\x00%d", namespace, name, uid, deleted, restarts)
	return h.Sum64()
}

// fleetChange is a change the simulator made, as read back from the topic.
type fleetChange struct {
	key uint64
	at  time.Time // the envelope's changedAt: when the simulator made it
}

// readChurn reads the topic from its start and returns, per simulated cluster, the changes its
// churn made (the events after its list's SYNC marker) in the order published: a cluster's Pods
// are one key, hence one partition. Publishing is at least once: a batch the producer sent again
// (Kafka slow to acknowledge) repeats its events, which are one change each (a cluster's changes
// have distinct resourceVersions); it returns how many repeats it dropped.
func readChurn(t *testing.T, brokers []string, topic string) (map[string][]fleetChange, int) {
	t.Helper()
	out := map[string][]fleetChange{}
	synced := map[string]bool{}
	seen := map[string]bool{} // cluster, type, name and resourceVersion
	repeats := 0
	for p := range topicPartitions {
		conn, err := kafka.DialLeader(t.Context(), "tcp", brokers[0], topic, p)
		if err != nil {
			t.Fatalf("read %s partition %d: %v", topic, p, err)
		}
		last, err := conn.ReadLastOffset()
		if err != nil {
			t.Fatalf("read %s partition %d: %v", topic, p, err)
		}
		for next := int64(0); next < last; {
			if _, err := conn.Seek(next, kafka.SeekAbsolute); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			batch := conn.ReadBatch(1, 16<<20)
			for {
				m, err := batch.ReadMessage()
				if err != nil {
					break
				}
				if m.Offset < next {
					continue
				}
				next = m.Offset + 1
				ev, err := envelope.Unmarshal(m.Value)
				if err != nil {
					t.Fatalf("%s partition %d offset %d: %v", topic, p, m.Offset, err)
				}
				switch ev.Type {
				case envelope.Sync:
					synced[ev.Cluster] = true
				case envelope.Added, envelope.Modified, envelope.Deleted:
					k := ev.Cluster + "/" + string(ev.Type) + "/" + ev.Name + "/" + ev.ResourceVersion
					if seen[k] {
						repeats++
						continue
					}
					seen[k] = true
					if synced[ev.Cluster] {
						restarts := gjson.GetBytes(ev.Object, "status.containerStatuses.0.restartCount").Int()
						out[ev.Cluster] = append(out[ev.Cluster], fleetChange{
							key: changeKey(ev.Namespace, ev.Name, ev.UID, ev.Type == envelope.Deleted, restarts), at: ev.ChangedAt})
					}
				}
			}
			if err := batch.Close(); err != nil && !errors.Is(err, io.EOF) {
				t.Fatalf("read %s partition %d: %v", topic, p, err)
			}
		}
		conn.Close()
	}
	return out, repeats
}

// fleetCheck is one client's events held against the changes made.
type fleetCheck struct {
	matched, missing, unexpected int
	latencies                    []time.Duration // of the changes made after from
	example                      string          // the first problem
}

// checkDelivery holds one client's events, per cluster in the order received, against each
// cluster's changes. A watch from a LIST's position gets each cluster's changes after that
// position, once and in order: a suffix of the cluster's changes, which must hold every change
// made after the LIST answered (made after boundary). It walks both from their ends: a change not
// received is missing when it is one that must be there; an event left over is no change, or a
// repeat. Latencies are taken for the changes made after from.
func checkDelivery(byCluster map[int32][]fleetRecord, names []string, changes map[string][]fleetChange, boundary, from time.Time) fleetCheck {
	var r fleetCheck
	for ci, name := range names {
		got, want := byCluster[int32(ci)], changes[name]
		required := len(want)
		for i, c := range want {
			if c.at.After(boundary) {
				required = i
				break
			}
		}
		i, j := len(got)-1, len(want)-1
		for i >= 0 && j >= 0 {
			if got[i].key == want[j].key {
				r.matched++
				if want[j].at.After(from) {
					r.latencies = append(r.latencies, time.Unix(0, got[i].at).Sub(want[j].at))
				}
				i--
				j--
				continue
			}
			if j >= required {
				r.missing++
				if r.example == "" {
					r.example = fmt.Sprintf("%s: change %d of %d (made %s) not received", name, j+1, len(want), want[j].at.Format(time.RFC3339Nano))
				}
			}
			j--
		}
		for ; j >= required; j-- {
			r.missing++
			if r.example == "" {
				r.example = fmt.Sprintf("%s: change %d of %d (made %s) not received", name, j+1, len(want), want[j].at.Format(time.RFC3339Nano))
			}
		}
		if i >= 0 {
			r.unexpected += i + 1
			if r.example == "" {
				r.example = fmt.Sprintf("%s: %d events before its first expected change", name, i+1)
			}
		}
	}
	return r
}

func (w *fleetWatcher) check(changes map[string][]fleetChange, boundary, from time.Time) fleetCheck {
	names := make([]string, len(w.clusters))
	for n, i := range w.clusters {
		names[i] = n
	}
	byCluster := map[int32][]fleetRecord{}
	for _, r := range w.records {
		byCluster[r.cluster] = append(byCluster[r.cluster], r)
	}
	return checkDelivery(byCluster, names, changes, boundary, from)
}

// lengthStats is min, median and max of a histogram of lengths.
func lengthStats(h map[int]int) (lo, mid, hi int) {
	var all []int
	total := 0
	for n, c := range h {
		all = append(all, n)
		total += c
	}
	if total == 0 {
		return 0, 0, 0
	}
	slices.Sort(all)
	seen := 0
	mid = all[len(all)-1]
	for _, n := range all {
		if seen += h[n]; seen > total/2 {
			mid = n
			break
		}
	}
	return all[0], mid, all[len(all)-1]
}

// resumeCheck opens a watch from the resourceVersion of the event in the middle of a watcher's
// log and requires exactly the events the watcher got after it: the same changes, in the same
// order, without a 410. It returns how many it got, and whether they were those.
func resumeCheck(t *testing.T, client *http.Client, endpoint string, log []fleetLogged) (int, bool) {
	t.Helper()
	if len(log) < 2 {
		t.Errorf("resume: the first watcher got %d events; nothing to resume from", len(log))
		return 0, false
	}
	m := len(log) / 2
	want := log[m+1:]
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	resp, err := openWatch(ctx, client, endpoint, log[m].rv)
	if err != nil {
		t.Errorf("resume from event %d of %d: %v", m+1, len(log), err)
		return 0, false
	}
	defer resp.Body.Close()
	var got []uint64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	// Past the events expected, the first bookmark (every 10 s) says the watch has nothing more:
	// an event before it is one too many.
	for sc.Scan() {
		ev := parseFleetEvent(sc.Bytes(), nil)
		if ev.typ == "ERROR" {
			t.Errorf("resume from event %d of %d: %s", m+1, len(log), sc.Bytes())
			return len(got), false
		}
		if ev.typ == "BOOKMARK" {
			if len(got) >= len(want) {
				break
			}
			continue
		}
		got = append(got, ev.key) // a change's key holds its Pod's uid: no two clusters share one
	}
	same := len(got) == len(want)
	for i := 0; same && i < len(got); i++ {
		same = got[i] == want[i].key
	}
	t.Logf("BENCH resume from the resourceVersion of event %d of %d (%d bytes): %d events, the first watcher got %d after it; the same, in order: %t",
		m+1, len(log), len(log[m].rv), len(got), len(want), same)
	if !same {
		t.Errorf("a watch resumed from event %d of %d got %d events, not the %d the first watcher got after it (or not in its order)", m+1, len(log), len(got), len(want))
	}
	return len(got), same
}

// fleetInformer is a client-go informer of the qualified view's Pods, recording each change it
// is told of after its sync.
type fleetInformer struct {
	clusters map[string]int32
	factory  dynamicinformer.DynamicSharedInformerFactory
	informer cache.SharedIndexInformer
	stopCh   chan struct{}
	synced   time.Time

	mu      sync.Mutex
	records []fleetRecord
	last    map[int32]uint64
	foreign atomic.Int64 // objects of no simulated cluster
}

func startFleetInformer(t *testing.T, ctx context.Context, base string, clusters map[string]int32) *fleetInformer {
	t.Helper()
	f := &fleetInformer{clusters: clusters, last: map[int32]uint64{}, stopCh: make(chan struct{})}
	f.factory = dynamicinformer.NewDynamicSharedInformerFactory(dynamic.NewForConfigOrDie(facadeConfig(base, "/qualified")), 0)
	f.informer = f.factory.ForResource(gvrPods).Informer()
	var syncedFlag atomic.Bool
	record := func(obj any, deleted bool) {
		if !syncedFlag.Load() {
			return // the initial list: no change
		}
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		at := time.Now().UnixNano()
		cluster := u.GetAnnotations()[document.CachedFromClusterAnnotation]
		ci, ok := f.clusters[cluster]
		if !ok {
			f.foreign.Add(1)
			return
		}
		var restarts int64
		if sts, _, _ := unstructured.NestedSlice(u.Object, "status", "containerStatuses"); len(sts) > 0 {
			if st, ok := sts[0].(map[string]any); ok {
				restarts, _, _ = unstructured.NestedInt64(st, "restartCount")
			}
		}
		name := strings.TrimSuffix(u.GetName(), "_"+cluster) // the qualified view's name_cluster
		k := changeKey(u.GetNamespace(), name, string(u.GetUID()), deleted, restarts)
		f.mu.Lock()
		f.records = append(f.records, fleetRecord{cluster: ci, key: k, at: at})
		f.last[ci] = k
		f.mu.Unlock()
	}
	reg, err := f.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { record(obj, false) },
		UpdateFunc: func(_, obj any) { record(obj, false) },
		DeleteFunc: func(obj any) { record(obj, true) },
	})
	if err != nil {
		t.Fatal(err)
	}
	f.factory.Start(f.stopCh)
	// The handler's own sync: the initial list has been handed to it (the informer's HasSynced
	// comes before that). Recording starts before the time taken as the boundary, so a change made
	// after the boundary cannot be handed out unrecorded.
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		t.Fatal("the informer of the qualified view never synced")
	}
	syncedFlag.Store(true)
	f.synced = time.Now()
	t.Logf("BENCH informer of the qualified view synced with %d Pods", len(f.informer.GetStore().ListKeys()))
	return f
}

func (f *fleetInformer) holdsLast(want []uint64, has []bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return holdsLast(f.last, want, has)
}

func (f *fleetInformer) count() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return int64(len(f.records))
}

func (f *fleetInformer) stop() {
	close(f.stopCh)
	f.factory.Shutdown()
}

// check holds the informer's changes against those made after its sync, and its store against a
// LIST of the qualified view.
func (f *fleetInformer) check(t *testing.T, changes map[string][]fleetChange, base string) int {
	t.Helper()
	names := make([]string, len(f.clusters))
	for n, i := range f.clusters {
		names[i] = n
	}
	byCluster := map[int32][]fleetRecord{}
	f.mu.Lock()
	for _, r := range f.records {
		byCluster[r.cluster] = append(byCluster[r.cluster], r)
	}
	f.mu.Unlock()
	r := checkDelivery(byCluster, names, changes, f.synced, f.synced)
	slices.Sort(r.latencies)
	p50, p99 := time.Duration(0), time.Duration(0)
	if n := len(r.latencies); n > 0 {
		p50, p99 = r.latencies[n/2], r.latencies[n*99/100]
	}
	t.Logf("BENCH informer (qualified view): %d changes received after its sync, %d missing, %d unexpected, %d of no simulated cluster; latency p50 %.1f ms, p99 %.1f ms",
		r.matched, r.missing, r.unexpected, f.foreign.Load(), ms(p50), ms(p99))
	if r.missing > 0 || r.unexpected > 0 {
		t.Errorf("informer: %d changes missing, %d unexpected (%s)", r.missing, r.unexpected, r.example)
	}
	body := mustHTTP(t, http.MethodGet, base+"/qualified/api/v1/pods", "")
	var listed []string
	for _, n := range gjson.GetBytes(body, "items.#.metadata.name").Array() {
		listed = append(listed, n.Str)
	}
	var stored []string
	for _, k := range f.informer.GetStore().ListKeys() {
		stored = append(stored, k[strings.IndexByte(k, '/')+1:])
	}
	slices.Sort(listed)
	slices.Sort(stored)
	if !slices.Equal(listed, stored) {
		t.Errorf("the informer holds %d Pods, a LIST of the qualified view %d, and they differ", len(stored), len(listed))
	}
	return r.matched
}

// decimals is how many a figure is written with: whole numbers as they are, others to 3 significant
// digits or one decimal, whichever is more.
func decimals(v float64) int {
	switch {
	case v == float64(int64(v)):
		return 0
	case v >= 100:
		return 1
	case v >= 10:
		return 2
	}
	return 3
}

// writeFleetWatchReport writes the figures to dir as report.md and results.json.
func writeFleetWatchReport(t *testing.T, dir string, results []benchResult, params map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var md strings.Builder
	fmt.Fprintf(&md, "# Fleet-view watches at fleet scale (TestBenchFleetWatch)\n\n`make bench-fleet-watch`, %s.\n\n", time.Now().UTC().Format(time.RFC3339))
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&md, "- %s: %s\n", k, params[k])
	}
	md.WriteString("\n| what | figure | unit | note |\n|---|---:|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&md, "| %s | %s | %s | %s |\n", r.What, strconv.FormatFloat(r.Value, 'f', decimals(r.Value), 64), r.Unit, r.Note)
	}
	writeFile(t, filepath.Join(dir, "report.md"), md.String())
	var js strings.Builder
	enc := json.NewEncoder(&js)
	for _, r := range results {
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(dir, "results.json"), js.String())
	t.Logf("BENCH report written to %s", dir)
}
