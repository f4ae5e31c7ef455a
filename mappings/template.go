package mappings

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// Version is the version of the document shape and mapping in kubernetes.json. It is written to the
// template's "version" and "_meta.version" and to the mapping's "_meta.version", so an indexer can
// tell both an older template and an index created from one (GET <index>/_mapping carries the
// mapping's _meta). Bump it with any change of the mapping; a test keeps the file and this constant
// in step. Version 2 keys documents by (cluster, uid) (store.DocID) instead of uid alone: the roll
// to it re-keys the documents it copies. Version 3 adds the keyword "status" (sort=status): the roll
// to it rebuilds every document, which fills it. Version 4 adds the object "columns", one keyword
// sort key per printer column of the object's kind (sort=columns.<id>): its roll rebuilds every
// document too.
const Version = 4

// baseName is the unprefixed start of every index and template name.
const baseName = "kubernetes"

//go:embed kubernetes.json
var kubernetesTemplate []byte

// stateIndex is the body that creates the state index (watermarks, roll leases).
//
//go:embed state.json
var stateIndex []byte

// Options tailors the template to one installation. The zero value gives the defaults: no prefix,
// one shard, no replica, a refresh every second.
type Options struct {
	// Prefix separates installations sharing one OpenSearch cluster: indices become
	// "<prefix>-kubernetes-<kind>". Empty means none.
	Prefix string
	// Shards is index.number_of_shards; 0 means 1.
	Shards int
	// Replicas is index.number_of_replicas; AutoReplicas follows the cluster instead.
	Replicas int
	// RefreshInterval is index.refresh_interval: how long a write takes to become searchable.
	// 0 means 1s; a negative value turns periodic refresh off (bulk loads).
	RefreshInterval time.Duration
}

// AutoReplicas as Options.Replicas gives every index one replica once the cluster has a second
// data node, none before (index.auto_expand_replicas "0-1"): a copy of each shard survives the loss
// of a node on a cluster of several, and a single node's indices are not left yellow. OpenSearch
// adjusts the count as nodes join and leave.
const AutoReplicas = -1

// Validate reports every invalid option at once.
func (o Options) Validate() error {
	var errs []error
	if err := validatePrefix(o.Prefix); err != nil {
		errs = append(errs, err)
	}
	if o.Shards < 0 {
		errs = append(errs, fmt.Errorf("shards: must not be negative, got %d", o.Shards))
	}
	if o.Replicas < AutoReplicas {
		errs = append(errs, fmt.Errorf("replicas: must not be negative, got %d", o.Replicas))
	}
	if o.RefreshInterval > 0 && o.RefreshInterval%time.Millisecond != 0 {
		errs = append(errs, fmt.Errorf("refreshInterval: OpenSearch counts in whole milliseconds, got %s", o.RefreshInterval))
	}
	return errors.Join(errs...)
}

// validatePrefix keeps to a subset of OpenSearch's index name rules that is safe in every position
// of a name: lower case (index names must be), no characters OpenSearch forbids or treats as pattern
// syntax (*, ?, ",", spaces...), and no leading '-', '_', '+' or '.', which OpenSearch rejects or
// reserves for hidden and system indices.
func validatePrefix(p string) error {
	if p == "" {
		return nil
	}
	const maxPrefix = 100 // index names are limited to 255 bytes; leave room for the kind
	if len(p) > maxPrefix {
		return fmt.Errorf("prefix: at most %d characters, got %d", maxPrefix, len(p))
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case (c == '-' || c == '_' || c == '.') && i > 0:
		default:
			return fmt.Errorf("prefix %q: only lower-case letters, digits, and '-', '_', '.' after the first character", p)
		}
	}
	return nil
}

// IndexBase is what every index name of an installation starts with: "kubernetes-", or
// "<prefix>-kubernetes-". The indexer appends the lower-cased kind; the template matches it plus "*",
// which also matches versioned concrete indices behind an alias (e.g. kubernetes-pod-v2).
func IndexBase(prefix string) string {
	if prefix == "" {
		return baseName + "-"
	}
	return prefix + "-" + baseName + "-"
}

// TemplateName is the name to PUT the index template under (_index_template/<name>).
func TemplateName(prefix string) string {
	if prefix == "" {
		return baseName
	}
	return prefix + "-" + baseName
}

