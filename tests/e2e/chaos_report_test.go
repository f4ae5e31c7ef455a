//go:build e2e && chaos

package e2e

import (
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/tests/testbed"
)

// chaosReport is make chaos's report: a Markdown table of the faults and a timeline plot (SVG,
// drawn here: no plotting tool on the test machines).
type chaosReport struct {
	started time.Time
	ns      string
	env     *testbed.Env
	results []*chaosResult
}

func (rep *chaosReport) dir() string {
	if d := os.Getenv("CHAOS_REPORT_DIR"); d != "" {
		return d
	}
	return filepath.Join(testbed.Root(), "bench", "results", rep.started.Format("2006-01-02-1504")+"-chaos")
}

func (rep *chaosReport) write(t *testing.T, b *chaosBed) {
	if len(rep.results) == 0 {
		return
	}
	dir := rep.dir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Errorf("chaos report: %v", err)
		return
	}
	lags := rep.lags(b)
	svg := rep.svg(lags)
	if err := os.WriteFile(filepath.Join(dir, "timeline.svg"), []byte(svg), 0o644); err != nil {
		t.Errorf("chaos report: %v", err)
	}
	md := rep.markdown(b, lags)
	if err := os.WriteFile(filepath.Join(dir, "report.md"), []byte(md), 0o644); err != nil {
		t.Errorf("chaos report: %v", err)
	}
	t.Logf("chaos report in %s:\n%s", dir, md)
}

// chaosLag is one acknowledged write and how long until the informer of its member's view was
// told of it.
type chaosLag struct {
	at  time.Duration // since the run started
	lag time.Duration
}

func (rep *chaosReport) lags(b *chaosBed) []chaosLag {
	var out []chaosLag
	for _, w := range b.churn.writesSnapshot() {
		if w.rv == "" {
			continue
		}
		for _, cw := range b.watchers {
			if cw.cluster != w.cluster || cw.gvr != w.gvr {
				continue
			}
			if at, ok := cw.toldAt(w.uid, w.rv); ok {
				out = append(out, chaosLag{at: w.at.Sub(rep.started), lag: max(at.Sub(w.at), 0)})
			}
		}
	}
	return out
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "**NO**"
}

