//go:build e2e && bench

package e2e

import (
	"encoding/json"
	"os"
	"sync"
	"testing"
	"time"
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
	// Series is the figure over time, for a plot of it; Value is then a summary of it (the peak).
	Series []benchSample `json:"series,omitempty"`
}

// benchSample is one reading of a benchResult's Series.
type benchSample struct {
	At    float64 `json:"at"`    // seconds since the sampling started
	Value float64 `json:"value"` // in the result's Unit
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

// sampleRSS reads the resident set (VmRSS) of process pid every `every`, from now until stop, which
// takes a last reading so the series covers the whole phase, and returns the readings in MiB.
// A reading that fails (the process is gone) ends the sampling and fails the test: a series with a
// silent gap would plot a load that was not measured.
func sampleRSS(t *testing.T, pid int, every time.Duration) (stop func() []benchSample) {
	t.Helper()
	start := time.Now()
	var samples []benchSample
	var err error
	read := func() bool {
		var rss int64
		if rss, err = procStatus(pid, "VmRSS"); err != nil {
			return false
		}
		samples = append(samples, benchSample{At: time.Since(start).Seconds(), Value: float64(rss) / (1 << 20)})
		return true
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for read() {
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	halt := sync.OnceFunc(func() {
		close(done)
		wg.Wait() // samples and err are the goroutine's until here
	})
	t.Cleanup(halt) // a test that fails before stop
	return func() []benchSample {
		t.Helper()
		halt()
		if err == nil {
			read() // the end of the phase
		}
		if err != nil {
			t.Errorf("sample the RSS of process %d: %v", pid, err)
		}
		return samples
	}
}

// peakOf is the largest value of a series, for its benchResult's Value.
func peakOf(series []benchSample) float64 {
	peak := 0.0
	for _, s := range series {
		peak = max(peak, s.Value)
	}
	return peak
}
