//go:build e2e && bench

package e2e

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/tests/testbed"
)

// TestBenchFleetIngest measures a fleet's cold ingest (issue 25 item 2): the simulator publishes
// BENCH_FLEET_CLUSTERS (100) clusters of BENCH_FLEET_OBJECTS (1,000) objects each once, then for each
// count in BENCH_FLEET_INDEXERS (1; "1,2,3" at SCALE=fleet) that many indexers in a group of their own
// write the topic from its start into an index of their own. It reports the time until every
// watermark is current (every simulated pair Running, not listing, indexed up to its SYNC's
// resourceVersion, with the simulator's count of documents: the query API's fleet status), the rate
// per indexer, the indexers' and OpenSearch's CPU time, and OpenSearch's refreshes meanwhile. It
// asserts only that the index ends equal to the simulation. Then, on the first count's index, a
// fresh query API's figures (benchFleetServe: time to ready and memory, fleet status and discovery,
// queries through the REST search and the facade, LISTs; BENCH_FLEET_QUERY=0 leaves them out).
// BENCH_BINARY measures another build of kubesearch (an A/B of a change).
func TestBenchFleetIngest(t *testing.T) {
	buildFlags = nil // measure the binary users run, not a race-detector build
	if b := os.Getenv("BENCH_BINARY"); b != "" {
		binOnce.Do(func() { binPath = b })
	}
	kubesearchBinary(t)
	env := testbed.Get(t)
	clusters, objects := envInt("BENCH_FLEET_CLUSTERS", 100), envInt("BENCH_FLEET_OBJECTS", 1000)
	counts := []int{1}
	if v := os.Getenv("BENCH_FLEET_INDEXERS"); v != "" {
		counts = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				t.Fatalf("BENCH_FLEET_INDEXERS: %q is not a list of counts", v)
			}
			counts = append(counts, n)
		}
	}
	topic := uniqueName("fleet")
	tailTopic(t, env.KafkaBrokers, topic) // creates the topic

	simAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	published := time.Now()
	_, st := startSimulator(t, env, topic, simAddr, "--clusters", strconv.Itoa(clusters), "--objects", strconv.Itoa(objects), "--seed", "1")
	r := st.Simulation
	size := fmt.Sprintf("%d clusters × %d objects (%d objects, %d pairs)", clusters, objects, r.Objects, len(st.Items))
	t.Logf("published %s, %.0f MiB in %s (%.0f events/s)", size, float64(r.Bytes)/(1<<20),
		time.Since(published).Round(100*time.Millisecond), r.ListEventsPerSecond)

	for i, n := range counts {
		t.Run(fmt.Sprintf("%d indexers", n), func(t *testing.T) {
			prefix := uniqueName("fleet")
			t.Cleanup(func() {
				req, _ := http.NewRequest(http.MethodDelete, env.OpenSearchURL+"/"+prefix+"-*", nil)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			})
			group := prefix + "-indexer"
			osCPU := openSearchCPU(t, env)
			start := time.Now()
			var procs []*process
			for range n {
				addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
				procs = append(procs, startProcess(t, "indexer", "indexer", "--kafka-brokers", strings.Join(env.KafkaBrokers, ","),
					"--topic", topic, "--group", group, "--opensearch-addresses", env.OpenSearchURL, "--index-prefix", prefix,
					"--listen", addr))
			}
			fleet := fleetIndex{env: env, topic: topic, group: group, prefix: prefix, simBase: "http://" + simAddr, sim: st,
				clusters: clusters, objects: objects}
			qaddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
			api := startProcess(t, "queryapi", fleet.queryAPIArgs(qaddr, "--anonymous")...)
			base := "http://" + qaddr
			waitHTTP(t, base+"/readyz", 30*time.Minute)
			waitFleetMatches(t, base, st.Items, nil, 6*time.Hour)
			took := time.Since(start)
			var cpu float64
			for _, p := range procs {
				cpu += cpuSeconds(t, p.cmd.Process.Pid)
			}
			osCPU = openSearchCPU(t, env) - osCPU
			body := mustHTTP(t, http.MethodGet, env.OpenSearchURL+"/"+prefix+"-*/_stats/refresh,indexing", "")
			refreshes := gjson.GetBytes(body, "_all.primaries.refresh.total").Float()
			refreshSecs := gjson.GetBytes(body, "_all.primaries.refresh.total_time_in_millis").Float() / 1000
			note := fmt.Sprintf("%s, %d indexer(s)", size, n)
			rate := float64(r.Objects) / took.Seconds()
			recordBench(t,
				benchResult{Bench: "fleet", What: fmt.Sprintf("cold ingest, %d indexer(s): every watermark current", n), Value: took.Seconds(), Unit: "s", Note: note},
				benchResult{Bench: "fleet", What: fmt.Sprintf("cold ingest, %d indexer(s): objects/s per indexer", n), Value: rate / float64(n), Unit: "objects/s", Note: note},
				benchResult{Bench: "fleet", What: fmt.Sprintf("cold ingest, %d indexer(s): indexers' CPU", n), Value: cpu, Unit: "s", Note: note},
				benchResult{Bench: "fleet", What: fmt.Sprintf("cold ingest, %d indexer(s): OpenSearch's CPU", n), Value: osCPU, Unit: "s", Note: note},
				benchResult{Bench: "fleet", What: fmt.Sprintf("cold ingest, %d indexer(s): OpenSearch refreshes", n), Value: refreshes, Unit: "refreshes",
					Note: fmt.Sprintf("%s; %.1f s refreshing", note, refreshSecs)},
			)
			// The query figures, on the first count's index, by a query API of their own: recorded
			// before a later count's ingest can fail or hang (two indexers in one group left pairs
			// listing at a 50-cluster trial), and the data is the same in every count's index.
			if i == 0 && os.Getenv("BENCH_FLEET_QUERY") != "0" {
				_ = api.stop(30 * time.Second)
				benchFleetServe(t, fleet)
			}
		})
	}
}

// openSearchCPU is the CPU time the test bed's OpenSearch nodes used so far, in seconds.
func openSearchCPU(t *testing.T, env *testbed.Env) float64 {
	t.Helper()
	body := mustHTTP(t, http.MethodGet, env.OpenSearchURL+"/_nodes/stats/process", "")
	var ms int64
	for _, n := range gjson.GetBytes(body, "nodes.@values").Array() {
		ms += n.Get("process.cpu.total_in_millis").Int()
	}
	return float64(ms) / 1000
}

// cpuSeconds is the user and system CPU time process pid used so far (/proc/PID/stat fields 14, 15).
func cpuSeconds(t *testing.T, pid int) float64 {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndex(s, ") ")+2:])
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100 // USER_HZ
}
