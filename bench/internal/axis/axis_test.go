package axis

import (
	"slices"
	"testing"
)

// Ticks reach the top in round steps; labels carry the decimals the step needs; text is escaped.
func TestAxis(t *testing.T) {
	for top, want := range map[float64][]float64{
		0:   {0, 0.2, 0.4, 0.6000000000000001, 0.8, 1},
		7:   {0, 2, 4, 6, 8},
		130: {0, 50, 100, 150},
	} {
		if got := Ticks(top); !slices.Equal(got, want) {
			t.Errorf("Ticks(%v) = %v, want %v", top, got, want)
		}
	}
	if got := Label(0.4, []float64{0, 0.2}); got != "0.4" {
		t.Errorf("Label(0.4) = %q, want 0.4", got)
	}
	if got := Label(150, []float64{0, 50}); got != "150" {
		t.Errorf("Label(150) = %q, want 150", got)
	}
	if got := Escape(`a<b & "c"`); got != "a&lt;b &amp; &#34;c&#34;" {
		t.Errorf("Escape = %q", got)
	}
}
