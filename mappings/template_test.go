package mappings

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// template is the part of a composable index template the tests look at.
type template struct {
	IndexPatterns []string       `json:"index_patterns"`
	Priority      int            `json:"priority"`
	Version       int            `json:"version"`
	Meta          map[string]any `json:"_meta"`
	Template      struct {
		Settings struct {
			Index map[string]any `json:"index"`
		} `json:"settings"`
		Mappings struct {
			Dynamic    any                       `json:"dynamic"`
			Meta       map[string]any            `json:"_meta"`
			Properties map[string]map[string]any `json:"properties"`
		} `json:"mappings"`
	} `json:"template"`
}

func decodeTemplate(t *testing.T, body []byte) template {
	t.Helper()
	var tmpl template
	if err := json.Unmarshal(body, &tmpl); err != nil {
		t.Fatalf("template is not JSON: %v", err)
	}
	return tmpl
}

func TestIndexTemplateDefaults(t *testing.T) {
	body, err := IndexTemplate(Options{})
	if err != nil {
		t.Fatal(err)
	}
	tmpl := decodeTemplate(t, body)
	if want := []string{"kubernetes-*"}; !reflect.DeepEqual(tmpl.IndexPatterns, want) {
		t.Errorf("index_patterns = %q, want %q", tmpl.IndexPatterns, want)
	}
	wantSettings := map[string]any{"number_of_shards": 1.0, "number_of_replicas": 0.0, "refresh_interval": "1s"}
	if !reflect.DeepEqual(tmpl.Template.Settings.Index, wantSettings) {
		t.Errorf("settings.index = %v, want %v", tmpl.Template.Settings.Index, wantSettings)
	}
	// An indexer compares these with Version to spot an older template or index; all must agree.
	for where, v := range map[string]any{
		"version":                 float64(tmpl.Version),
		"_meta.version":           tmpl.Meta["version"],
		"template.mappings._meta": tmpl.Template.Mappings.Meta["version"],
	} {
		if v != float64(Version) {
			t.Errorf("%s = %v, want Version (%d)", where, v, Version)
		}
	}
	if tmpl.Template.Mappings.Dynamic != false {
		t.Errorf("mappings.dynamic = %v, want false (see README)", tmpl.Template.Mappings.Dynamic)
	}
}

func TestIndexTemplateOptions(t *testing.T) {
	tests := []struct {
		name         string
		opts         Options
		wantPattern  string
		wantPriority int
		wantSettings map[string]any
	}{{
		name:         "prefix",
		opts:         Options{Prefix: "team1"},
		wantPattern:  "team1-kubernetes-*",
		wantPriority: 106,
		wantSettings: map[string]any{"number_of_shards": 1.0, "number_of_replicas": 0.0, "refresh_interval": "1s"},
	}, {
		name:         "sized for production",
		opts:         Options{Shards: 3, Replicas: 1, RefreshInterval: 30 * time.Second},
		wantPattern:  "kubernetes-*",
		wantPriority: 100,
		wantSettings: map[string]any{"number_of_shards": 3.0, "number_of_replicas": 1.0, "refresh_interval": "30s"},
	}, {
		name:         "sub-second refresh",
		opts:         Options{RefreshInterval: 500 * time.Millisecond},
		wantPattern:  "kubernetes-*",
		wantPriority: 100,
		wantSettings: map[string]any{"number_of_shards": 1.0, "number_of_replicas": 0.0, "refresh_interval": "500ms"},
	}, {
		name:         "refresh off for a bulk load",
		opts:         Options{RefreshInterval: -1},
		wantPattern:  "kubernetes-*",
		wantPriority: 100,
		wantSettings: map[string]any{"number_of_shards": 1.0, "number_of_replicas": 0.0, "refresh_interval": "-1"},
	}, {
		name:         "replicas following the cluster",
		opts:         Options{Replicas: AutoReplicas},
		wantPattern:  "kubernetes-*",
		wantPriority: 100,
		wantSettings: map[string]any{"number_of_shards": 1.0, "auto_expand_replicas": "0-1", "refresh_interval": "1s"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, err := IndexTemplate(tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			tmpl := decodeTemplate(t, body)
			if want := []string{tt.wantPattern}; !reflect.DeepEqual(tmpl.IndexPatterns, want) {
				t.Errorf("index_patterns = %q, want %q", tmpl.IndexPatterns, want)
			}
			if tmpl.Priority != tt.wantPriority {
				t.Errorf("priority = %d, want %d", tmpl.Priority, tt.wantPriority)
			}
			if !reflect.DeepEqual(tmpl.Template.Settings.Index, tt.wantSettings) {
				t.Errorf("settings.index = %v, want %v", tmpl.Template.Settings.Index, tt.wantSettings)
			}
			// Options touch settings and naming only.
			def, _ := IndexTemplate(Options{})
			if got, want := decodeTemplate(t, body).Template.Mappings, decodeTemplate(t, def).Template.Mappings; !reflect.DeepEqual(got, want) {
				t.Error("options changed the mapping")
			}
		})
	}
}

// TestPrefixedPatternsCanCoexist: OpenSearch refuses two templates with overlapping patterns and the
// same priority. A prefix that starts like the unprefixed pattern must get a different priority.
func TestPrefixedPatternsCanCoexist(t *testing.T) {
	a, _ := IndexTemplate(Options{})
	b, _ := IndexTemplate(Options{Prefix: "kubernetes"})
	ta, tb := decodeTemplate(t, a), decodeTemplate(t, b)
	if !strings.HasPrefix(tb.IndexPatterns[0], strings.TrimSuffix(ta.IndexPatterns[0], "*")) {
		t.Fatalf("test premise: %q should overlap %q", tb.IndexPatterns[0], ta.IndexPatterns[0])
	}
	if tb.Priority <= ta.Priority {
		t.Errorf("priority of %q = %d, want more than %d of %q", tb.IndexPatterns[0], tb.Priority, ta.Priority, ta.IndexPatterns[0])
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want []string // parts of the message; nil means valid
	}{
		{"zero value", Options{}, nil},
		{"good prefix", Options{Prefix: "prod-eu.team_1"}, nil},
		{"upper case prefix", Options{Prefix: "Prod"}, []string{`prefix "Prod"`}},
		{"leading dash", Options{Prefix: "-x"}, []string{"prefix"}},
		{"leading dot (hidden index)", Options{Prefix: ".x"}, []string{"prefix"}},
		{"pattern character", Options{Prefix: "a*"}, []string{"prefix"}},
		{"too long", Options{Prefix: strings.Repeat("a", 101)}, []string{"prefix: at most 100"}},
		{"every error at once", Options{Prefix: "A", Shards: -1, Replicas: -2, RefreshInterval: 1500 * time.Microsecond},
			[]string{"prefix", "shards", "replicas", "refreshInterval"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate() = nil, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to mention %q", err, w)
				}
			}
			if _, err := IndexTemplate(tt.opts); err == nil {
				t.Error("IndexTemplate accepted invalid options")
			}
		})
	}
}

