//go:build e2e && bench

package e2e

import (
	"encoding/json"
	"os"
	"sync"
	"testing"
)

// benchResult is one figure of a benchmark, as `make bench` collects them: every benchmark test
// records its figures with recordBench, and bench/report turns the lines into the results file,
// the table beside the goals, the plots and the README's section.
type benchResult struct {
	Bench string  `json:"bench"` // the benchmark: collector, indexer, query, facade, freshness, ...
	What  string  `json:"what"`  // what was measured, e.g. "selector p99"
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`           // objects/s, docs/s, ms, s, MiB, ratio
	Goal  string  `json:"goal,omitempty"` // the goal, e.g. "≤ 100 ms"
	Met   *bool   `json:"met,omitempty"`  // nil when there is no goal
	Note  string  `json:"note,omitempty"` // context: sizes, the machine's state
}

// met is a goal's verdict for benchResult.Met.
func met(ok bool) *bool { return &ok }

var benchOut sync.Mutex

// recordBench appends results as JSON lines to $BENCH_RESULTS, when set (make bench sets it), and
// logs them; a benchmark run by hand just logs.
func recordBench(t *testing.T, results ...benchResult) {
	t.Helper()
	for _, r := range results {
		t.Logf("BENCH %s: %s = %g %s (goal %s)", r.Bench, r.What, r.Value, r.Unit, r.Goal)
	}
	path := os.Getenv("BENCH_RESULTS")
	if path == "" {
		return
	}
	benchOut.Lock()
	defer benchOut.Unlock()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatalf("bench results: %v", err)
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	for _, r := range results {
		if err := enc.Encode(r); err != nil {
			t.Fatalf("bench results: %v", err)
		}
	}
}
