//go:build e2e && soak

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kubesearch/kubesearch/bench/soak"
	"github.com/kubesearch/kubesearch/internal/stream"
	"github.com/kubesearch/kubesearch/queryapi"
	"github.com/kubesearch/kubesearch/tests/testbed"
)

// TestSoak runs a pipeline (collector, indexer, query API) over the three members for SOAK_MINUTES
// (default 60) under steady churn, REST searches, facade LISTs and watchers, reads every
// SOAK_SAMPLE (default 15s) the resident memory, heap and goroutines of each process, the open
// point-in-times on the pipeline's indices and the indexer group's Kafka lag, and fails when a
// series does not level off (bench/soak's rule). The report goes to SOAK_OUT (default
// bench/results/<date>-soak). SOAK_RATE is the churn in changes per second over all members
// (default 20); SOAK_WATCH_WINDOW the query API's --watch-window (see below). `make soak` runs it.
func TestSoak(t *testing.T) {
	buildFlags = nil // soak the binary users run: the race detector's shadow memory would be most of the RSS
	env := testbed.Get(t)
	duration := time.Duration(soakInt(t, "SOAK_MINUTES", 60)) * time.Minute
	interval := soakDuration(t, "SOAK_SAMPLE", 15*time.Second)
	rate := soakInt(t, "SOAK_RATE", 20)
	if n := int(duration / interval); n < soak.MinSamples {
		t.Fatalf("SOAK_MINUTES=%s with SOAK_SAMPLE=%s gives %d readings; the rule needs at least %d", duration, interval, n, soak.MinSamples)
	}

	ns := uniqueName("soak")
	clients := map[string]kubernetes.Interface{}
	for _, cluster := range env.Clusters {
		cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, cluster))
		clients[cluster] = cs
		createNamespace(t, cs, ns)
		// A fixed population beside the churn, so selectors, facets and pages have something to walk.
		if err := createConfigMaps(cs, cluster, []string{ns}, soakSeed); err != nil {
			t.Fatalf("%s: seed: %v", cluster, err)
		}
	}
	t.Cleanup(func() {
		for _, cs := range clients {
			_ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		}
	})

	p := startIngest(t, env, queryCorpus{namespaces: []string{ns}}.registries(t))
	apiAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	// The query API's watch window holds the newest events up to a bound (default 100,000 events or
	// 512 MiB): at 20 changes/s it fills for 83 minutes, growth by design that a run of an hour
	// would report as a leak. SOAK_WATCH_WINDOW (default: the events of an eighth of the run) has
	// it fill during warm-up, so what is judged is everything else. The rest are the defaults.
	window := soakInt(t, "SOAK_WATCH_WINDOW", max(1000, rate*int(duration.Seconds())/8))
	api := p.startQueryAPIAt(t, apiAddr, "--watch-window", strconv.Itoa(window))
	p.base = "http://" + apiAddr
	pollUntil(t, "the seed searchable", 5*time.Minute, func(ctx context.Context) (bool, error) {
		a := get(t, p.base, queryapi.PathSearch, url.Values{"namespaces": {ns}, "resources": {"configmaps"}, "limit": {"1"}})
		return a.code == http.StatusOK && a.result.Total >= int64(soakSeed*len(env.Clusters)), nil
	})

	procs := []soakProc{
		{name: "collector", proc: p.collector, metrics: strings.TrimSuffix(p.collectorStatus, "/status") + "/metrics"},
		{name: "indexer", proc: p.indexer, metrics: p.indexerBase + "/metrics"},
		{name: "queryapi", proc: api, metrics: p.base + "/metrics"},
	}
	kafka := stream.NewClient(env.KafkaBrokers, stream.Connection{}, nil)
	defer kafka.Close()

	ctx, cancel := context.WithTimeout(t.Context(), duration)
	defer cancel()
	l := &soakLoad{t: t, env: env, base: p.base, ns: ns, clients: clients}
	var wg sync.WaitGroup
	l.start(ctx, &wg, rate)
	series := sampleSoak(ctx, t, interval, procs, env.OpenSearchURL+"/"+p.prefix+"-*/_stats/search", kafka, p.topic, p.topic+"-indexer")
	wg.Wait()

	for _, pr := range procs {
		select {
		case <-pr.proc.done:
			t.Errorf("%s exited during the soak: %v", pr.name, pr.proc.err)
		default:
		}
	}
	ops := l.report()
	for _, line := range ops {
		t.Log("soak: " + line)
	}
	l.check()

	run := soak.Run{Started: time.Now().Add(-duration), Duration: duration, Interval: interval, Commit: gitCommit(), Series: series,
		Load: []string{
			fmt.Sprintf("churn: %d changes/s over the %d members (ConfigMaps and Pods created, patched twice, deleted with no grace; about %d ConfigMaps and %d Pods each at any time), beside %d seeded ConfigMaps per member",
				rate, len(env.Clusters), soakChurnConfigMaps*3/4, soakChurnPods*3/4, soakSeed),
			"REST: 2 pollers walking every page of a label selector's answer (limit 50, continue tokens), 2 asking for the first page only (limit 20) and never for page two, 1 asking for facets",
			"facade: 1 lister of full and paged (limit 50, continue) LISTs of ConfigMaps and Pods, fleet-wide and of one member",
			fmt.Sprintf("the query API at its defaults but for its watch window: %d events (--watch-window; SOAK_WATCH_WINDOW)", window),
			"watchers: client-go informers through the facade (qualified ConfigMaps and Pods, member2's ConfigMaps), 4 raw watches of ConfigMaps that end (timeoutSeconds or the client hanging up) and resume from their last resourceVersion",
		}, Done: ops}
	dir := os.Getenv("SOAK_OUT")
	if dir == "" {
		dir = filepath.Join(testbed.Root(), "bench", "results", run.Started.UTC().Format("2006-01-02-1504")+"-soak")
	}
	judged, err := run.Write(dir)
	if err != nil {
		t.Error(err)
	}
	for _, j := range judged {
		switch {
		case j.Err != nil:
			t.Errorf("%s: %v", j.Name, j.Err)
		case !j.Verdict.OK:
			t.Errorf("%s (%s): %s; start %s, 2nd quarter %s, last quarter %s, peak %s", j.Name, j.Unit, j.Verdict.Why,
				soak.Format(j.Verdict.Start), soak.Format(j.Verdict.Baseline), soak.Format(j.Verdict.Final), soak.Format(j.Verdict.Peak))
		default:
			t.Logf("SOAK %s (%s): start %s, peak %s, end %s, 2nd quarter %s, last quarter %s: %s", j.Name, j.Unit, soak.Format(j.Verdict.Start),
				soak.Format(j.Verdict.Peak), soak.Format(j.Verdict.End), soak.Format(j.Verdict.Baseline), soak.Format(j.Verdict.Final), j.Verdict.Why)
		}
	}
	t.Logf("soak report: %s", dir)
}

