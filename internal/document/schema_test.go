package document

import "testing"

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
