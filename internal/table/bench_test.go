package table

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkRow is one Table row of the kinds listed most, from the objects of the golden tests
// (kube-apiserver's own), taken in turn. BenchmarkPodRow covers Pods.
func BenchmarkRow(b *testing.B) {
	for _, name := range []string{"deployments", "services"} {
		b.Run(name, func(b *testing.B) {
			var input struct {
				Group    string            `json:"group"`
				Resource string            `json:"resource"`
				Items    []json.RawMessage `json:"items"`
			}
			raw, err := os.ReadFile(filepath.Join("testdata", name+".json"))
			if err != nil {
				b.Fatal(err)
			}
			if err := json.Unmarshal(raw, &input); err != nil {
				b.Fatal(err)
			}
			p, now := For(input.Group, input.Resource), time.Now()
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, err := p.Row(input.Items[i%len(input.Items)], now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