const (
	soakSeed            = 300 // ConfigMaps per member that stay
	soakChurnConfigMaps = 120 // churned ConfigMap names per member
	soakChurnPods       = 40  // churned Pod names per member
)

// The rules of the series (bench/soak.Rule). Floors: 32 MiB is well above what a garbage
// collection cycle moves a resident set of these processes by, and below a leak of a few KiB per
// request over an hour of this load; 25 goroutines is more than the requests in flight at once
// (ten load workers) hold, and fewer than one left behind a minute adds in an hour; 20
// point-in-time contexts is a few seconds of the first-page-only pollers (their PITs live for the
// page keep-alive, 1m by default); 200 events is 10 s of churn.
var (
	memoryRule    = soak.Rule{Relative: 0.2, Floor: 32}
	goroutineRule = soak.Rule{Relative: 0.2, Floor: 25}
	pitRule       = soak.Rule{Relative: 0.2, Floor: 20}
	lagRule       = soak.Rule{Relative: 0.2, Floor: 200, Drain: true}
)

type soakProc struct {
	name    string
	proc    *process
	metrics string
}

// sampleSoak takes a reading of every series now and every interval until ctx ends. A reading that
// fails is left out of its series and logged: a process that died is reported after the run.
func sampleSoak(ctx context.Context, t *testing.T, interval time.Duration, procs []soakProc, pitStats string,
	kafka *stream.Client, topic, group string) []soak.Series {
	var series []soak.Series
	add := func(name, group, unit string, rule soak.Rule) int {
		series = append(series, soak.Series{Name: name, Group: group, Unit: unit, Rule: rule})
		return len(series) - 1
	}
	type procSeries struct{ rss, heap, goroutines int }
	ps := make([]procSeries, len(procs))
	for i, pr := range procs {
		ps[i] = procSeries{
			rss:        add(pr.name+" RSS", "rss", "MiB", memoryRule),
			heap:       add(pr.name+" heap in use", "heap", "MiB", memoryRule),
			goroutines: add(pr.name+" goroutines", "goroutines", "goroutines", goroutineRule),
		}
	}
	pits := add("open point-in-time contexts on the pipeline's indices", "pits", "contexts", pitRule)
	lag := add("indexer group's Kafka lag", "lag", "events", lagRule)

	start := time.Now()
	record := func(i int, v float64) {
		series[i].Samples = append(series[i].Samples, soak.Sample{At: time.Since(start).Seconds(), Value: v})
	}
	failures := 0
	failed := func(what string, err error) {
		failures++
		if failures <= 20 {
			t.Logf("soak: reading %s: %v", what, err)
		}
	}
	read := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), interval)
		defer cancel()
		for i, pr := range procs {
			if rss, err := soakRSS(pr.proc.cmd.Process.Pid); err != nil {
				failed(pr.name+" RSS", err)
			} else {
				record(ps[i].rss, float64(rss)/(1<<20))
			}
			text, err := getText(rctx, pr.metrics)
			if err != nil {
				failed(pr.name+" metrics", err)
				continue
			}
			record(ps[i].heap, metricValue(text, "go_memstats_heap_inuse_bytes")/(1<<20))
			record(ps[i].goroutines, metricValue(text, "go_goroutines"))
		}
		if text, err := getText(rctx, pitStats); err != nil {
			failed("point-in-times", err)
		} else {
			record(pits, gjson.Get(text, "_all.total.search.point_in_time_current").Float())
		}
		if n, err := kafkaLag(rctx, kafka, topic, group); err != nil {
			failed("lag", err)
		} else {
			record(lag, float64(n))
		}
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		read()
		select {
		case <-ctx.Done():
			if failures > 0 {
				t.Logf("soak: %d readings failed and are left out", failures)
			}
			return series
		case <-tick.C:
		}
	}
}

