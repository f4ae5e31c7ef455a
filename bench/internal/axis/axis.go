// Package axis holds what the SVG plots of make bench (bench/report) and make soak (bench/soak)
// share: round tick values for an axis, their labels, and text escaped for SVG.
package axis

import (
	"encoding/xml"
	"math"
	"strconv"
	"strings"
)

// Ticks are round values from 0 to at least top, four or so steps of 1, 2 or 5 times a power of ten.
func Ticks(top float64) []float64 {
	if top <= 0 {
		top = 1
	}
	step := math.Pow(10, math.Floor(math.Log10(top/4)))
	for _, m := range []float64{1, 2, 5, 10} {
		if top/(m*step) <= 5 {
			step *= m
			break
		}
	}
	var out []float64
	for i := 0; ; i++ {
		v := float64(i) * step
		out = append(out, v)
		if v >= top {
			return out
		}
	}
}

// Label prints a tick with as many decimals as its axis's step needs.
func Label(v float64, ticks []float64) string {
	decimals := 0
	if len(ticks) > 1 {
		decimals = max(0, int(-math.Floor(math.Log10(ticks[1]-ticks[0])+1e-9)))
	}
	return strconv.FormatFloat(v, 'f', decimals, 64)
}

// Escape is s as SVG text.
func Escape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder does not fail
	return b.String()
}
