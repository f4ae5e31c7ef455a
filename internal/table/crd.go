package table

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/util/jsonpath"
)

// PrinterColumn is one of a CustomResourceDefinition version's additionalPrinterColumns
// (apiextensions.k8s.io/v1 CustomResourceColumnDefinition).
type PrinterColumn struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Format      string `json:"format,omitempty"`
	Description string `json:"description,omitempty"`
	Priority    int32  `json:"priority,omitempty"`
	JSONPath    string `json:"jsonPath"`
}

// ForCRD returns the printer kube-apiserver uses for a custom resource version with these
// additionalPrinterColumns: Name, then one column per definition, its cell found by the column's
// JSONPath. Without definitions the resource gets an Age column, as kube-apiserver gives it. It fails
// on a JSONPath that does not parse; kube-apiserver then refuses to serve the resource.
func ForCRD(cols []PrinterColumn) (*Printer, error) {
	if len(cols) == 0 {
		cols = []PrinterColumn{{Name: "Age", Type: "date", Description: metaDoc("creationTimestamp"),
			JSONPath: ".metadata.creationTimestamp"}}
	}
	defs := []metav1.TableColumnDefinition{nameColumn()}
	for _, c := range cols {
		desc := c.Description
		if desc == "" {
			desc = "Custom resource definition column (in JSONPath format): " + c.JSONPath
		}
		defs = append(defs, metav1.TableColumnDefinition{Name: c.Name, Type: c.Type, Format: c.Format,
			Description: desc, Priority: c.Priority})
	}
	if _, err := parsePaths(cols); err != nil {
		return nil, err
	}
	// A parsed JSONPath keeps state while it evaluates, so each row takes a set of its own.
	pool := &sync.Pool{New: func() any {
		paths, _ := parsePaths(cols) // parsed once above without error
		return paths
	}}
	return &Printer{columns: defs, row: func(obj []byte, now time.Time) (metav1.TableRow, error) {
		var content map[string]any
		if err := unmarshal(obj, &content); err != nil {
			return metav1.TableRow{}, fmt.Errorf("table: decode custom resource: %w", err)
		}
		var meta struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := unmarshal(obj, &meta); err != nil {
			return metav1.TableRow{}, fmt.Errorf("table: decode custom resource metadata: %w", err)
		}
		paths := pool.Get().([]*jsonpath.JSONPath)
		defer pool.Put(paths)
		cells := make([]any, 1, 1+len(cols))
		cells[0] = meta.Metadata.Name
		for i, p := range paths {
			cells = append(cells, crdCell(p, cols[i].Type, content, now))
		}
		return metav1.TableRow{Cells: cells}, nil
	}}, nil
}

func parsePaths(cols []PrinterColumn) ([]*jsonpath.JSONPath, error) {
	paths := make([]*jsonpath.JSONPath, len(cols))
	for i, c := range cols {
		p := jsonpath.New(c.Name)
		if err := p.Parse("{" + c.JSONPath + "}"); err != nil {
			return nil, fmt.Errorf("table: column %q: unrecognized JSONPath %q: %w", c.Name, c.JSONPath, err)
		}
		p.AllowMissingKeys(true)
		paths[i] = p
	}
	return paths, nil
}

// crdCell is the first value the path finds, as the column's type: nil when there is none or it has
// another type; a string column prints whatever it finds the way kubectl's JSONPath output does.
func crdCell(p *jsonpath.JSONPath, typ string, content map[string]any, now time.Time) any {
	results, err := p.FindResults(content)
	if err != nil || len(results) == 0 || len(results[0]) == 0 {
		return nil
	}
	value := results[0][0].Interface()
	if typ == "string" {
		var buf bytes.Buffer
		if err := p.PrintResults(&buf, []reflect.Value{reflect.ValueOf(value)}); err != nil {
			return nil
		}
		return buf.String()
	}
	if value == nil {
		return nil
	}
	switch typ {
	case "integer":
		switch v := value.(type) {
		case int64:
			return v
		case float64:
			return int64(v)
		case json.Number:
			if i, err := v.Int64(); err == nil {
				return i
			}
		}
	case "number":
		switch v := value.(type) {
		case int64:
			return float64(v)
		case float64:
			return v
		case json.Number:
			if f, err := v.Float64(); err == nil {
				return f
			}
		}
	case "boolean":
		if b, ok := value.(bool); ok {
			return b
		}
	case "date":
		if s, ok := value.(string); ok {
			var t metav1.Time
			if err := t.UnmarshalQueryParameter(s); err != nil {
				return "<invalid>"
			}
			if t.IsZero() {
				return "<unknown>"
			}
			return duration.HumanDuration(now.Sub(t.Time))
		}
	}
	return nil
}