// kafkaLag is what the group has not committed yet, over the topic's partitions.
func kafkaLag(ctx context.Context, c *stream.Client, topic, group string) (int64, error) {
	ends, err := c.HighWaterMarks(ctx, topic)
	if err != nil {
		return 0, err
	}
	committed, err := c.CommittedOffsets(ctx, group, topic)
	if err != nil {
		return 0, err
	}
	spans, err := c.Spans(ctx, topic)
	if err != nil {
		return 0, err
	}
	var lag int64
	for p, end := range ends {
		from, ok := committed[p]
		if !ok || from < 0 {
			from = spans[p].First // nothing committed: all the partition holds is to read
		}
		lag += max(end-from, 0)
	}
	return lag, nil
}

func getText(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %.200s", url, resp.Status, body)
	}
	return string(body), nil
}

// soakLoad is the load of a soak: churn in every member, REST pollers, facade listers and watchers,
// each counting what it did and what failed.
type soakLoad struct {
	t       *testing.T
	env     *testbed.Env
	base    string
	ns      string
	clients map[string]kubernetes.Interface

	mu     sync.Mutex
	counts map[string]*soakCount
}

type soakCount struct{ ok, failed atomic.Int64 }

// count is the counter of a kind of operation.
func (l *soakLoad) count(kind string) *soakCount {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.counts == nil {
		l.counts = map[string]*soakCount{}
	}
	if l.counts[kind] == nil {
		l.counts[kind] = &soakCount{}
	}
	return l.counts[kind]
}

