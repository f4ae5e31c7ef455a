package blevestore

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	bdoc "github.com/blevesearch/bleve/v2/document"
	index "github.com/blevesearch/bleve_index_api"
	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/mappings"
)

// Every document of every kind lives in one bleve index. Its fields are built here, not by a bleve
// mapping, so each is exactly what the OpenSearch mapping (mappings/kubernetes.json) makes of the
// same document:
//
//   - keyword fields: one term per value, as written (values over ignore_above left out);
//   - long and date fields: one sortable term per value (enc), dates in epoch milliseconds as
//     OpenSearch keeps them;
//   - text and name.text: the standard analyzer's words (analysis.go);
//   - the object (flat_object): every leaf as the term "path=value" in fieldLeaf, and its path in
//     fieldLeafPath, so a field selector on any path is a term query and a leaf's presence one too;
//   - the sort keys (columns, an object of keywords): each member its own keyword field
//     "columns.<id>" with doc values, as OpenSearch maps columns.<id>;
//   - fieldPresent names the typed fields a document has a value in (OpenSearch's exists);
//   - what is read of the document is stored, unindexed: the object as items answer it, written
//     once here (fieldObject, source.go), and the cluster, resource and epoch as the document has
//     them (fieldHead). The rest of the document — its typed fields and text, most of it — is
//     indexed from and never read again, so it is not kept.
//
// Indices written by earlier versions stored the whole document in fieldSource instead: their
// documents are read from it as before (stored.go), until they are written again.
const (
	fieldIndex    = "_index" // the OpenSearch index the document would be in: the kind, lower-cased
	fieldVersion  = "_version"
	fieldPresent  = "_present"
	fieldLeaf     = "_leaf"
	fieldLeafPath = "_leafpath"
	fieldObject   = "_object"
	fieldHead     = "_head"
	fieldSource   = "_source" // the earlier format's whole document; also a document without an object
)

// fieldType is how a top-level field of a document is indexed.
type fieldType uint8

const (
	typeKeyword fieldType = iota + 1
	typeLong
	typeDate
	typeText
	typeFlat
	typeColumns // the object of sort keys: each member a keyword field "columns.<id>" with doc values
	typeOther   // stored, not searched here: validated like OpenSearch would, where cheap
)

type fieldSpec struct {
	typ fieldType
	// docValues: sorts, facets and the per-pair counts read the field of every match. A segment
	// written before a field had them (kind, before sort=kind) still reads it: bleve uninverts the
	// field's terms, more slowly, until its documents are written again.
	docValues bool
	// ignoreMalformed: a value OpenSearch cannot parse is left out rather than failing the document.
	ignoreMalformed bool
}

// fields is the OpenSearch mapping of every field this store searches, sorts or aggregates on; a
// test holds it against document.Fields.
var fields = map[string]fieldSpec{
	document.FieldCluster:           {typ: typeKeyword, docValues: true},
	document.FieldGroup:             {typ: typeKeyword, docValues: true},
	document.FieldVersion:           {typ: typeKeyword},
	document.FieldResource:          {typ: typeKeyword, docValues: true},
	document.FieldKind:              {typ: typeKeyword, docValues: true},
	document.FieldAPIVersion:        {typ: typeKeyword},
	document.FieldNamespace:         {typ: typeKeyword, docValues: true},
	document.FieldName:              {typ: typeKeyword, docValues: true},
	document.FieldUID:               {typ: typeKeyword, docValues: true},
	document.FieldResourceVersion:   {typ: typeLong, docValues: true},
	document.FieldEpoch:             {typ: typeLong, docValues: true},
	document.FieldCreationTimestamp: {typ: typeDate, docValues: true, ignoreMalformed: true},
	document.FieldDeletionTimestamp: {typ: typeDate, ignoreMalformed: true},
	document.FieldLastChangedAt:     {typ: typeDate, docValues: true},
	document.FieldLabels:            {typ: typeKeyword, docValues: true},
	document.FieldLabelKeys:         {typ: typeKeyword},
	document.FieldAnnotationKeys:    {typ: typeKeyword},
	document.FieldOwnerUIDs:         {typ: typeKeyword},
	document.FieldOwnerKinds:        {typ: typeKeyword},
	document.FieldOwnerRefs:         {typ: typeKeyword},
	document.FieldConditions:        {typ: typeKeyword},
	document.FieldPhase:             {typ: typeKeyword},
	document.FieldStatus:            {typ: typeKeyword, docValues: true},
	document.FieldColumns:           {typ: typeColumns, docValues: true},
	document.FieldNodeName:          {typ: typeKeyword},
	document.FieldQOSClass:          {typ: typeKeyword},
	document.FieldContainerNames:    {typ: typeKeyword},
	document.FieldImages:            {typ: typeKeyword},
	document.FieldKubeletVersion:    {typ: typeKeyword},
	document.FieldType:              {typ: typeKeyword},
	document.FieldReason:            {typ: typeKeyword},
	document.FieldTrimmedPaths:      {typ: typeKeyword},
	document.FieldText:              {typ: typeText},
	document.FieldObject:            {typ: typeFlat},
}

