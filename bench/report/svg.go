package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"strings"
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

// plots are the run's charts that have something to show: rates (with the raw baselines beside),
// latency percentiles, memory.
func (r *Run) plots() []plot {
	var rates, latency, memory []group
	for _, bench := range r.benches() {
		var rg, lg, mg group
		rg.title, lg.title, mg.title = bench, bench, bench
		for _, res := range r.of(bench) {
			switch {
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
	fmt.Fprintf(&buf, `<text x="12" y="22" font-size="16" font-weight="bold">%s</text>`+"\n", esc(title))
	x := 12
	for i, l := range legend {
		fmt.Fprintf(&buf, `<rect x="%d" y="32" width="12" height="12" fill="%s"/><text x="%d" y="42">%s</text>`+"\n",
			x, palette[i%len(palette)], x+16, esc(l))
		x += 16 + 8*len(l) + 24
	}
	y := top
	for _, g := range groups {
		y += groupGap
		fmt.Fprintf(&buf, `<text x="12" y="%d" font-weight="bold">%s</text>`+"\n", y-8, esc(g.title))
		for _, b := range g.bars {
			w := b.value / maxValue * barArea
			if b.value > 0 && w < 1 {
				w = 1 // still visible
			}
			fmt.Fprintf(&buf, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", labelWidth-6, y+barHeight-3, esc(shorten(b.label, 60)))
			fmt.Fprintf(&buf, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"><title>%s</title></rect>`+"\n",
				labelWidth, y, max(w, 0), barHeight, palette[b.series%len(palette)], esc(b.label))
			fmt.Fprintf(&buf, `<text x="%.1f" y="%d">%s %s</text>`+"\n", float64(labelWidth)+max(w, 0)+6, y+barHeight-3,
				esc(formatValue(b.value)), esc(b.unit))
			y += rowHeight
		}
	}
	buf.WriteString("</svg>\n")
	return buf.Bytes()
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder does not fail
	return b.String()
}

func shorten(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
