package soak

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Run is a soak run's readings and what produced them.
type Run struct {
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration"` // of the load, warm-up included
	Interval time.Duration `json:"interval"` // between two readings
	Commit   string        `json:"commit,omitempty"`
	Load     []string      `json:"load"`           // one line per kind of load, for the report
	Done     []string      `json:"done,omitempty"` // what the load did: counts of operations, failures
	Series   []Series      `json:"series"`
}

// Judged is a series with its verdict; Err is set instead when it could not be judged.
type Judged struct {
	Series
	Verdict Verdict
	Err     error
}

// Failed says whether the series failed its rule or could not be judged.
func (j Judged) Failed() bool { return j.Err != nil || !j.Verdict.OK }

// Judge applies every series' rule.
func (r Run) Judge() []Judged {
	out := make([]Judged, len(r.Series))
	for i, s := range r.Series {
		out[i].Series = s
		out[i].Verdict, out[i].Err = s.Rule.Judge(s.Samples)
	}
	return out
}

// Write judges the run and writes into dir: samples.json (the readings, to judge or plot again),
// one SVG plot per group of series, and README.md (the load, the rule, a table of every series
// with its verdict, the plots).
func (r Run) Write(dir string) ([]Judged, error) {
	judged := r.Judge()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return judged, fmt.Errorf("soak report: %w", err)
	}
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return judged, fmt.Errorf("soak report: %w", err)
	}
	files := map[string][]byte{"samples.json": append(raw, '\n')}
	var plots []string
	for _, g := range groups(judged) {
		name := g[0].Group + ".svg"
		files[name] = Plot(plotTitle(g), g)
		plots = append(plots, name)
	}
	files["README.md"] = r.markdown(judged, plots)
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return judged, fmt.Errorf("soak report: %w", err)
		}
	}
	return judged, nil
}

// groups are the judged series by Group, in the order each group first appears.
func groups(judged []Judged) [][]Judged {
	var out [][]Judged
	index := map[string]int{}
	for _, j := range judged {
		i, ok := index[j.Group]
		if !ok {
			i = len(out)
			index[j.Group] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], j)
	}
	return out
}

func plotTitle(g []Judged) string {
	if len(g) == 1 {
		return g[0].Name + " (" + g[0].Unit + ")"
	}
	return g[0].Group + " (" + g[0].Unit + ")"
}

func (r Run) markdown(judged []Judged, plots []string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Soak run of %s\n\n", r.Started.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "%s of load, a reading every %s", r.Duration.Round(time.Second), r.Interval)
	if r.Commit != "" {
		fmt.Fprintf(&b, ", commit %s", r.Commit)
	}
	b.WriteString(". The load, all at once for the whole run:\n\n")
	for _, l := range r.Load {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	if len(r.Done) > 0 {
		b.WriteString("\nWhat it did:\n\n")
		for _, l := range r.Done {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	b.WriteString("\nThe rule (bench/soak): the first quarter of the readings is warm-up; a series fails when the mean of " +
		"the last quarter exceeds the mean of the second by more than max(relative × that mean, floor); a lag must also " +
		"come back to the floor or below at least once in the last quarter. \"Slowest leak failed\" is the steady growth per minute " +
		"that would just exceed what is allowed over this run's length: a slower one passes unseen.\n\n")
	b.WriteString("| series | unit | start | peak | end | 2nd quarter | last quarter | growth | allowed | slowest leak failed | verdict |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	failed := 0
	for _, j := range judged {
		if j.Err != nil {
			failed++
			fmt.Fprintf(&b, "| %s | %s | | | | | | | | | **not judged**: %s |\n", j.Name, j.Unit, j.Err)
			continue
		}
		v := j.Verdict
		allowed := fmt.Sprintf("%s (%.0f%%, floor %s)", Format(v.Limit), j.Rule.Relative*100, Format(j.Rule.Floor))
		verdict := "ok: " + v.Why
		if !v.OK {
			failed++
			verdict = "**FAILED**: " + v.Why
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s/min | %s |\n", j.Name, j.Unit, Format(v.Start), Format(v.Peak),
			Format(v.End), Format(v.Baseline), Format(v.Final), signed(v.Growth), allowed, Format(v.Sensitivity), verdict)
	}
	if failed == 0 {
		fmt.Fprintf(&b, "\nEvery one of the %d series levelled off.\n", len(judged))
	} else {
		fmt.Fprintf(&b, "\n%d of the %d series failed.\n", failed, len(judged))
	}
	if len(plots) > 0 {
		b.WriteString("\nThe shaded bands are the quarters the rule compares.\n\n")
		for _, p := range plots {
			fmt.Fprintf(&b, "![%s](%s)\n", strings.TrimSuffix(p, ".svg"), p)
		}
	}
	return b.Bytes()
}

func signed(v float64) string {
	if v > 0 {
		return "+" + Format(v)
	}
	return Format(v)
}