// ignoreAbove is the keyword fields' ignore_above, in characters (UTF-16 code units, as Java
// counts them).
const ignoreAbove = 8191

// columnIgnoreAbove is the sort keys' ignore_above (mappings/kubernetes.json's columns): the
// builder cuts them shorter (table.MaxKeyBytes), so it only guards a document written otherwise.
const columnIgnoreAbove = 256

// flatDepthLimit is OpenSearch's index.mapping.depth.limit, which flat_object applies to the
// nesting of the object's inner objects: a deeper object is refused.
const flatDepthLimit = 20

// stored is what the write rule keeps of a document (or of its tombstone).
type stored struct {
	version   int64 // OpenSearch's _version: the resourceVersion, or an internal count after an overwrite
	epoch, rv int64 // the document's, or a tombstone's delete event's when judged
	deleted   bool
	deletedAt time.Time
	// judged tombstones know the epoch and resourceVersion of their delete, as osstore's writer
	// remembers those of the deletes it wrote; garbage collection's tombstones do not.
	judged bool
}

// docID is the bleve id of a document: OpenSearch's (index, _id), id being store.DocID.
func docID(kind, id string) string { return indexOf(kind) + "\x00" + id }

func indexOf(kind string) string { return strings.ToLower(kind) }

// enc is a sortable term of an integer: terms compare as bytes, so fixed-width big-endian hex with
// the sign bit flipped orders like the integers.
func enc(v int64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(v)^(1<<63))
	return hex.EncodeToString(b[:])
}

func dec(s []byte) (int64, bool) {
	var b [8]byte
	if len(s) != 16 {
		return 0, false
	}
	if _, err := hex.Decode(b[:], s); err != nil {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(b[:]) ^ (1 << 63)), true
}

// mappingError is a document OpenSearch would refuse with a mapper_parsing_exception.
func mappingError(format string, args ...any) error {
	return fmt.Errorf("mapper_parsing_exception: "+format, args...)
}

