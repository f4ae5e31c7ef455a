package queryapi

import (
	"encoding/json"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A field selector is checked against the fields a kind has (fieldlabels.go): the kind's schema in
// the member's OpenAPI v3 document, which collectors relay through the ledger. schemaIndex is
// what that check needs of one document, built once per document (a 1.6 MB api/v1 parses in tens
// of milliseconds) and kept beside it: each kind's fields as a tree of names.

// schemaIndex holds the kinds of one OpenAPI v3 document.
type schemaIndex struct {
	kinds map[schema.GroupVersionKind]*schemaNode
}

// schemaNode is one schema as far as field paths go.
type schemaNode struct {
	props map[string]*schemaNode
	// items are an array's elements, which a path reads through (spec.containers.image);
	// values a map's, whose keys may hold dots (metadata.labels.app.kubernetes.io/name).
	items, values *schemaNode
	// open says any path below exists: x-kubernetes-preserve-unknown-fields, or an object that
	// declares no fields (a RawExtension, a schema-less CRD).
	open bool
}

// rawSchema is what the index reads of an OpenAPI v3 schema; descriptions and the rest are not
// decoded.
type rawSchema struct {
	Type                 string                `json:"type"`
	Ref                  string                `json:"$ref"`
	AllOf                []rawSchema           `json:"allOf"`
	Properties           map[string]*rawSchema `json:"properties"`
	Items                *rawSchema            `json:"items"`
	AdditionalProperties json.RawMessage       `json:"additionalProperties"`
	PreserveUnknown      bool                  `json:"x-kubernetes-preserve-unknown-fields"`
	IntOrString          bool                  `json:"x-kubernetes-int-or-string"`
	GVK                  []struct {
		Group   string `json:"group"`
		Version string `json:"version"`
		Kind    string `json:"kind"`
	} `json:"x-kubernetes-group-version-kind"`
}

const schemaRefPrefix = "#/components/schemas/"

// newSchemaIndex reads an OpenAPI v3 document; nil when it is not one.
func newSchemaIndex(doc []byte) *schemaIndex {
	var d struct {
		Components struct {
			Schemas map[string]*rawSchema `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil
	}
	b := schemaBuilder{raw: d.Components.Schemas, built: map[string]*schemaNode{}}
	idx := &schemaIndex{kinds: map[schema.GroupVersionKind]*schemaNode{}}
	for name, raw := range d.Components.Schemas {
		for _, gvk := range raw.GVK {
			idx.kinds[schema.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}] = b.named(name)
		}
	}
	return idx
}

type schemaBuilder struct {
	raw   map[string]*rawSchema
	built map[string]*schemaNode
}

// named builds a named schema once; schemas that refer to themselves (a CRD's
// JSONSchemaProps) are built as cycles.
func (b *schemaBuilder) named(name string) *schemaNode {
	if n, ok := b.built[name]; ok {
		return n
	}
	n := &schemaNode{}
	b.built[name] = n
	raw := b.raw[name]
	if raw == nil {
		n.open = true // a dangling reference: nothing can be said below it
		return n
	}
	b.fill(n, raw)
	return n
}

func (b *schemaBuilder) node(raw *rawSchema) *schemaNode {
	if raw.Ref != "" && len(raw.Properties) == 0 {
		return b.named(strings.TrimPrefix(raw.Ref, schemaRefPrefix))
	}
	if len(raw.AllOf) == 1 && len(raw.Properties) == 0 && raw.Items == nil {
		return b.node(&raw.AllOf[0])
	}
	n := &schemaNode{}
	b.fill(n, raw)
	return n
}

func (b *schemaBuilder) fill(n *schemaNode, raw *rawSchema) {
	if raw.PreserveUnknown {
		n.open = true
		return
	}
	for i := range raw.AllOf {
		sub := b.node(&raw.AllOf[i])
		n.merge(sub)
	}
	if len(raw.Properties) > 0 && n.props == nil {
		n.props = make(map[string]*schemaNode, len(raw.Properties))
	}
	for name, p := range raw.Properties {
		n.props[name] = b.node(p)
	}
	if raw.Items != nil {
		n.items = b.node(raw.Items)
	}
	switch ap := strings.TrimSpace(string(raw.AdditionalProperties)); {
	case ap == "" || ap == "false":
	case ap == "true":
		n.open = true
	default:
		var v rawSchema
		if json.Unmarshal(raw.AdditionalProperties, &v) == nil {
			n.values = b.node(&v)
		} else {
			n.open = true
		}
	}
	leaf := raw.IntOrString || raw.Type == "string" || raw.Type == "integer" || raw.Type == "number" || raw.Type == "boolean"
	if !leaf && raw.Type != "array" && n.props == nil && n.items == nil && n.values == nil && len(raw.AllOf) == 0 {
		n.open = true // an object declaring no fields, or a schema of any JSON
	}
}

// merge adds another schema's fields (allOf).
func (n *schemaNode) merge(o *schemaNode) {
	n.open = n.open || o.open
	if len(o.props) > 0 && n.props == nil {
		n.props = make(map[string]*schemaNode, len(o.props))
	}
	for k, v := range o.props {
		n.props[k] = v
	}
	if n.items == nil {
		n.items = o.items
	}
	if n.values == nil {
		n.values = o.values
	}
}

// kind is a kind's schema in the document, nil if it has none.
func (x *schemaIndex) kind(gvk schema.GroupVersionKind) *schemaNode {
	if x == nil {
		return nil
	}
	return x.kinds[gvk]
}

// has says whether a dotted field path names a field of the schema: through arrays (a path reads
// their elements) and maps (whose keys may hold dots).
func (n *schemaNode) has(path string) bool {
	return n.hasSegments(strings.Split(path, "."), 0)
}

// maxSchemaDepth bounds the walk: arrays of arrays and maps of maps are read through without using
// up a segment.
const maxSchemaDepth = 64

func (n *schemaNode) hasSegments(segs []string, depth int) bool {
	switch {
	case n.open || len(segs) == 0:
		return true
	case depth > maxSchemaDepth:
		return false
	}
	if p, ok := n.props[segs[0]]; ok && p.hasSegments(segs[1:], depth+1) {
		return true
	}
	if n.items != nil && n.items.hasSegments(segs, depth+1) {
		return true
	}
	if n.values != nil {
		for i := 1; i <= len(segs); i++ {
			if n.values.hasSegments(segs[i:], depth+1) {
				return true
			}
		}
	}
	return false
}
