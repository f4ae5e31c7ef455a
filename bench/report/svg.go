package main

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/kubesearch/kubesearch/bench/internal/axis"
)

// plot is one SVG file of a run.
type plot struct {
	file, title string
	svg         []byte
}

// bar is one horizontal bar; series picks its colour and legend entry.
type bar struct {
	label  string
	value  float64
	unit   string
	series int
}

// group is a benchmark's bars under its name.
type group struct {
	title string
	bars  []bar
}

// memoryOverTimeFile is the line chart of the results with a Series.
const memoryOverTimeFile = "memory-over-time.svg"

// plots are the run's charts that have something to show: rates (with the raw baselines beside),
// latency percentiles, memory, memory over time.
func (r *Run) plots() []plot {
	var rates, latency, memory []group
	var overTime []line
	for _, bench := range r.benches() {
		var rg, lg, mg group
		rg.title, lg.title, mg.title = bench, bench, bench
		for _, res := range r.of(bench) {
			switch {
			// A series is drawn whole in its line chart; its peak as a bar beside VmHWM, which it
			// nearly equals, would show one reading twice.
			case len(res.Series) > 0 && res.Unit == "MiB":
				overTime = append(overTime, line{label: bench + ": " + res.What, unit: res.Unit, peak: res.Value, samples: res.Series})
			case res.Unit == "objects/s" || res.Unit == "docs/s":
				series := 0
				if strings.Contains(res.What, "raw") {
					series = 1
				}
				rg.bars = append(rg.bars, bar{res.What, res.Value, res.Unit, series})
			case res.Unit == "ms" && (strings.HasSuffix(res.What, " p50") || strings.HasSuffix(res.What, " p99")):
				series := 0
				if strings.HasSuffix(res.What, " p99") {
					series = 1
				}
				lg.bars = append(lg.bars, bar{res.What, res.Value, res.Unit, series})
			case res.Unit == "MiB" && (strings.Contains(res.What, "RSS") || strings.Contains(res.What, "heap")):
				series := 0
				if strings.Contains(res.What, "growth") {
					series = 1
				}
				mg.bars = append(mg.bars, bar{res.What, res.Value, res.Unit, series})
			}
		}
		for _, g := range []struct {
			to *[]group
			g  group
		}{{&rates, rg}, {&latency, pairPercentiles(lg)}, {&memory, mg}} {
			if len(g.g.bars) > 0 {
				*g.to = append(*g.to, g.g)
			}
		}
	}
	var out []plot
	add := func(file, title string, groups []group, legend []string) {
		if len(groups) > 0 {
			out = append(out, plot{file: file, title: title, svg: barChart(title, groups, legend)})
		}
	}
	add("rates.svg", "Rates (higher is better)", rates, []string{"kubesearch", "raw baseline"})
	add("latency.svg", "Latency percentiles (lower is better)", latency, []string{"p50", "p99"})
	add("memory.svg", "Memory: before, after, growth", memory, []string{"resident / heap", "growth"})
	if len(overTime) > 0 {
		out = append(out, plot{file: memoryOverTimeFile, title: "Memory over time", svg: lineChart("Memory over time", overTime)})
	}
	return out
}

// pairPercentiles puts each figure's p99 right after its p50, in the order the p50s came.
func pairPercentiles(g group) group {
	var out group
	out.title = g.title
	used := make([]bool, len(g.bars))
	for i, b := range g.bars {
		if used[i] {
			continue
		}
		used[i] = true
		out.bars = append(out.bars, b)
		if b.series != 0 {
			continue
		}
		want := strings.TrimSuffix(b.label, " p50") + " p99"
		for j := i + 1; j < len(g.bars); j++ {
			if !used[j] && g.bars[j].label == want {
				used[j] = true
				out.bars = append(out.bars, g.bars[j])
				break
			}
		}
	}
	return out
}

var palette = []string{"#4e79a7", "#f28e2b", "#59a14f", "#e15759"}

const (
	chartWidth = 960
	labelWidth = 380 // bar labels, right-aligned at its end
	barArea    = 440
	rowHeight  = 20
	barHeight  = 14
	groupGap   = 26 // the group's title row
	top        = 56 // the title and legend
)