func (rep *chaosReport) markdown(b *chaosBed, lags []chaosLag) string {
	var s strings.Builder
	end := rep.results[len(rep.results)-1].end
	fmt.Fprintf(&s, "# make chaos, %s\n\n", rep.started.Format("2006-01-02 15:04"))
	fmt.Fprintf(&s, "HA test bed: members %s, brokers %d, OpenSearch nodes %d; 2 collectors (--lease), 2 indexers (one group), 2 query APIs behind a balancer; "+
		"%d informers (each member's view × ConfigMaps, Widgets, Deployments, Pods) and 2 REST pollers (every 500 ms) through the balancer. "+
		"Churn: %d changes per member every %s (about %.1f/s in all), plus the Pods the Deployments' scaling makes. %d faults in %s; %d CPUs; "+
		"components built without the race detector.\n\n",
		strings.Join(rep.env.Clusters, ", "), len(rep.env.KafkaBrokers), len(rep.env.OpenSearchURLs), len(b.watchers),
		chaosBurst, chaosPeriod, float64(chaosBurst*len(rep.env.Clusters))/chaosPeriod.Seconds(), len(rep.results),
		end.Sub(rep.started).Round(time.Second), runtime.NumCPU())
	s.WriteString("Converge: the index equals every member exactly (uid and resourceVersion of every object of the four kinds) and so does every informer's store, ")
	s.WriteString("measured to within the churn period. *down*: with the fault in place (nothing restarted), from the fault; *back*: from the process being back (started again and ready, or SIGCONT). ")
	s.WriteString("Lost/ghosts/stale: the index against the members when the wait ended (0 when it converged). Gaps: changes in the event stream an informer was never told of, without a list after them; ")
	s.WriteString("duplicates: an (uid, resourceVersion) told again (an informer's list after a 410 tells every object again). ")
	s.WriteString("Redundant: how long the test waited before the fault for every shard copy and partition replica to be in sync again after the previous one. REST: answers of the pollers during the fault, ok / documented transient (410, 503, 504, 429 with Retry-After) / **other** / cut by the balancer (a replica it found unready) / unanswered in 15 s.\n\n")
	s.WriteString("| # | fault | down | goal | back | goal | met | lost | ghosts | stale | watch gaps | duplicates | informer lists | REST ok/transient/**other**/cut/none | churn writes (failed) | redundant before |\n")
	s.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	allMet, total := 0, chaosTotals{}
	for _, r := range rep.results {
		down, downGoal := "—", "—"
		if r.fault.downCheck {
			down, downGoal = r.down.Round(100*time.Millisecond).String(), r.fault.downGoal.String()
		}
		ok := r.downMet && r.backMet && r.converged
		if ok {
			allMet++
		}
		fmt.Fprintf(&s, "| %d | %s | %s | %s | %s | %s | %s | %d | %d | %d | %d | %d | %d | %d/%d/%d/%d/%d | %d (%d) | %s |\n",
			r.n, r.fault.name(), down, downGoal, r.backIn.Round(100*time.Millisecond), haBackGoal, yesNo(ok),
			r.last.lost, r.last.ghosts, r.last.stale, r.gaps, r.dups, r.relists,
			r.rest.ok, r.rest.transient, r.rest.failed, r.rest.balancer, r.rest.none, r.writes, r.failedWrites, r.redundant.Round(100*time.Millisecond))
		total.add(r)
	}
	fmt.Fprintf(&s, "\n**%d of %d faults converged within their goals**; lost %d, ghosts %d, stale %d, watch gaps %d, duplicates %d, REST answers outside the documented transient errors %d.\n",
		allMet, len(rep.results), total.lost, total.ghosts, total.stale, total.gaps, total.dups, total.restFailed)
	if len(lags) > 0 {
		ds := make([]time.Duration, len(lags))
		for i, l := range lags {
			ds[i] = l.lag
		}
		slices.Sort(ds)
		fmt.Fprintf(&s, "\nChurn lag (a member's acknowledged write → its informer told, through collector, Kafka, query API): %d writes, p50 %s, p99 %s, max %s.\n",
			len(ds), ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)*99/100].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
	}
	for _, r := range rep.results {
		if r.failure != "" {
			fmt.Fprintf(&s, "\n- %s: %s", r.fault.name(), r.failure)
		}
	}
	s.WriteString("\n\n![timeline](timeline.svg)\n")
	return s.String()
}

type chaosTotals struct{ lost, ghosts, stale, gaps, dups, restFailed int }

func (c *chaosTotals) add(r *chaosResult) {
	c.lost += r.last.lost
	c.ghosts += r.last.ghosts
	c.stale += r.last.stale
	c.gaps += r.gaps
	c.dups += r.dups
	c.restFailed += r.rest.failed
}