// IndexTemplate returns the body of PUT _index_template/<TemplateName(opts.Prefix)>: kubernetes.json
// with its index pattern, priority and index settings taken from opts. The JSON is rewritten by
// decoding and encoding it, never by string substitution, so no option can break its structure.
func IndexTemplate(opts Options) ([]byte, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("mappings: index template options: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(kubernetesTemplate))
	dec.UseNumber() // keep integers such as ignore_above exactly as written
	var tmpl map[string]any
	if err := dec.Decode(&tmpl); err != nil {
		return nil, fmt.Errorf("mappings: decode embedded kubernetes.json: %w", err)
	}

	base := IndexBase(opts.Prefix)
	tmpl["index_patterns"] = []string{base + "*"}

	// Templates whose patterns overlap must differ in priority, or OpenSearch refuses the second
	// one. A prefixed pattern can only overlap a shorter one (prefix "kubernetes" gives
	// "kubernetes-kubernetes-*", inside "kubernetes-*"), so a longer base gets a higher priority and
	// the more specific template wins; bases of equal length never overlap.
	prio, err := intAt(tmpl, "priority")
	if err != nil {
		return nil, err
	}
	tmpl["priority"] = prio + len(base) - len(IndexBase(""))

	index, err := objectAt(tmpl, "template", "settings", "index")
	if err != nil {
		return nil, err
	}
	shards := opts.Shards
	if shards == 0 {
		shards = 1
	}
	index["number_of_shards"] = shards
	setReplicas(index, opts.Replicas)
	index["refresh_interval"] = refreshInterval(opts.RefreshInterval)

	out, err := json.Marshal(tmpl)
	if err != nil {
		return nil, fmt.Errorf("mappings: encode index template: %w", err)
	}
	return out, nil
}

// RefreshIntervalSetting is the index.refresh_interval the template gives indices, in OpenSearch's
// syntax ("1s", "-1").
func (o Options) RefreshIntervalSetting() string { return refreshInterval(o.RefreshInterval) }

// refreshInterval renders d in OpenSearch's time unit syntax.
func refreshInterval(d time.Duration) string {
	switch {
	case d == 0:
		return "1s"
	case d < 0:
		return "-1"
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	default:
		return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
	}
}

// objectAt walks nested JSON objects; a missing or mistyped level is an error naming the path, as the
// embedded file is data a later edit could break.
func objectAt(m map[string]any, path ...string) (map[string]any, error) {
	cur := m
	for i, k := range path {
		next, ok := cur[k].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("mappings: kubernetes.json: %v is not an object", path[:i+1])
		}
		cur = next
	}
	return cur, nil
}

func intAt(m map[string]any, key string) (int, error) {
	n, ok := m[key].(json.Number)
	if !ok {
		return 0, fmt.Errorf("mappings: kubernetes.json: %s is not a number", key)
	}
	i, err := strconv.Atoi(n.String())
	if err != nil {
		return 0, fmt.Errorf("mappings: kubernetes.json: %s: %w", key, err)
	}
	return i, nil
}

// Document fields that hold the stored Kubernetes object. See README.md for why there are two.
const (
	// FieldObject is the object as indexed (flat_object). It lacks the string leaves listed in
	// FieldTrimmedPaths when those were too long to index.
	FieldObject = "object"
	// FieldFullObject holds the whole object, unindexed, when FieldObject had to be trimmed.
	FieldFullObject = "fullObject"
	// FieldTrimmedPaths lists the dotted paths left out of FieldObject.
	FieldTrimmedPaths = "trimmedPaths"
)

// ErrNoObject says a document's _source holds no Kubernetes object.
var ErrNoObject = errors.New("mappings: document has no object")

// StoredObject returns the Kubernetes object a document stores, as it was collected (plus the
// cache-source annotation): fullObject when present, otherwise object. Readers (REST API, facade)
// should use it rather than reading "object" directly, which may be trimmed. The result aliases
// source.
func StoredObject(source []byte) ([]byte, error) {
	res := gjson.GetManyBytes(source, FieldFullObject, FieldObject)
	for _, r := range res {
		if r.IsObject() {
			if r.Index > 0 {
				return source[r.Index : r.Index+len(r.Raw)], nil
			}
			return []byte(r.Raw), nil
		}
	}
	return nil, ErrNoObject
}

// StateIndex is the index holding the watermarks and roll leases: "kubesearch-state", or
// "<prefix>-kubesearch-state". It lies outside the pattern of the document template.
func StateIndex(prefix string) string {
	if prefix == "" {
		return "kubesearch-state"
	}
	return prefix + "-kubesearch-state"
}

// IndexName is the index (or write alias) that documents of kind go to: "kubernetes-<kind>" with the
// kind lower-cased, as OpenSearch index names must be, behind the optional prefix
// ("<prefix>-kubernetes-<kind>"). It matches the pattern of IndexTemplate for the same prefix.
func IndexName(prefix, kind string) string {
	return IndexBase(prefix) + strings.ToLower(kind)
}

// StateIndexBody is the body that creates the state index, with the replicas of opts (one shard: it
// holds one small document per pair).
func StateIndexBody(opts Options) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(stateIndex))
	dec.UseNumber()
	var body map[string]any
	if err := dec.Decode(&body); err != nil {
		return nil, fmt.Errorf("mappings: decode embedded state.json: %w", err)
	}
	setReplicas(body["settings"].(map[string]any)["index"].(map[string]any), opts.Replicas)
	return json.Marshal(body)
}

// setReplicas sets the replication of index settings: a number, or AutoReplicas.
func setReplicas(index map[string]any, replicas int) {
	if replicas == AutoReplicas {
		delete(index, "number_of_replicas")
		index["auto_expand_replicas"] = "0-1"
		return
	}
	index["number_of_replicas"] = replicas
}