func TestNames(t *testing.T) {
	for _, tt := range []struct{ prefix, base, template string }{
		{"", "kubernetes-", "kubernetes"},
		{"team1", "team1-kubernetes-", "team1-kubernetes"},
	} {
		if got := IndexBase(tt.prefix); got != tt.base {
			t.Errorf("IndexBase(%q) = %q, want %q", tt.prefix, got, tt.base)
		}
		if got := TemplateName(tt.prefix); got != tt.template {
			t.Errorf("TemplateName(%q) = %q, want %q", tt.prefix, got, tt.template)
		}
	}
}

// knownParams are the mapping parameters this template may use per field type, after the
// OpenSearch 2.19 API specification (schemas/_common.mapping.yaml); a typo would make OpenSearch
// refuse the whole template.
var knownParams = map[string][]string{
	"keyword":     {"type", "ignore_above", "fields", "doc_values", "index", "normalizer"},
	"text":        {"type", "analyzer", "search_analyzer", "index_prefixes", "fields"},
	"long":        {"type", "ignore_malformed", "doc_values", "index"},
	"integer":     {"type", "ignore_malformed", "doc_values", "index"},
	"boolean":     {"type", "doc_values", "index"},
	"date":        {"type", "format", "ignore_malformed", "doc_values", "index"},
	"ip":          {"type", "ignore_malformed", "doc_values", "index"},
	"flat_object": {"type"},
	"object":      {"type", "enabled", "properties", "dynamic"},
}