// did counts an operation, and logs the first failures of each kind: a failure ended by the end of
// the run (ctx done) is not one.
func (l *soakLoad) did(ctx context.Context, kind string, err error) {
	c := l.count(kind)
	switch {
	case err == nil:
		c.ok.Add(1)
	case ctx.Err() != nil, ending(ctx):
	default:
		if n := c.failed.Add(1); n <= 3 {
			l.t.Logf("soak: %s: %v", kind, err)
		}
	}
}

func (l *soakLoad) report() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, kind := range soakKinds {
		if c := l.counts[kind]; c != nil {
			out = append(out, fmt.Sprintf("%s: %d done, %d failed", kind, c.ok.Load(), c.failed.Load()))
		}
	}
	return out
}

var soakKinds = []string{"member changes", "searches walked to the last page", "search pages", "first pages left open",
	"facet searches", "facade LISTs", "facade LIST pages", "informer events", "raw watch connections", "raw watch events"}

// check fails the test when an operation failed more than once in a hundred: a soak that degrades
// into errors has not held.
func (l *soakLoad) check() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for kind, c := range l.counts {
		if ok, failed := c.ok.Load(), c.failed.Load(); failed*100 > ok+failed {
			l.t.Errorf("%s: %d of %d failed", kind, failed, ok+failed)
		}
	}
	for _, kind := range []string{"member changes", "search pages", "first pages left open", "facet searches", "facade LISTs", "informer events", "raw watch events"} {
		if c := l.counts[kind]; c == nil || c.ok.Load() == 0 {
			l.t.Errorf("%s: none done; the soak did not load what it reports", kind)
		}
	}
}

// start starts every part of the load, each until ctx ends, owned by wg.
func (l *soakLoad) start(ctx context.Context, wg *sync.WaitGroup, rate int) {
	every := time.Duration(len(l.env.Clusters)) * time.Second / time.Duration(rate)
	for _, cluster := range l.env.Clusters {
		wg.Go(func() { l.churn(ctx, cluster, every) })
	}
	selectors := []string{"app.kubernetes.io/name in (web,db)", "env!=prod", "tier", "team.example.com/owner=team-1", "churn.kubesearch.io/step"}
	for i := range 2 {
		wg.Go(func() { l.walk(ctx, selectors[i:], 50, 2*time.Second) })
		wg.Go(func() { l.firstPages(ctx, selectors[i+1:], 20, time.Second) })
	}
	wg.Go(func() { l.facets(ctx, 2*time.Second) })
	wg.Go(func() { l.lists(ctx, 2*time.Second) })
	l.informers(ctx, wg)
	for i := range 4 {
		wg.Go(func() { l.rawWatch(ctx, time.Duration(10+10*i)*time.Second) })
	}
}