// build makes the bleve document of a store document, or says why OpenSearch would refuse it.
func build(id, kind string, doc []byte, version int64) (*bdoc.Document, stored, error) {
	if !gjson.ValidBytes(doc) {
		return nil, stored{}, errors.New("mapper_parsing_exception: failed to parse: not valid JSON")
	}
	root := gjson.ParseBytes(doc)
	if !root.IsObject() {
		return nil, stored{}, errors.New("mapper_parsing_exception: failed to parse: the document is not a JSON object")
	}
	if k := duplicateKey(root); k != "" {
		return nil, stored{}, mappingError("failed to parse: Duplicate field '%s'", k)
	}
	d := bdoc.NewDocument(id)
	st := stored{version: version}
	keyword := func(name string, terms []string, docValues bool) {
		if len(terms) == 0 {
			return
		}
		opts := index.IndexField
		if docValues {
			opts |= index.DocValues
		}
		d.AddField(bdoc.NewTextFieldCustom(name, nil, nil, opts, termsAnalyzer(terms)))
	}
	var present []string
	var errs []error
	root.ForEach(func(k, v gjson.Result) bool {
		spec, ok := fields[k.Str]
		if !ok {
			return true
		}
		var terms []string
		switch spec.typ {
		case typeKeyword:
			vals, err := scalars(k.Str, "keyword", v)
			if err != nil {
				errs = append(errs, err)
				return false
			}
			for _, s := range vals {
				if len(utf16.Encode([]rune(s))) <= ignoreAbove {
					terms = append(terms, s)
				}
			}
			if k.Str == document.FieldName {
				var w []string
				for _, s := range vals {
					w = append(w, words([]byte(s))...)
				}
				keyword(document.FieldNameText, w, false)
			}
		case typeLong:
			vals, err := longs(k.Str, v)
			if err != nil {
				errs = append(errs, err)
				return false
			}
			for _, n := range vals {
				terms = append(terms, enc(n))
			}
			if len(vals) > 0 {
				switch k.Str {
				case document.FieldEpoch:
					st.epoch = vals[0]
				case document.FieldResourceVersion:
					st.rv = vals[0]
				}
			}
		case typeDate:
			vals, err := dates(k.Str, v, spec.ignoreMalformed)
			if err != nil {
				errs = append(errs, err)
				return false
			}
			for _, n := range vals {
				terms = append(terms, enc(n))
			}
		case typeText:
			vals, err := scalars(k.Str, "text", v)
			if err != nil {
				errs = append(errs, err)
				return false
			}
			for _, s := range vals {
				terms = append(terms, words([]byte(s))...)
			}
		case typeColumns:
			if v.Type == gjson.Null {
				return true
			}
			if !v.IsObject() {
				errs = append(errs, mappingError("object mapping for [%s] tried to parse field [%s] as object, but found a concrete value", k.Str, k.Str))
				return false
			}
			v.ForEach(func(id, key gjson.Result) bool {
				name := k.Str + "." + id.Str
				vals, err := scalars(name, "keyword", key)
				if err != nil {
					errs = append(errs, err)
					return false
				}
				var terms []string
				for _, s := range vals {
					if len(utf16.Encode([]rune(s))) <= columnIgnoreAbove {
						terms = append(terms, s)
					}
				}
				keyword(name, terms, true)
				return true
			})
			return true
		case typeFlat:
			if v.Type == gjson.Null {
				return true
			}
			if !v.IsObject() {
				errs = append(errs, mappingError("object mapping for [%s] tried to parse field [%s] as object, but found a concrete value", k.Str, k.Str))
				return false
			}
			f := flattener{leaves: map[string]bool{}, paths: map[string]bool{}}
			if err := f.walk(v, mappings.FieldObject, 1); err != nil {
				errs = append(errs, err)
				return false
			}
			keyword(fieldLeaf, keys(f.leaves), false)
			keyword(fieldLeafPath, keys(f.paths), false)
			return true
		}
		if len(terms) > 0 {
			present = append(present, k.Str)
		}
		keyword(k.Str, terms, spec.docValues)
		return true
	})
	if err := errors.Join(errs...); err != nil {
		return nil, stored{}, err
	}
	keyword(fieldPresent, present, false)
	keyword(fieldIndex, []string{indexOf(kind)}, true)
	keyword(fieldVersion, []string{enc(version)}, true)
	obj, err := mappings.StoredObject(doc)
	if err != nil {
		// Kept whole, as it was: reading it fails as it always did (search.go).
		d.AddField(bdoc.NewTextFieldCustom(fieldSource, nil, doc, index.StoreField, nil))
		return d, st, nil
	}
	d.AddField(bdoc.NewTextFieldCustom(fieldObject, nil, item(obj, false), index.StoreField, nil))
	d.AddField(bdoc.NewTextFieldCustom(fieldHead, nil, head(root), index.StoreField, nil))
	return d, st, nil
}

// headFields are what fieldHead keeps of a document: what a page's epochs and garbage
// collection's reports read besides the object.
var headFields = []string{document.FieldCluster, document.FieldResource, document.FieldEpoch}

