package soak

import (
	"bytes"
	"fmt"
	"math"
	"strings"

	"github.com/kubesearch/kubesearch/bench/internal/axis"
)

var palette = []string{"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1"}

const (
	width      = 960
	plotLeft   = 72
	plotWidth  = 860
	plotHeight = 260
	legendRow  = 18
)

// Plot draws series of one unit over time on shared axes from zero, with the second and the last
// quarter shaded (the windows Rule.Judge compares) and each series' verdict in the legend. bench/
// report draws its charts alike; this one adds the windows and verdicts, which only a soak has.
func Plot(title string, series []Judged) []byte {
	maxAt, maxValue := 0.0, 0.0
	for _, s := range series {
		for _, p := range s.Samples {
			maxAt, maxValue = math.Max(maxAt, p.At), math.Max(maxValue, p.Value)
		}
	}
	xTicks, yTicks := axis.Ticks(maxAt), axis.Ticks(maxValue)
	xMax, yMax := xTicks[len(xTicks)-1], yTicks[len(yTicks)-1]
	plotTop := 32 + len(series)*legendRow + 16
	height := plotTop + plotHeight + 48
	x := func(at float64) float64 { return plotLeft + at/xMax*plotWidth }
	y := func(v float64) float64 { return float64(plotTop+plotHeight) - v/yMax*plotHeight }

	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="12" y="22" font-size="16" font-weight="bold">%s</text>`+"\n", axis.Escape(title))
	for i, s := range series {
		ly := 32 + i*legendRow
		verdict := "not judged"
		if s.Err == nil {
			verdict = fmt.Sprintf("start %s, peak %s, end %s · ok", Format(s.Verdict.Start), Format(s.Verdict.Peak), Format(s.Verdict.End))
			if !s.Verdict.OK {
				verdict = strings.TrimSuffix(verdict, "ok") + "FAILED"
			}
		}
		fmt.Fprintf(&b, `<rect x="12" y="%d" width="12" height="12" fill="%s"/><text x="28" y="%d">%s <tspan fill="#555555">· %s</tspan></text>`+"\n",
			ly, palette[i%len(palette)], ly+10, axis.Escape(s.Name), axis.Escape(verdict))
	}
	// The compared quarters, by sample count as Judge cuts them, of the first series.
	if len(series) > 0 && len(series[0].Samples) >= MinSamples {
		ss := series[0].Samples
		n, q := len(ss), len(ss)/4
		for _, w := range [][2]int{{q, 2*q - 1}, {n - q, n - 1}} {
			x0, x1 := x(ss[w[0]].At), x(ss[w[1]].At)
			fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#f2f2f2"/>`+"\n", x0, plotTop, math.Max(x1-x0, 1), plotHeight)
		}
	}
	for _, v := range yTicks {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e0e0e0"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n",
			plotLeft, y(v), plotLeft+plotWidth, y(v), plotLeft-6, y(v)+4, axis.Escape(axis.Label(v, yTicks)))
	}
	for _, at := range xTicks {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#333333"/><text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n",
			x(at), plotTop+plotHeight, x(at), plotTop+plotHeight+5, x(at), plotTop+plotHeight+18, axis.Escape(axis.Label(at, xTicks)))
	}
	fmt.Fprintf(&b, `<path d="M%d %d V%d H%d" fill="none" stroke="#333333"/>`+"\n", plotLeft, plotTop, plotTop+plotHeight, plotLeft+plotWidth)
	if len(series) > 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", plotLeft-6, plotTop-6, axis.Escape(series[0].Unit))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">seconds since sampling started</text>`+"\n",
		plotLeft+plotWidth/2, plotTop+plotHeight+38)
	for i, s := range series {
		points := make([]string, len(s.Samples))
		for j, p := range s.Samples {
			points[j] = fmt.Sprintf("%.1f,%.1f", x(p.At), y(p.Value))
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"><title>%s</title></polyline>`+"\n",
			strings.Join(points, " "), palette[i%len(palette)], axis.Escape(s.Name))
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}