// barChart draws groups of horizontal bars on one linear scale, each bar labelled with its value.
func barChart(title string, groups []group, legend []string) []byte {
	maxValue := 0.0
	rows := 0
	for _, g := range groups {
		rows += len(g.bars)
		for _, b := range g.bars {
			maxValue = max(maxValue, b.value)
		}
	}
	if maxValue <= 0 {
		maxValue = 1
	}
	height := top + len(groups)*groupGap + rows*rowHeight + 16
	var buf bytes.Buffer
	fmt.Fprintf(&buf, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		chartWidth, height, chartWidth, height)
	fmt.Fprintf(&buf, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", chartWidth, height)
	fmt.Fprintf(&buf, `<text x="12" y="22" font-size="16" font-weight="bold">%s</text>`+"\n", axis.Escape(title))
	x := 12
	for i, l := range legend {
		fmt.Fprintf(&buf, `<rect x="%d" y="32" width="12" height="12" fill="%s"/><text x="%d" y="42">%s</text>`+"\n",
			x, palette[i%len(palette)], x+16, axis.Escape(l))
		x += 16 + 8*len(l) + 24
	}
	y := top
	for _, g := range groups {
		y += groupGap
		fmt.Fprintf(&buf, `<text x="12" y="%d" font-weight="bold">%s</text>`+"\n", y-8, axis.Escape(g.title))
		for _, b := range g.bars {
			w := b.value / maxValue * barArea
			if b.value > 0 && w < 1 {
				w = 1 // still visible
			}
			fmt.Fprintf(&buf, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", labelWidth-6, y+barHeight-3, axis.Escape(shorten(b.label, 60)))
			fmt.Fprintf(&buf, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"><title>%s</title></rect>`+"\n",
				labelWidth, y, max(w, 0), barHeight, palette[b.series%len(palette)], axis.Escape(b.label))
			fmt.Fprintf(&buf, `<text x="%.1f" y="%d">%s %s</text>`+"\n", float64(labelWidth)+max(w, 0)+6, y+barHeight-3,
				axis.Escape(formatValue(b.value)), axis.Escape(b.unit))
			y += rowHeight
		}
	}
	buf.WriteString("</svg>\n")
	return buf.Bytes()
}

// line is one series of a line chart.
type line struct {
	label, unit string
	peak        float64
	samples     []Sample
}

const (
	plotLeft   = 72  // the y tick labels
	plotWidth  = 860 // to 24 px from the right edge
	plotHeight = 280
	legendRow  = 18
)

// lineChart draws series of one unit over time on shared linear axes from zero (x seconds, y the
// unit), with a legend row per series above them giving its figure (the peak).
func lineChart(title string, lines []line) []byte {
	maxAt, maxValue := 0.0, 0.0
	for _, l := range lines {
		for _, s := range l.samples {
			maxAt, maxValue = max(maxAt, s.At), max(maxValue, s.Value)
		}
	}
	xTicks, yTicks := axis.Ticks(maxAt), axis.Ticks(maxValue)
	xMax, yMax := xTicks[len(xTicks)-1], yTicks[len(yTicks)-1]
	plotTop := 32 + len(lines)*legendRow + 24
	height := plotTop + plotHeight + 48
	x := func(at float64) float64 { return plotLeft + at/xMax*plotWidth }
	y := func(v float64) float64 { return float64(plotTop+plotHeight) - v/yMax*plotHeight }

	var buf bytes.Buffer
	fmt.Fprintf(&buf, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		chartWidth, height, chartWidth, height)
	fmt.Fprintf(&buf, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", chartWidth, height)
	fmt.Fprintf(&buf, `<text x="12" y="22" font-size="16" font-weight="bold">%s</text>`+"\n", axis.Escape(title))
	for i, l := range lines {
		ly := 32 + i*legendRow
		fmt.Fprintf(&buf, `<rect x="12" y="%d" width="12" height="12" fill="%s"/><text x="28" y="%d">%s <tspan fill="#555555">· %s %s</tspan></text>`+"\n",
			ly, palette[i%len(palette)], ly+10, axis.Escape(shorten(l.label, 100)), axis.Escape(formatValue(l.peak)), axis.Escape(l.unit))
	}
	// Grid and tick labels first, so the lines are drawn over them.
	for _, v := range yTicks {
		fmt.Fprintf(&buf, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e0e0e0"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n",
			plotLeft, y(v), plotLeft+plotWidth, y(v), plotLeft-6, y(v)+4, axis.Escape(axis.Label(v, yTicks)))
	}
	for _, at := range xTicks {
		fmt.Fprintf(&buf, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#333333"/><text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n",
			x(at), plotTop+plotHeight, x(at), plotTop+plotHeight+5, x(at), plotTop+plotHeight+18, axis.Escape(axis.Label(at, xTicks)))
	}
	fmt.Fprintf(&buf, `<path d="M%d %d V%d H%d" fill="none" stroke="#333333"/>`+"\n", plotLeft, plotTop, plotTop+plotHeight, plotLeft+plotWidth)
	fmt.Fprintf(&buf, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", plotLeft-6, plotTop-10, axis.Escape(lines[0].unit))
	fmt.Fprintf(&buf, `<text x="%d" y="%d" text-anchor="middle">seconds since sampling started</text>`+"\n",
		plotLeft+plotWidth/2, plotTop+plotHeight+38)
	for i, l := range lines {
		points := make([]string, len(l.samples))
		for j, s := range l.samples {
			points[j] = fmt.Sprintf("%.1f,%.1f", x(s.At), y(s.Value))
		}
		colour := palette[i%len(palette)]
		fmt.Fprintf(&buf, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"><title>%s</title></polyline>`+"\n",
			strings.Join(points, " "), colour, axis.Escape(l.label))
		if len(l.samples) == 1 { // a polyline of one point draws nothing
			fmt.Fprintf(&buf, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", x(l.samples[0].At), y(l.samples[0].Value), colour)
		}
	}
	buf.WriteString("</svg>\n")
	return buf.Bytes()
}

func shorten(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
