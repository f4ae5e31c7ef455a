// Package osstoretest is a fake OpenSearch for the tests of what writes through internal/osstore:
// Server serves the REST calls the store makes for the indexer (template, indices and aliases,
// _bulk, _mget, refreshes, garbage collection and state searches) over an Engine that keeps
// documents as OpenSearch's engine does for what kubesearch relies on. It leaves out queries (the
// query API's tests fake their own answers) and rolls.
package osstoretest

import (
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/tidwall/gjson"
)

// Engine keeps documents as OpenSearch's engine does for what the indexer relies on: external_gte
// versions compared with live documents and with delete tombstones alike (tombstones never expire
// here, as within index.gc_deletes), internal versioning (a tombstone's version + 1 over one), and
// compare-and-set on _seq_no, which a tombstone never matches. As in OpenSearch a tombstone keeps
// its version only, never a source, so nothing read back tells the epoch of the delete; _mget
// answers found: false for it, and a _bulk item carries the _version a write left (a delete's, even
// answered 404). Documents are kept under the name they were written to. It is safe for concurrent
// use.
type Engine struct {
	mu    sync.Mutex
	docs  map[key]*doc
	seqNo int64
}

type key struct{ index, id string }

type doc struct {
	version     int64
	deleted     bool
	seqNo       int64
	primaryTerm int64
	source      []byte
}

// NewEngine returns an empty engine.
func NewEngine() *Engine { return &Engine{docs: map[key]*doc{}} }

// Write is one operation of a _bulk request.
type Write struct {
	Delete    bool
	Index, ID string
	Doc       []byte
	// Versioned writes carry Version with version_type external_gte.
	Versioned bool
	Version   int64
	// CAS writes apply only while the document has SeqNo and PrimaryTerm.
	CAS         bool
	SeqNo       int64
	PrimaryTerm int64
}

// Result is the engine's answer to one Write, as a _bulk item carries it.
type Result struct {
	Status  int
	ErrType string
	Reason  string
	// Version is the _version the write left (the document's, or a delete's tombstone's); 0 when
	// it was refused.
	Version int64
}

// Apply applies one write.
func (e *Engine) Apply(w Write) Result {
	e.mu.Lock()
	defer e.mu.Unlock()
	k := key{w.Index, w.ID}
	cur := e.docs[k]
	var next int64
	switch {
	case w.CAS:
		if cur == nil || cur.deleted || cur.seqNo != w.SeqNo || cur.primaryTerm != w.PrimaryTerm {
			return Result{Status: 409, ErrType: "version_conflict_engine_exception", Reason: "seq_no mismatch"}
		}
		next = cur.version + 1
	case w.Versioned:
		if cur != nil && cur.version > w.Version {
			return Result{Status: 409, ErrType: "version_conflict_engine_exception",
				Reason: "current version [" + strconv.FormatInt(cur.version, 10) + "] is higher than the one provided [" + strconv.FormatInt(w.Version, 10) + "]"}
		}
		next = w.Version
	default:
		next = 1
		if cur != nil {
			next = cur.version + 1
		}
	}
	e.seqNo++
	if w.Delete {
		missing := cur == nil || cur.deleted
		e.docs[k] = &doc{version: next, deleted: true, seqNo: e.seqNo, primaryTerm: 1}
		if missing {
			return Result{Status: 404, Version: next}
		}
		return Result{Status: 200, Version: next}
	}
	e.docs[k] = &doc{version: next, seqNo: e.seqNo, primaryTerm: 1, source: w.Doc}
	if cur == nil || cur.deleted {
		return Result{Status: 201, Version: next}
	}
	return Result{Status: 200, Version: next}
}

// Stored is a live document.
type Stored struct {
	Version, SeqNo, PrimaryTerm int64
	Source                      []byte
}

// Get returns the live document index/id, if there is one.
func (e *Engine) Get(index, id string) (Stored, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	d := e.docs[key{index, id}]
	if d == nil || d.deleted {
		return Stored{}, false
	}
	return Stored{Version: d.version, SeqNo: d.seqNo, PrimaryTerm: d.primaryTerm, Source: d.source}, true
}

// Version is the _version of a document, or of its tombstone; 0 when there is neither.
func (e *Engine) Version(index, id string) int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if d := e.docs[key{index, id}]; d != nil {
		return d.version
	}
	return 0
}

// State is "absent", "deleted" or "epoch/resourceVersion" of a live document.
func (e *Engine) State(index, id string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	d := e.docs[key{index, id}]
	switch {
	case d == nil:
		return "absent"
	case d.deleted:
		return "deleted"
	}
	return strconv.FormatInt(gjson.GetBytes(d.source, "epoch").Int(), 10) + "/" +
		strconv.FormatInt(gjson.GetBytes(d.source, "resourceVersion").Int(), 10)
}

// Source is the raw source of a live document, or "".
func (e *Engine) Source(index, id string) string {
	if d, ok := e.Get(index, id); ok {
		return string(d.Source)
	}
	return ""
}

type liveDoc struct {
	id      string
	version int64
	source  []byte
}

// match returns the live documents of index that pass every term and range (lt) filter, in id order.
func (e *Engine) match(index string, filter gjson.Result) []liveDoc {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []liveDoc
	for k, d := range e.docs {
		if k.index != index || d.deleted {
			continue
		}
		ok := true
		filter.ForEach(func(_, c gjson.Result) bool {
			if t := c.Get("term"); t.Exists() {
				t.ForEach(func(field, v gjson.Result) bool {
					got := gjson.GetBytes(d.source, field.Str)
					ok = ok && got.Exists() && got.String() == v.String()
					return false
				})
			}
			if rg := c.Get("range"); rg.Exists() {
				rg.ForEach(func(field, v gjson.Result) bool {
					ok = ok && gjson.GetBytes(d.source, field.Str).Int() < v.Get("lt").Int()
					return false
				})
			}
			return ok
		})
		if ok {
			out = append(out, liveDoc{k.id, d.version, d.source})
		}
	}
	slices.SortFunc(out, func(a, b liveDoc) int { return strings.Compare(a.id, b.id) })
	return out
}
