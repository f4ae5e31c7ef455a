package soak

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// series builds readings every 15 s for an hour from f(t) (t in seconds) plus noise of ± noise,
// with a fixed seed: the same series every run.
func series(f func(t float64) float64, noise float64) []Sample {
	r := rand.New(rand.NewPCG(1, 2))
	var out []Sample
	for at := 0.0; at <= 3600; at += 15 {
		out = append(out, Sample{At: at, Value: f(at) + (r.Float64()*2-1)*noise})
	}
	return out
}

func TestRuleJudge(t *testing.T) {
	memory := Rule{Relative: 0.2, Floor: 32}
	lag := Rule{Relative: 0.2, Floor: 200, Drain: true}
	for _, tc := range []struct {
		name    string
		rule    Rule
		samples []Sample
		ok      bool
		why     string
	}{
		// A resident set that fills its caches in ten minutes, then stays within ± 12 MiB (a GC
		// cycle), must pass; the same base with a leak of 3 MiB a minute must fail.
		{"memory levelled off after warm-up", memory, series(func(t float64) float64 { return 200 + 100*math.Min(t/600, 1) }, 12), true, "levelled off"},
		{"memory leaking 3 MiB a minute", memory, series(func(t float64) float64 { return 200 + 100*math.Min(t/600, 1) + 3*t/60 }, 12), false, "grew"},
		// Goroutines that step up once in the second quarter (a watcher more) by fewer than the
		// floor pass; a goroutine per request left behind does not.
		{"goroutines stepping up once", Rule{Relative: 0.2, Floor: 25}, series(func(t float64) float64 { return 60 + 10*math.Min(math.Floor(t/1200), 1) }, 3), true, "levelled off"},
		{"goroutines leaking one a minute", Rule{Relative: 0.2, Floor: 25}, series(func(t float64) float64 { return 60 + t/60 }, 3), false, "grew"},
		// A lag that hovers near zero passes; one that grows without bound fails both ways; one
		// that stays at a high plateau has not grown but never drains, and fails.
		{"lag hovering near zero", lag, series(func(float64) float64 { return 40 }, 40), true, "levelled off"},
		{"lag falling behind", lag, series(func(t float64) float64 { return 5 * t }, 40), false, "grew"},
		{"lag stuck high", lag, series(func(float64) float64 { return 5000 }, 40), false, "never back"},
		// A relative growth under the floor is noise: 10 → 14 is 40% but 4 contexts.
		{"small series under the floor", Rule{Relative: 0.2, Floor: 20}, series(func(t float64) float64 { return 10 + 4*t/3600 }, 1), true, "levelled off"},
		// Shrinking is never growth.
		{"memory returned to the system", memory, series(func(t float64) float64 { return 400 - t/30 }, 5), true, "levelled off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := tc.rule.Judge(tc.samples)
			if err != nil {
				t.Fatal(err)
			}
			if v.OK != tc.ok || !strings.Contains(v.Why, tc.why) {
				t.Errorf("OK %v (%s), want %v (%s); baseline %.1f, final %.1f, growth %.1f, allowed %.1f",
					v.OK, v.Why, tc.ok, tc.why, v.Baseline, v.Final, v.Growth, v.Limit)
			}
		})
	}
}

// The rule's arithmetic on a series small enough to follow by hand: 8 readings, quarters of two.
func TestRuleJudgeFigures(t *testing.T) {
	var s []Sample
	for i, v := range []float64{5, 9, 10, 12, 11, 13, 40, 44} {
		s = append(s, Sample{At: float64(i), Value: v})
	}
	v, err := Rule{Relative: 0.2, Floor: 20}.Judge(s)
	if err != nil {
		t.Fatal(err)
	}
	// The quarters' middles are 2.5 s and 6.5 s apart: 20 in 4 s is 300 a minute.
	want := Verdict{Start: 5, Peak: 44, End: 44, Baseline: 11, Final: 42, Growth: 31, Limit: 20, LastMin: 40, Sensitivity: 300}
	v.OK, v.Why = false, ""
	if v != want {
		t.Errorf("got %+v, want %+v", v, want)
	}
}

func TestRuleJudgeTooShort(t *testing.T) {
	_, err := Rule{Relative: 0.2, Floor: 1}.Judge(make([]Sample, MinSamples-1))
	if !errors.Is(err, ErrTooShort) {
		t.Errorf("err %v, want ErrTooShort", err)
	}
}

// Write puts the readings, one plot per group and a table naming every series with its verdict in
// the folder; a failed series says FAILED in both.
func TestRunWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "soak")
	run := Run{Started: time.Date(2026, 12, 2, 15, 0, 0, 0, time.UTC), Duration: time.Hour, Interval: 15 * time.Second,
		Load: []string{"churn: 20 changes/s"}, Series: []Series{
			{Name: "queryapi RSS", Group: "rss", Unit: "MiB", Rule: Rule{Relative: 0.2, Floor: 32},
				Samples: series(func(t float64) float64 { return 100 + t/30 }, 1)},
			{Name: "indexer RSS", Group: "rss", Unit: "MiB", Rule: Rule{Relative: 0.2, Floor: 32},
				Samples: series(func(float64) float64 { return 80 }, 2)},
			{Name: "lag", Group: "lag", Unit: "events", Rule: Rule{Relative: 0.2, Floor: 200, Drain: true},
				Samples: series(func(float64) float64 { return 10 }, 5)},
		}}
	judged, err := run.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !judged[0].Failed() || judged[1].Failed() || judged[2].Failed() {
		t.Errorf("verdicts %v %v %v, want the leaking RSS alone failed", judged[0].Verdict, judged[1].Verdict, judged[2].Verdict)
	}
	md, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| queryapi RSS | MiB | 100 |", "**FAILED**: grew", "| indexer RSS | MiB |", "ok: levelled off",
		"1 of the 3 series failed", "![rss](rss.svg)", "![lag](lag.svg)", "- churn: 20 changes/s"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("README.md lacks %q:\n%s", want, md)
		}
	}
	svg, err := os.ReadFile(filepath.Join(dir, "rss.svg"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(svg), "<polyline"); n != 2 || !strings.Contains(string(svg), "FAILED") {
		t.Errorf("rss.svg: %d lines (want 2) and FAILED in the legend: %v", n, strings.Contains(string(svg), "FAILED"))
	}
	if _, err := os.Stat(filepath.Join(dir, "samples.json")); err != nil {
		t.Error(err)
	}
}