func TestMappingStructure(t *testing.T) {
	body, err := IndexTemplate(Options{})
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		t.Fatal(err)
	}
	allowedTop := []string{"index_patterns", "composed_of", "template", "data_stream", "priority", "version", "_meta"}
	for k := range top {
		if !contains(allowedTop, k) {
			t.Errorf("top-level key %q is not part of a composable index template", k)
		}
	}
	tmpl := decodeTemplate(t, body)
	var check func(path string, props map[string]map[string]any)
	check = func(path string, props map[string]map[string]any) {
		for name, p := range props {
			typ, _ := p["type"].(string)
			allowed, ok := knownParams[typ]
			if !ok {
				t.Errorf("%s%s: type %q is not one this template expects", path, name, typ)
				continue
			}
			for param := range p {
				if !contains(allowed, param) {
					t.Errorf("%s%s: parameter %q is not valid for %s", path, name, param, typ)
				}
			}
			// Lucene rejects a whole document over one term longer than 32766 bytes; 8191
			// characters of 4-byte UTF-8 stay under it.
			if typ == "keyword" {
				if ia, _ := p["ignore_above"].(float64); ia == 0 || ia > 8191 {
					t.Errorf("%s%s: ignore_above = %v, want 1..8191", path, name, p["ignore_above"])
				}
			}
			if fields, ok := p["fields"].(map[string]any); ok {
				sub := map[string]map[string]any{}
				for k, v := range fields {
					sub[k], _ = v.(map[string]any)
				}
				check(path+name+".", sub)
			}
		}
	}
	check("", tmpl.Template.Mappings.Properties)
	for _, f := range []string{FieldObject, FieldFullObject, FieldTrimmedPaths} {
		if _, ok := tmpl.Template.Mappings.Properties[f]; !ok {
			t.Errorf("field %q is not mapped", f)
		}
	}
	if got := tmpl.Template.Mappings.Properties[FieldObject]["type"]; got != "flat_object" {
		t.Errorf("%s is %v, want flat_object", FieldObject, got)
	}
	if got := tmpl.Template.Mappings.Properties[FieldFullObject]["enabled"]; got != false {
		t.Errorf("%s.enabled = %v, want false: it must never be indexed", FieldFullObject, got)
	}
}

// TestReadmeListsEveryField keeps the documented field list complete.
func TestReadmeListsEveryField(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	body, _ := IndexTemplate(Options{})
	for name := range decodeTemplate(t, body).Template.Mappings.Properties {
		if !strings.Contains(readme, "| `"+name+"`") {
			t.Errorf("README.md has no table row for field %q", name)
		}
	}
}

func TestStoredObject(t *testing.T) {
	tests := []struct {
		name, source, want string
		err                error
	}{
		{"object", `{"name":"a","object":{"kind":"Pod"}}`, `{"kind":"Pod"}`, nil},
		{"full object wins", `{"object":{"kind":"Pod"},"trimmedPaths":["data.x"],"fullObject":{"kind":"Pod","data":{"x":"long"}}}`, `{"kind":"Pod","data":{"x":"long"}}`, nil},
		{"none", `{"name":"a"}`, "", ErrNoObject},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := StoredObject([]byte(tt.source))
			if !errors.Is(err, tt.err) {
				t.Fatalf("error = %v, want %v", err, tt.err)
			}
			if string(got) != tt.want {
				t.Errorf("StoredObject = %s, want %s", got, tt.want)
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestIndexName(t *testing.T) {
	tests := []struct {
		prefix, kind, want string
	}{
		{"", "Pod", "kubernetes-pod"},
		{"", "Deployment", "kubernetes-deployment"},
		{"", "CustomResourceDefinition", "kubernetes-customresourcedefinition"},
		{"", "event", "kubernetes-event"},
		{"team1", "Pod", "team1-kubernetes-pod"},
		{"a.b_c-d", "ConfigMap", "a.b_c-d-kubernetes-configmap"},
	}
	for _, tt := range tests {
		if got := IndexName(tt.prefix, tt.kind); got != tt.want {
			t.Errorf("IndexName(%q, %q) = %q, want %q", tt.prefix, tt.kind, got, tt.want)
		}
	}
}

// The state index body is the embedded JSON with the installation's replicas; the fields the
// indexer stores in watermark documents are mapped.
func TestStateIndexBody(t *testing.T) {
	body, err := StateIndexBody(Options{Replicas: 2})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Settings struct {
			Index struct {
				Shards   json.Number `json:"number_of_shards"`
				Replicas json.Number `json:"number_of_replicas"`
			} `json:"index"`
		} `json:"settings"`
		Mappings struct {
			Dynamic    bool                      `json:"dynamic"`
			Properties map[string]map[string]any `json:"properties"`
		} `json:"mappings"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Settings.Index.Shards != "1" || got.Settings.Index.Replicas != "2" || got.Mappings.Dynamic {
		t.Errorf("settings %+v, dynamic %v", got.Settings.Index, got.Mappings.Dynamic)
	}
	auto, err := StateIndexBody(Options{Replicas: AutoReplicas})
	if err != nil {
		t.Fatal(err)
	}
	if idx := objectOf(t, auto, "settings", "index"); idx["auto_expand_replicas"] != "0-1" || idx["number_of_replicas"] != nil {
		t.Errorf("state index with replicas following the cluster: %v", idx)
	}
	for _, f := range []string{"key", "cluster", "group", "resource", "kind", "resourceVersion", "epoch", "listing", "updatedAt", "scopes"} {
		if _, ok := got.Mappings.Properties[f]; !ok {
			t.Errorf("state index does not map %s", f)
		}
	}
}

// objectOf decodes body and returns the object at path.
func objectOf(t *testing.T, body []byte, path ...string) map[string]any {
	t.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	for _, k := range path {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	m, _ := v.(map[string]any)
	return m
}
