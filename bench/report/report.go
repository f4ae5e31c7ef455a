package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// dateLayout names a run's files: minutes, so two runs of a day both stay.
const dateLayout = "2006-01-02-1504"

// Result is one figure, as tests/e2e's recordBench writes it.
type Result struct {
	Bench string  `json:"bench"`
	What  string  `json:"what"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	Goal  string  `json:"goal,omitempty"`
	Met   *bool   `json:"met,omitempty"`
	Note  string  `json:"note,omitempty"`
	// Series is the figure over time (Value is then its summary, the peak), for a line chart.
	Series []Sample `json:"series,omitempty"`
}

// Sample is one reading of a Result's Series.
type Sample struct {
	At    float64 `json:"at"`    // seconds since the sampling started
	Value float64 `json:"value"` // in the Result's unit
}

// Step is one benchmark of the run as bench/run.sh saw it: ok, failed or skipped (no such test).
type Step struct {
	Bench   string  `json:"bench"`
	Status  string  `json:"status"`
	Seconds float64 `json:"seconds"`
}

// Machine is what the figures were measured on.
type Machine struct {
	CPUs   int    `json:"cpus"`
	CPU    string `json:"cpu,omitempty"`
	Memory string `json:"memory,omitempty"`
	OS     string `json:"os"`
	Go     string `json:"go"`
}

// Run is a results file, bench/results/<date>.json.
type Run struct {
	Date    string   `json:"date"`
	Commit  string   `json:"commit"`
	Scale   string   `json:"scale"`
	Machine Machine  `json:"machine"`
	Steps   []Step   `json:"steps,omitempty"`
	Results []Result `json:"results"`
}

type options struct {
	Results, Steps string // input files
	Scale, Date    string
	Commit         string
	Machine        Machine
	Out            string // bench/results
	Readme         string // README.md, or empty
}

func run(opts options) error {
	if opts.Results != "" {
		r, err := loadRun(opts)
		if err != nil {
			return err
		}
		if err := writeRun(opts.Out, r); err != nil {
			return err
		}
		fmt.Printf("report: %d figures of %d benchmarks in %s\n", len(r.Results), len(r.benches()),
			filepath.Join(opts.Out, r.Date+".md"))
	}
	if opts.Readme == "" {
		return nil
	}
	latest, err := latestRun(opts.Out)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(filepath.Dir(opts.Readme), opts.Out)
	if err != nil {
		return fmt.Errorf("results folder relative to the README: %w", err)
	}
	if err := updateReadme(opts.Readme, latest, filepath.ToSlash(rel)); err != nil {
		return err
	}
	fmt.Printf("report: %s regenerated from the results of %s\n", opts.Readme, latest.Date)
	return nil
}

func loadRun(opts options) (*Run, error) {
	f, err := os.Open(opts.Results)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	results, err := readResults(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", opts.Results, err)
	}
	r := &Run{Date: opts.Date, Commit: opts.Commit, Scale: opts.Scale, Machine: opts.Machine, Results: results}
	if opts.Steps != "" {
		f, err := os.Open(opts.Steps)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if r.Steps, err = readSteps(f); err != nil {
			return nil, fmt.Errorf("read %s: %w", opts.Steps, err)
		}
	}
	return r, nil
}

// readResults reads JSON lines of Results; blank lines are skipped.
func readResults(r io.Reader) ([]Result, error) {
	results := []Result{}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for line := 1; sc.Scan(); line++ {
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		var res Result
		dec := json.NewDecoder(bytes.NewReader(text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&res); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if res.Bench == "" || res.What == "" {
			return nil, fmt.Errorf("line %d: a figure needs bench and what", line)
		}
		results = append(results, res)
	}
	return results, sc.Err()
}

// readSteps reads bench/run.sh's `benchmark<TAB>status<TAB>seconds` lines.
func readSteps(r io.Reader) ([]Step, error) {
	var steps []Step
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 3 {
			return nil, fmt.Errorf("line %d: want 3 tab-separated fields, got %q", line, sc.Text())
		}
		secs, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: seconds: %w", line, err)
		}
		steps = append(steps, Step{Bench: f[0], Status: f[1], Seconds: secs})
	}
	return steps, sc.Err()
}

// writeRun writes <date>.json, <date>.md and the plots under <date>/.
func writeRun(dir string, r *Run) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	plots := r.plots()
	if len(plots) > 0 {
		if err := os.MkdirAll(filepath.Join(dir, r.Date), 0o755); err != nil {
			return err
		}
	}
	files := map[string][]byte{
		r.Date + ".json": append(data, '\n'),
		r.Date + ".md":   []byte(r.markdown()),
	}
	for _, p := range plots {
		files[filepath.Join(r.Date, p.file)] = p.svg
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// latestRun reads the newest results file of dir (the date stamps sort as they are named).
func latestRun(dir string) (*Run, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no results in %s: run make bench", dir)
	}
	slices.Sort(names)
	data, err := os.ReadFile(names[len(names)-1])
	if err != nil {
		return nil, err
	}
	var r Run
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("read %s: %w", names[len(names)-1], err)
	}
	return &r, nil
}

// order is the order benchmarks run in; others follow in the order they appear.
var order = []string{"collector", "indexer", "freshness", "roll", "query", "facade", "facade-memory", "stores"}

// benches are the benchmarks with figures or steps, in order.
func (r *Run) benches() []string {
	seen := map[string]bool{}
	var names []string
	add := func(b string) {
		if !seen[b] {
			seen[b] = true
			names = append(names, b)
		}
	}
	for _, s := range r.Steps {
		add(s.Bench)
	}
	for _, res := range r.Results {
		add(res.Bench)
	}
	rank := func(b string) int {
		if i := slices.Index(order, b); i >= 0 {
			return i
		}
		return len(order)
	}
	slices.SortStableFunc(names, func(a, b string) int { return rank(a) - rank(b) })
	return names
}

func (r *Run) of(bench string) []Result {
	var out []Result
	for _, res := range r.Results {
		if res.Bench == bench {
			out = append(out, res)
		}
	}
	return out
}

func (r *Run) step(bench string) (Step, bool) {
	for _, s := range r.Steps {
		if s.Bench == bench {
			return s, true
		}
	}
	return Step{}, false
}

func (m Machine) String() string {
	parts := []string{fmt.Sprintf("%d cores", m.CPUs)}
	if m.CPU != "" {
		parts = append(parts, m.CPU)
	}
	if m.Memory != "" {
		parts = append(parts, m.Memory)
	}
	return strings.Join(append(parts, m.OS, m.Go), ", ")
}

// markdown is <date>.md: the run's facts, a table per benchmark and the plots.
func (r *Run) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Benchmarks %s\n\n", r.Date)
	fmt.Fprintf(&b, "Commit `%s`, scale `%s`, machine: %s.\n", r.Commit, r.Scale, r.Machine)
	for _, bench := range r.benches() {
		fmt.Fprintf(&b, "\n## %s\n\n", bench)
		if s, ok := r.step(bench); ok && s.Status != "ok" {
			fmt.Fprintf(&b, "**%s** after %.0f s.\n\n", s.Status, s.Seconds)
		} else if ok {
			fmt.Fprintf(&b, "%.0f s.\n\n", s.Seconds)
		}
		results := r.of(bench)
		if len(results) == 0 {
			b.WriteString("No figures.\n")
			continue
		}
		b.WriteString("| what | figure | unit | goal | met |\n|---|---:|---|---|:---:|\n")
		var notes []string
		for _, res := range results {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", cell(res.What), formatValue(res.Value), cell(res.Unit), cell(orDash(res.Goal)), verdict(res.Met))
			if res.Note != "" && !slices.Contains(notes, res.Note) {
				notes = append(notes, res.Note)
			}
		}
		if len(notes) > 0 {
			b.WriteString("\n")
		}
		for _, n := range notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	if plots := r.plots(); len(plots) > 0 {
		b.WriteString("\n## Plots\n\n")
		for _, p := range plots {
			fmt.Fprintf(&b, "![%s](%s/%s)\n", p.title, r.Date, p.file)
		}
		b.WriteString("\n" + memoryCaveat(plots) + "\n")
	}
	return b.String()
}

// memoryCaveat says what the memory plots are not: the bars are two readings, not a profile.
func memoryCaveat(plots []plot) string {
	if slices.ContainsFunc(plots, func(p plot) bool { return p.file == memoryOverTimeFile }) {
		return "The memory bars are read once before and once after each load (VmRSS, VmHWM, Go heap); memory over time is VmRSS sampled during the loads it shows."
	}
	return "Memory is read once before and once after each load (VmRSS, VmHWM, Go heap), not sampled over time."
}

// readmeSection is the README's generated part; results is the results folder relative to the README.
func (r *Run) readmeSection(results string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Latest run: **%s**, commit `%s`, scale `%s`, machine: %s ([all figures](%s/%s.md), [JSON](%s/%s.json)).\n\n",
		r.Date, r.Commit, r.Scale, r.Machine, results, r.Date, results, r.Date)
	var missing []string
	for _, s := range r.Steps {
		if s.Status != "ok" {
			missing = append(missing, fmt.Sprintf("%s %s", s.Bench, s.Status))
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(&b, "Not in this run: %s.\n\n", strings.Join(missing, ", "))
	}
	b.WriteString("| benchmark | what | figure | unit | goal | met |\n|---|---|---:|---|---|:---:|\n")
	for _, bench := range r.benches() {
		for _, res := range r.of(bench) {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", bench, cell(res.What), formatValue(res.Value), cell(res.Unit), cell(orDash(res.Goal)), verdict(res.Met))
		}
	}
	if plots := r.plots(); len(plots) > 0 {
		var links []string
		for _, p := range plots {
			links = append(links, fmt.Sprintf("[%s](%s/%s/%s)", p.title, results, r.Date, p.file))
		}
		fmt.Fprintf(&b, "\nPlots: %s. %s\n", strings.Join(links, " · "), memoryCaveat(plots))
	}
	return b.String()
}

const (
	beginMarker = "<!-- bench:begin -->"
	endMarker   = "<!-- bench:end -->"
)

var errMarkers = errors.New("report: the README needs one " + beginMarker + " followed by one " + endMarker)

// splice puts section between the README's markers, replacing what was there.
func splice(readme []byte, section string) ([]byte, error) {
	s := string(readme)
	if strings.Count(s, beginMarker) != 1 || strings.Count(s, endMarker) != 1 {
		return nil, errMarkers
	}
	i, j := strings.Index(s, beginMarker)+len(beginMarker), strings.Index(s, endMarker)
	if j < i {
		return nil, errMarkers
	}
	return []byte(s[:i] + "\n" + strings.TrimSpace(section) + "\n" + s[j:]), nil
}

func updateReadme(path string, r *Run, results string) error {
	readme, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := splice(readme, r.readmeSection(results))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if bytes.Equal(out, readme) {
		return nil
	}
	return os.WriteFile(path, out, 0o644)
}

func verdict(met *bool) string {
	switch {
	case met == nil:
		return "—"
	case *met:
		return "✓"
	default:
		return "✗"
	}
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// cell keeps a table cell on its line and in its column.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

// formatValue gives three significant figures or so, without exponents.
func formatValue(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 100 || v == math.Trunc(v):
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'g', 2, 64)
	}
}

func gitCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// thisMachine describes the machine from /proc where it can (Linux), else from the runtime alone.
func thisMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), OS: runtime.GOOS + "/" + runtime.GOARCH, Go: runtime.Version()}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.Join(strings.Fields(v), " ")
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
					m.Memory = fmt.Sprintf("%.0f GiB", kb/(1<<20))
				}
				break
			}
		}
	}
	return m
}
