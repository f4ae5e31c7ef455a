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
// BENCH_FLEET_CLUSTERS (100) clusters of BENCH_FLEET_OBJECTS (1,000) objects each, and
// BENCH_FLEET_INDEXERS (1) indexers in one group write them into the test bed's OpenSearch. It
// reports the time until every watermark is current (every simulated pair Running, not listing,
// indexed up to its SYNC's resourceVersion, with the simulator's count of documents: the query API's
// fleet status), the indexers' CPU time, and OpenSearch's refreshes, indexing and refresh time
// meanwhile. It asserts only that the index ends equal to the simulation. BENCH_BINARY measures
// another build of kubesearch (an A/B of a change).
func TestBenchFleetIngest(t *testing.T) {
	buildFlags = nil // measure the binary users run, not a race-detector build
	if b := os.Getenv("BENCH_BINARY"); b != "" {
		binOnce.Do(func() { binPath = b })
	}
	kubesearchBinary(t)
	env := testbed.Get(t)
	clusters, objects, indexers := envInt("BENCH_FLEET_CLUSTERS", 100), envInt("BENCH_FLEET_OBJECTS", 1000), envInt("BENCH_FLEET_INDEXERS", 1)
	topic, prefix := uniqueName("fleet"), uniqueName("fleet")
	tailTopic(t, env.KafkaBrokers, topic) // creates the topic
	t.Cleanup(func() {
		req, _ := http.NewRequest(http.MethodDelete, env.OpenSearchURL+"/"+prefix+"-*", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})

	simAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	published := time.Now()
	_, st := startSimulator(t, env, topic, simAddr, "--clusters", strconv.Itoa(clusters), "--objects", strconv.Itoa(objects), "--seed", "1")
	r := st.Simulation
	t.Logf("published %d clusters × %d objects: %d objects, %d pairs, %.0f MiB in %s (%.0f events/s)",
		clusters, objects, r.Objects, len(st.Items), float64(r.Bytes)/(1<<20), time.Since(published).Round(100*time.Millisecond), r.ListEventsPerSecond)

	refreshes := func() (n int64, ms int64, indexMs int64) {
		body := mustHTTP(t, http.MethodGet, env.OpenSearchURL+"/"+prefix+"-*/_stats/refresh,indexing", "")
		return gjson.GetBytes(body, "_all.primaries.refresh.total").Int(), gjson.GetBytes(body, "_all.primaries.refresh.total_time_in_millis").Int(),
			gjson.GetBytes(body, "_all.primaries.indexing.index_time_in_millis").Int()
	}
	start := time.Now()
	var procs []*process
	for range indexers {
		addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		procs = append(procs, startProcess(t, "indexer", "indexer", "--kafka-brokers", strings.Join(env.KafkaBrokers, ","),
			"--topic", topic, "--group", topic+"-indexer", "--opensearch-addresses", env.OpenSearchURL, "--index-prefix", prefix,
			"--listen", addr))
	}
	qaddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startProcess(t, "queryapi", "queryapi", "--anonymous", "--listen", qaddr, "--opensearch-addresses", env.OpenSearchURL,
		"--index-prefix", prefix, "--collector-status-urls", "http://"+simAddr+"/status",
		"--kafka-brokers", strings.Join(env.KafkaBrokers, ","), "--topic", topic, "--indexer-group", topic+"-indexer",
		"--poll-interval", "1s")
	base := "http://" + qaddr
	waitHTTP(t, base+"/readyz", 5*time.Minute)
	waitFleetMatches(t, base, st.Items, nil, 60*time.Minute)
	took := time.Since(start)
	n, refreshMs, indexMs := refreshes()
	var cpu []string
	for _, p := range procs {
		cpu = append(cpu, fmt.Sprintf("%.1f s", cpuSeconds(t, p.cmd.Process.Pid)))
	}
	t.Logf("cold ingest of %d objects in %d pairs with %d indexer(s): every watermark current after %s (%.0f objects/s); indexer CPU %s; "+
		"OpenSearch: %d refreshes (%.1f s), index_time %.1f s",
		r.Objects, len(st.Items), indexers, took.Round(100*time.Millisecond), float64(r.Objects)/took.Seconds(), strings.Join(cpu, ", "),
		n, float64(refreshMs)/1000, float64(indexMs)/1000)
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