// churn creates, patches twice and deletes ConfigMaps and Pods in one member, one change every
// `every`: each name goes round absent → created → patched → patched → deleted, names visited in
// turn, so about three quarters of them exist at any time and the population stays the same.
func (l *soakLoad) churn(ctx context.Context, cluster string, every time.Duration) {
	cms, pods := l.clients[cluster].CoreV1().ConfigMaps(l.ns), l.clients[cluster].CoreV1().Pods(l.ns)
	step := map[string]int{}
	tick := time.NewTicker(every)
	defer tick.Stop()
	grace := int64(0) // a Pod on a node with no kubelet would otherwise stay Terminating
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		// Three changes in four on ConfigMaps, one on Pods.
		var name string
		pod := n%4 == 3
		if pod {
			name = fmt.Sprintf("churn-pod-%03d", (n/4)%soakChurnPods)
		} else {
			name = fmt.Sprintf("churn-cm-%03d", (n-n/4)%soakChurnConfigMaps)
		}
		var err error
		switch s := step[name]; s {
		case 0:
			if pod {
				p := benchPod(l.ns, n)
				p.Name = name
				p.Labels["churn.kubesearch.io/step"] = "0"
				_, err = pods.Create(ctx, p, metav1.CreateOptions{})
			} else {
				cm := corpusConfigMap(cluster, l.ns, n)
				cm.Name = name
				cm.Labels["churn.kubesearch.io/step"] = "0"
				_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
			}
		case 1, 2:
			patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{"churn.kubesearch.io/step":"%d"},"annotations":{"churn.kubesearch.io/at":%q}}}`,
				s, time.Now().UTC().Format(time.RFC3339Nano)))
			if pod {
				_, err = pods.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
			} else {
				_, err = cms.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
			}
		case 3:
			if pod {
				err = pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
			} else {
				err = cms.Delete(ctx, name, metav1.DeleteOptions{})
			}
		}
		if err == nil {
			step[name] = (step[name] + 1) % 4
		}
		l.did(ctx, "member changes", err)
	}
}

// search is one page of a search.
func (l *soakLoad) search(ctx context.Context, params url.Values) (queryapi.SearchResult, error) {
	var res queryapi.SearchResult
	text, err := getText(ctx, l.base+queryapi.PathSearch+"?"+params.Encode())
	if err != nil {
		return res, err
	}
	return res, json.Unmarshal([]byte(text), &res)
}

// walk asks for every page of a selector's answer, selectors in turn, pausing between answers.
func (l *soakLoad) walk(ctx context.Context, selectors []string, limit int, every time.Duration) {
	for i := 0; pause(ctx, every); i++ {
		params := url.Values{"namespaces": {l.ns}, "labelSelector": {selectors[i%len(selectors)]}, "limit": {strconv.Itoa(limit)}}
		err := func() error {
			for {
				res, err := l.search(ctx, params)
				l.did(ctx, "search pages", err)
				if err != nil || res.Metadata.Continue == "" {
					return err
				}
				params.Set("continue", res.Metadata.Continue)
			}
		}()
		l.did(ctx, "searches walked to the last page", err)
	}
}

// firstPages asks for first pages and never for the next: each leaves a point-in-time open until
// its keep-alive ends.
func (l *soakLoad) firstPages(ctx context.Context, selectors []string, limit int, every time.Duration) {
	for i := 0; pause(ctx, every); i++ {
		_, err := l.search(ctx, url.Values{"namespaces": {l.ns}, "labelSelector": {selectors[i%len(selectors)]}, "limit": {strconv.Itoa(limit)}})
		l.did(ctx, "first pages left open", err)
	}
}

func (l *soakLoad) facets(ctx context.Context, every time.Duration) {
	for pause(ctx, every) {
		_, err := l.search(ctx, url.Values{"namespaces": {l.ns}, "limit": {"1"}, "facets": {"cluster,namespace,label:app.kubernetes.io/name,labels"}})
		l.did(ctx, "facet searches", err)
	}
}

// lists are the facade's LISTs, full and paged, of the fleet and of one member.
func (l *soakLoad) lists(ctx context.Context, every time.Duration) {
	paths := []string{"/api/v1/namespaces/" + l.ns + "/configmaps", "/api/v1/namespaces/" + l.ns + "/pods",
		"/clusters/member1/api/v1/namespaces/" + l.ns + "/configmaps", "/qualified/api/v1/namespaces/" + l.ns + "/configmaps"}
	for i := 0; pause(ctx, every); i++ {
		path := paths[i%len(paths)]
		limit := ""
		if i%2 == 1 {
			limit = "50"
		}
		err := func() error {
			cont := ""
			for {
				q := url.Values{}
				if limit != "" {
					q.Set("limit", limit)
				}
				if cont != "" {
					q.Set("continue", cont)
				}
				text, err := getText(ctx, l.base+path+"?"+q.Encode())
				l.did(ctx, "facade LIST pages", err)
				if err != nil {
					return err
				}
				if cont = gjson.Get(text, "metadata.continue").String(); cont == "" {
					return nil
				}
			}
		}()
		l.did(ctx, "facade LISTs", err)
	}
}

// informers run client-go informers through the facade until ctx ends, counting their events.
func (l *soakLoad) informers(ctx context.Context, wg *sync.WaitGroup) {
	count := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { l.did(ctx, "informer events", nil) },
		UpdateFunc: func(any, any) { l.did(ctx, "informer events", nil) },
		DeleteFunc: func(any) { l.did(ctx, "informer events", nil) },
	}
	for _, view := range []string{"/qualified", "/clusters/member2"} {
		factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dynamic.NewForConfigOrDie(facadeConfig(l.base, view)), 0, l.ns, nil)
		if _, err := factory.ForResource(gvrConfigMaps).Informer().AddEventHandler(count); err != nil {
			l.t.Fatal(err)
		}
		if view == "/qualified" {
			if _, err := factory.ForResource(gvrPods).Informer().AddEventHandler(count); err != nil {
				l.t.Fatal(err)
			}
		}
		factory.Start(ctx.Done())
		wg.Go(factory.Shutdown) // waits for the informers, which end with ctx
	}
}

// rawWatch watches the fleet's ConfigMaps over plain HTTP: each connection ends, by the server's
// timeoutSeconds or the client hanging up, and the next resumes from the last resourceVersion seen;
// an expired one (410 or an ERROR event) starts again from a LIST.
func (l *soakLoad) rawWatch(ctx context.Context, lifetime time.Duration) {
	path := l.base + "/api/v1/namespaces/" + l.ns + "/configmaps"
	rv := ""
	for i := 0; ctx.Err() == nil; i++ {
		if rv == "" {
			text, err := getText(ctx, path+"?limit=1")
			if err != nil {
				l.did(ctx, "raw watch connections", err)
				pause(ctx, time.Second)
				continue
			}
			rv = gjson.Get(text, "metadata.resourceVersion").String()
		}
		q := url.Values{"watch": {"1"}, "resourceVersion": {rv}, "allowWatchBookmarks": {"true"}}
		cctx, cancel := context.WithCancel(ctx)
		if i%2 == 0 {
			q.Set("timeoutSeconds", strconv.Itoa(int(lifetime.Seconds())))
		} else {
			cctx, cancel = context.WithTimeout(ctx, lifetime+time.Duration(rand.IntN(5000))*time.Millisecond)
		}
		next, err := l.watchOnce(cctx, path+"?"+q.Encode())
		cancel()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = nil // the client hung up, as planned
		}
		l.did(ctx, "raw watch connections", err)
		rv = next
	}
}

// watchOnce reads one watch connection to its end and returns the resourceVersion to resume from,
// "" to list again.
func (l *soakLoad) watchOnce(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusGone {
		return "", nil
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return "", fmt.Errorf("watch: %s: %.200s", resp.Status, body)
	}
	rv := ""
	dec := json.NewDecoder(resp.Body)
	for {
		var e watchEvent
		if err := dec.Decode(&e); err != nil {
			if errors.Is(err, io.EOF) {
				return rv, nil
			}
			if ctx.Err() != nil {
				return rv, ctx.Err()
			}
			return rv, err
		}
		if e.Type == "ERROR" {
			return "", nil // expired: list again
		}
		if v := gjson.GetBytes(e.Object, "metadata.resourceVersion").String(); v != "" {
			rv = v
		}
		if e.Type != "BOOKMARK" {
			l.did(ctx, "raw watch events", nil)
		}
	}
}

// ending says whether ctx ends within a second: client-go's rate limiter refuses a wait that would
// outlast the deadline before the deadline comes.
func ending(ctx context.Context) bool {
	deadline, ok := ctx.Deadline()
	return ok && time.Until(deadline) < time.Second
}

// pause waits d, and says whether ctx is still going.
func pause(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// soakRSS is a process's resident set (VmRSS of /proc/<pid>/status) in bytes.
func soakRSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

func soakInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive whole number", name, v)
	}
	return n
}

func soakDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a duration such as 15s", name, v)
	}
	return d
}

func gitCommit() string {
	cmd := exec.Command("git", "rev-parse", "--short", "HEAD")
	cmd.Dir = testbed.Root()
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