// head is the JSON object of root's headFields, their values as root has them.
func head(root gjson.Result) []byte {
	out := []byte{'{'}
	for i, v := range gjson.GetMany(root.Raw, headFields...) {
		if !v.Exists() {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = appendJSONString(out, headFields[i])
		out = append(out, ':')
		out = append(out, v.Raw...)
	}
	return append(out, '}')
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// scalars are the values of a keyword or text field: strings, and numbers and booleans as their
// text (OpenSearch coerces them); nulls are no value; arrays hold values.
func scalars(name, typ string, v gjson.Result) ([]string, error) {
	switch v.Type {
	case gjson.Null:
		return nil, nil
	case gjson.String:
		return []string{v.Str}, nil
	case gjson.Number, gjson.True, gjson.False:
		return []string{v.Raw}, nil
	}
	if !v.IsArray() {
		return nil, mappingError("failed to parse field [%s] of type [%s]: an object", name, typ)
	}
	var out []string
	for _, e := range v.Array() {
		vals, err := scalars(name, typ, e)
		if err != nil {
			return nil, err
		}
		out = append(out, vals...)
	}
	return out, nil
}

// longs are the values of a long field: numbers (decimals truncated) or numeric strings.
func longs(name string, v gjson.Result) ([]int64, error) {
	bad := func() error { return mappingError("failed to parse field [%s] of type [long]: %s", name, v.Raw) }
	switch v.Type {
	case gjson.Null:
		return nil, nil
	case gjson.Number:
		if n, err := strconv.ParseInt(v.Raw, 10, 64); err == nil {
			return []int64{n}, nil
		}
		if v.Num >= math.MaxInt64 || v.Num < math.MinInt64 {
			return nil, bad()
		}
		return []int64{int64(v.Num)}, nil
	case gjson.String:
		s := strings.TrimSpace(v.Str)
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return []int64{n}, nil
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil && f < math.MaxInt64 && f >= math.MinInt64 {
			return []int64{int64(f)}, nil
		}
		return nil, bad()
	}
	if !v.IsArray() {
		return nil, bad()
	}
	var out []int64
	for _, e := range v.Array() {
		n, err := longs(name, e)
		if err != nil {
			return nil, err
		}
		out = append(out, n...)
	}
	return out, nil
}

// dates are the values of a date field (strict_date_optional_time||epoch_millis) in epoch
// milliseconds, the resolution OpenSearch keeps.
func dates(name string, v gjson.Result, ignoreMalformed bool) ([]int64, error) {
	switch v.Type {
	case gjson.Null:
		return nil, nil
	case gjson.String, gjson.Number:
		ms, ok := parseDate(v)
		switch {
		case ok:
			return []int64{ms}, nil
		case ignoreMalformed:
			return nil, nil
		}
		return nil, mappingError("failed to parse field [%s] of type [date]: %s", name, v.Raw)
	}
	if !v.IsArray() {
		if ignoreMalformed {
			return nil, nil
		}
		return nil, mappingError("failed to parse field [%s] of type [date]: %s", name, v.Raw)
	}
	var out []int64
	for _, e := range v.Array() {
		n, err := dates(name, e, ignoreMalformed)
		if err != nil {
			return nil, err
		}
		out = append(out, n...)
	}
	return out, nil
}

var dateLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02T15:04", "2006-01-02T15", "2006-01-02", "2006-01", "2006"}

func parseDate(v gjson.Result) (int64, bool) {
	if v.Type == gjson.Number {
		n, err := strconv.ParseInt(v.Raw, 10, 64)
		return n, err == nil
	}
	for _, l := range dateLayouts {
		if t, err := time.Parse(l, v.Str); err == nil {
			return t.UnixMilli(), true
		}
	}
	if n, err := strconv.ParseInt(v.Str, 10, 64); err == nil {
		return n, true
	}
	return 0, false
}

// flattener collects the leaves of a flat_object as OpenSearch's JsonToStringXContentParser does:
// the dotted path of object keys (array positions left out), scalar values as their JSON text
// (strings unquoted), nulls left out.
type flattener struct {
	leaves, paths map[string]bool
}

func (f *flattener) walk(v gjson.Result, path string, depth int) error {
	switch {
	case v.IsObject():
		if depth >= flatDepthLimit {
			return mappingError("the depth of flat_object field path [%s] is bigger than maximum depth [%d]", path, flatDepthLimit)
		}
		var err error
		v.ForEach(func(k, c gjson.Result) bool {
			next := depth
			if c.IsObject() {
				next++
			}
			err = f.walk(c, path+"."+k.Str, next)
			return err == nil
		})
		return err
	case v.IsArray():
		var err error
		v.ForEach(func(_, c gjson.Result) bool {
			next := depth
			if c.IsObject() {
				next++
			}
			err = f.walk(c, path, next)
			return err == nil
		})
		return err
	case v.Type == gjson.Null:
		return nil
	}
	val := v.Str
	if v.Type != gjson.String {
		val = v.Raw
	}
	p := strings.TrimPrefix(path, mappings.FieldObject+".")
	f.leaves[p+"="+val] = true
	f.paths[p] = true
	return nil
}