// svg draws two panels over the run's time: the churn lag (the worst of every 5 s) with each
// fault's span shaded and numbered, and each fault's times to converge (down, back) as bars at its
// end, beside their goals.
func (rep *chaosReport) svg(lags []chaosLag) string {
	const (
		w, left, right = 1200.0, 60.0, 20.0
		lagTop, lagH   = 40.0, 220.0
		convTop, convH = 320.0, 220.0
		h              = 590.0
	)
	span := rep.results[len(rep.results)-1].end.Sub(rep.started).Seconds()
	x := func(d time.Duration) float64 { return left + (w-left-right)*d.Seconds()/span }
	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n", w, h)
	fmt.Fprintf(&s, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")

	// Lag panel.
	buckets := map[int]time.Duration{}
	maxLag := time.Second
	for _, l := range lags {
		k := int(l.at.Seconds() / 5)
		buckets[k] = max(buckets[k], l.lag)
		maxLag = max(maxLag, l.lag)
	}
	top := niceCeil(maxLag.Seconds())
	ly := func(sec float64) float64 { return lagTop + lagH - lagH*math.Min(sec, top)/top }
	fmt.Fprintf(&s, `<text x="%.0f" y="%.0f" font-size="13">churn lag: write acknowledged → informer told (worst of each 5 s), s; shaded: a fault until converged</text>`+"\n", left, lagTop-15)
	for _, r := range rep.results {
		x0, x1 := x(r.start.Sub(rep.started)), x(r.end.Sub(rep.started))
		fill := "#fde2e2"
		switch r.fault.how {
		case "SIGSTOP":
			fill = "#e2e8fd"
		case "partition":
			fill = "#fdf3d2"
		}
		fmt.Fprintf(&s, `<rect x="%.1f" y="%.0f" width="%.1f" height="%.0f" fill="%s"><title>%s</title></rect>`+"\n", x0, lagTop, math.Max(x1-x0, 1), lagH, fill, html.EscapeString(r.fault.name()))
		fmt.Fprintf(&s, `<text x="%.1f" y="%.0f" font-size="9" fill="#666">%d</text>`+"\n", x0+1, lagTop+10, r.n)
	}
	axes(&s, left, lagTop, w-right, lagH, top, "s")
	keys := make([]int, 0, len(buckets))
	for k := range buckets {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var pts []string
	for _, k := range keys {
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(time.Duration(k*5+2)*time.Second), ly(buckets[k].Seconds())))
	}
	fmt.Fprintf(&s, `<polyline fill="none" stroke="#1f5fbf" stroke-width="1.2" points="%s"/>`+"\n", strings.Join(pts, " "))

	// Convergence panel.
	maxConv := haBackGoal.Seconds()
	for _, r := range rep.results {
		maxConv = math.Max(maxConv, math.Max(r.down.Seconds(), r.backIn.Seconds()))
	}
	ctop := niceCeil(maxConv)
	cy := func(sec float64) float64 { return convTop + convH - convH*math.Min(sec, ctop)/ctop }
	fmt.Fprintf(&s, `<text x="%.0f" y="%.0f" font-size="13">time to converge per fault, s: red with the fault in place, green once back; ticks: goals</text>`+"\n", left, convTop-15)
	axes(&s, left, convTop, w-right, convH, ctop, "s")
	for _, r := range rep.results {
		xe := x(r.end.Sub(rep.started))
		if r.fault.downCheck {
			fmt.Fprintf(&s, `<rect x="%.1f" y="%.1f" width="5" height="%.1f" fill="#d04040"><title>%s: %s with the fault in place</title></rect>`+"\n",
				xe-11, cy(r.down.Seconds()), convTop+convH-cy(r.down.Seconds()), html.EscapeString(r.fault.name()), r.down.Round(100*time.Millisecond))
			fmt.Fprintf(&s, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#802020"/>`+"\n", xe-13, xe-4, cy(r.fault.downGoal.Seconds()), cy(r.fault.downGoal.Seconds()))
		}
		fmt.Fprintf(&s, `<rect x="%.1f" y="%.1f" width="5" height="%.1f" fill="#40a040"><title>%s: %s once back</title></rect>`+"\n",
			xe-5, cy(r.backIn.Seconds()), convTop+convH-cy(r.backIn.Seconds()), html.EscapeString(r.fault.name()), r.backIn.Round(100*time.Millisecond))
		fmt.Fprintf(&s, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#206020"/>`+"\n", xe-7, xe+2, cy(haBackGoal.Seconds()), cy(haBackGoal.Seconds()))
		fmt.Fprintf(&s, `<text x="%.1f" y="%.0f" font-size="9" fill="#666">%d</text>`+"\n", xe-9, convTop+convH+11, r.n)
	}
	// Time axis, minutes.
	for m := 0.0; m <= span/60; m += math.Max(1, math.Round(span/60/12)) {
		fmt.Fprintf(&s, `<text x="%.1f" y="%.0f" text-anchor="middle">%.0f min</text>`+"\n", x(time.Duration(m*float64(time.Minute))), convTop+convH+28, m)
	}
	s.WriteString("</svg>\n")
	return s.String()
}

func axes(s *strings.Builder, left, top, right, height, maxV float64, unit string) {
	fmt.Fprintf(s, `<line x1="%.0f" x2="%.0f" y1="%.0f" y2="%.0f" stroke="black"/>`+"\n", left, left, top, top+height)
	fmt.Fprintf(s, `<line x1="%.0f" x2="%.0f" y1="%.0f" y2="%.0f" stroke="black"/>`+"\n", left, right, top+height, top+height)
	for i := 0; i <= 4; i++ {
		v := maxV * float64(i) / 4
		y := top + height - height*float64(i)/4
		fmt.Fprintf(s, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, right, y, y)
		fmt.Fprintf(s, `<text x="%.0f" y="%.1f" text-anchor="end">%g %s</text>`+"\n", left-4, y+4, v, unit)
	}
}

// niceCeil rounds a positive value up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}
