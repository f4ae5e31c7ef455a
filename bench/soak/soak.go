// Package soak judges and reports a soak run (make soak, tests/e2e's TestSoak): series of readings
// taken at a fixed interval while churn, queries and watchers run for a bounded time — resident
// memory, heap and goroutines of every kubesearch process, OpenSearch's open point-in-times, the
// indexer's Kafka lag — each judged by one rule (Rule.Judge), and written as a Markdown table and
// SVG plots.
//
// It leaves out producing the load and taking the readings (the soak test does both) and keeps no
// state between runs: a run is judged on its own readings, not against an earlier run's.
package soak

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// Sample is one reading of a series.
type Sample struct {
	At    float64 `json:"at"`    // seconds since the sampling started
	Value float64 `json:"value"` // in the series' unit
}

// Series is one figure over the run, e.g. the query API's resident memory.
type Series struct {
	Name    string   `json:"name"`  // e.g. "queryapi RSS"
	Group   string   `json:"group"` // the plot it is drawn in, e.g. "rss"
	Unit    string   `json:"unit"`  // MiB, goroutines, contexts, events
	Rule    Rule     `json:"rule"`
	Samples []Sample `json:"samples"`
}

// Rule says how much a series may grow and still count as levelled off.
//
// The run is cut into quarters by sample count. The first quarter is warm-up (caches filling,
// the first point-in-times, the informers' lists) and is not judged. The baseline is the mean of
// the second quarter, the final level the mean of the last; a series fails when
//
//	final − baseline > max(Relative × baseline, Floor)
//
// A leak grows in proportion to time, so it adds the same amount between the second and the last
// quarter whatever the run's length, while a series that levels off during warm-up adds only noise.
// Means over a quarter, not single readings, keep one garbage-collection cycle or one burst of
// pages from deciding. The floor keeps small series (ten goroutines becoming thirteen) from failing
// on a relative change nobody would call growth, and states the smallest leak a run of this length
// is able to see.
//
// Drain adds a condition for a series that must come back to about zero (a consumer's lag): at
// least one reading of the last quarter is at most Floor. A consumer that keeps up has such
// moments at any load it sustains; one that falls behind has none.
type Rule struct {
	Relative float64 `json:"relative"` // e.g. 0.2 for 20%
	Floor    float64 `json:"floor"`    // in the series' unit
	Drain    bool    `json:"drain,omitempty"`
}

// MinSamples is the fewest readings Judge accepts: two per quarter.
const MinSamples = 8

// ErrTooShort is Judge's error for a series of fewer than MinSamples readings: with fewer, a
// quarter's mean is one reading and the rule would judge noise.
var ErrTooShort = errors.New("soak: too few samples to judge (at least 8: make the run longer or the sampling interval shorter)")

// Verdict is a series judged by its rule.
type Verdict struct {
	Start, Peak, End float64 // the first, highest and last reading
	Baseline, Final  float64 // means of the second and of the last quarter
	Growth           float64 // Final − Baseline
	Limit            float64 // the growth the rule allows
	LastMin          float64 // the lowest reading of the last quarter
	// Sensitivity is the slowest steady growth, per minute, that this run would fail: Limit over
	// the time between the middles of the two quarters. A shorter run sees only faster leaks.
	Sensitivity float64
	OK          bool
	Why         string // what failed, or "levelled off"
}

// Judge applies the rule to a series.
func (r Rule) Judge(samples []Sample) (Verdict, error) {
	n := len(samples)
	if n < MinSamples {
		return Verdict{}, fmt.Errorf("%w: %d", ErrTooShort, n)
	}
	values := make([]float64, n)
	for i, s := range samples {
		values[i] = s.Value
	}
	q := n / 4
	second, last := values[q:2*q], values[n-q:]
	v := Verdict{Start: values[0], Peak: slices.Max(values), End: values[n-1],
		Baseline: mean(second), Final: mean(last), LastMin: slices.Min(last)}
	v.Growth = v.Final - v.Baseline
	v.Limit = math.Max(r.Relative*math.Abs(v.Baseline), r.Floor)
	if apart := (mid(samples[n-q:]) - mid(samples[q:2*q])) / 60; apart > 0 {
		v.Sensitivity = v.Limit / apart
	}
	v.OK, v.Why = true, "levelled off"
	if v.Growth > v.Limit {
		v.OK, v.Why = false, fmt.Sprintf("grew %s from the second quarter to the last, more than the %s allowed",
			Format(v.Growth), Format(v.Limit))
	}
	if r.Drain && v.LastMin > r.Floor {
		why := fmt.Sprintf("never back to %s or less in the last quarter (lowest %s)", Format(r.Floor), Format(v.LastMin))
		if v.OK {
			v.Why = why
		} else {
			v.Why += "; " + why
		}
		v.OK = false
	}
	return v, nil
}

// mid is the middle of a window's time.
func mid(s []Sample) float64 { return (s[0].At + s[len(s)-1].At) / 2 }

func mean(xs []float64) float64 {
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// Format prints a figure with as many decimals as its size needs: 1234, 56.7, 0.42.
func Format(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100 || a == math.Trunc(a):
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}
