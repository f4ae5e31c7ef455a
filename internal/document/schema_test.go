package document

import (
	"strings"
	"testing"

	"github.com/kubesearch/kubesearch/internal/table"
)

// The field table and the mapping JSON name the same fields with the same types: a field added to
// one and not the other fails here, not in OpenSearch.
func TestFieldsMatchMapping(t *testing.T) {
	props := mappedProperties(t)
	table := map[string]string{}
	for _, f := range Fields {
		if _, dup := table[f.Name]; dup {
			t.Errorf("%s is in the table twice", f.Name)
		}
		table[f.Name] = f.Type
		if p, ok := props[f.Name]; !ok {
			t.Errorf("%s (%s) is in the table, not in the mapping", f.Name, f.Type)
		} else if p["type"] != f.Type {
			t.Errorf("%s: the mapping says %v, the table %s", f.Name, p["type"], f.Type)
		}
	}
	for name, p := range props {
		if _, ok := table[name]; !ok {
			t.Errorf("%s (%v) is in the mapping, not in the table", name, p["type"])
		}
	}
	if sub, _ := props[FieldName]["fields"].(map[string]any); sub["text"] == nil {
		t.Errorf("the mapping's %s has no text subfield, which %s names", FieldName, FieldNameText)
	}
}

// The mapping lists every sort key a built-in printer writes (table.Printer.SortColumns) as a
// bounded keyword, and nothing else: a column added to a printer and not to the mapping would be
// left unindexed by OpenSearch (dynamic: false) while the embedded store sorted by it.
func TestColumnsMatchPrinters(t *testing.T) {
	props := mappedProperties(t)
	mapped, _ := props[FieldColumns]["properties"].(map[string]any)
	printed := map[string]bool{}
	for _, r := range table.BuiltIn() {
		group, resource, _ := strings.Cut(r, "/")
		p, _ := table.Lookup(group, resource)
		for _, id := range p.SortColumns() {
			printed[id] = true
			m, _ := mapped[id].(map[string]any)
			if m["type"] != "keyword" || m["ignore_above"] != float64(table.MaxKeyBytes) {
				t.Errorf("%s's column %s: mapped as %v, want a keyword with ignore_above %d", r, id, mapped[id], table.MaxKeyBytes)
			}
		}
	}
	for id := range mapped {
		if !printed[id] {
			t.Errorf("columns.%s is mapped, and no printer keys it", id)
		}
	}
}
