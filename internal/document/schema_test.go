package document

import (
	"encoding/json"
	"testing"

	"github.com/kubesearch/kubesearch/mappings"
)

// The field table and the mapping JSON name the same fields with the same types: a field added to
// one and not the other fails here, not in OpenSearch.
func TestFieldsMatchMapping(t *testing.T) {
	body, err := mappings.IndexTemplate(mappings.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var tmpl struct {
		Template struct {
			Mappings struct {
				Properties map[string]struct {
					Type   string                     `json:"type"`
					Fields map[string]json.RawMessage `json:"fields"`
				} `json:"properties"`
			} `json:"mappings"`
		} `json:"template"`
	}
	if err := json.Unmarshal(body, &tmpl); err != nil {
		t.Fatal(err)
	}
	props := tmpl.Template.Mappings.Properties
	table := map[string]string{}
	for _, f := range Fields {
		if _, dup := table[f.Name]; dup {
			t.Errorf("%s is in the table twice", f.Name)
		}
		table[f.Name] = f.Type
		if p, ok := props[f.Name]; !ok {
			t.Errorf("%s (%s) is in the table, not in the mapping", f.Name, f.Type)
		} else if p.Type != f.Type {
			t.Errorf("%s: the mapping says %s, the table %s", f.Name, p.Type, f.Type)
		}
	}
	for name, p := range props {
		if _, ok := table[name]; !ok {
			t.Errorf("%s (%s) is in the mapping, not in the table", name, p.Type)
		}
	}
	if _, ok := props[FieldName].Fields["text"]; !ok {
		t.Errorf("the mapping's %s has no text subfield, which %s names", FieldName, FieldNameText)
	}
}
