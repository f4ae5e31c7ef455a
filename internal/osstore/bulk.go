package osstore

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/mappings"
)

// action is what a _bulk operation does to a document.
type action uint8

const (
	actionIndex action = iota
	actionDelete
)

func (a action) String() string {
	if a == actionDelete {
		return "delete"
	}
	return "index"
}

// op is one _bulk operation: a store.Op with its index, or a write of the store's own (a roll's
// copy, a watermark).
type op struct {
	pos    int // position in the slice given to Write: failures name it, and retries keep the order
	action action
	index  string // alias (or index) written to
	id     string // the object's uid
	doc    []byte // the document, for actionIndex

	// versioned ops carry version (the resourceVersion) with version_type external_gte, so a replayed
	// or late event never overwrites newer state. Non-integer resourceVersions are written without.
	versioned bool
	version   int64
	epoch     int64
	// requireAlias makes an index op fail rather than auto-create a concrete index when its alias
	// vanished (someone deleted the index while the indexer ran).
	requireAlias bool

	// cas replaces version: the op applies only while the document is still the one read by the
	// epoch rule (if_seq_no, if_primary_term).
	cas         bool
	seqNo       int64
	primaryTerm int64
}

// docKey names one document.
type docKey struct{ index, id string }

func (o *op) key() docKey { return docKey{o.index, o.id} }

// newerThan reports whether the op's event is newer than a stored document's: a newer epoch wins
// whatever the resourceVersions say (a rebuilt member counts from low numbers again); within one epoch
// the higher resourceVersion wins.
func (o *op) newerThan(epoch, rv int64) bool {
	if o.epoch != epoch {
		return o.epoch > epoch
	}
	return o.version > rv
}

// casOf returns a copy of o that replaces the stored document only while it is unchanged.
func (o *op) casOf(seqNo, primaryTerm int64) *op {
	c := *o
	c.versioned, c.cas, c.seqNo, c.primaryTerm = false, true, seqNo, primaryTerm
	return &c
}

// appendBulk appends the NDJSON of ops to dst: an action line per op, and the document line of each
// index op. Documents are single-line JSON (BuildDocument guarantees it).
func appendBulk(dst []byte, ops []*op) []byte {
	for _, o := range ops {
		dst = append(dst, `{"`...)
		dst = append(dst, o.action.String()...)
		dst = append(dst, `":{"_index":`...)
		dst = document.AppendString(dst, o.index)
		dst = append(dst, `,"_id":`...)
		dst = document.AppendString(dst, o.id)
		switch {
		case o.cas:
			dst = append(dst, `,"if_seq_no":`...)
			dst = strconv.AppendInt(dst, o.seqNo, 10)
			dst = append(dst, `,"if_primary_term":`...)
			dst = strconv.AppendInt(dst, o.primaryTerm, 10)
		case o.versioned:
			dst = append(dst, `,"version":`...)
			dst = strconv.AppendInt(dst, o.version, 10)
			dst = append(dst, `,"version_type":"external_gte"`...)
		}
		if o.action == actionIndex && o.requireAlias {
			dst = append(dst, `,"require_alias":true`...)
		}
		dst = append(dst, "}}\n"...)
		if o.action == actionIndex {
			dst = append(dst, o.doc...)
			dst = append(dst, '\n')
		}
	}
	return dst
}

// bulkSize is the size of the NDJSON of ops, without building it.
func bulkSize(ops []*op) int {
	n := 0
	for _, o := range ops {
		n += 160 + len(o.index) + len(o.id)
		if o.action == actionIndex {
			n += len(o.doc) + 1
		}
	}
	return n
}

// itemResult is OpenSearch's answer for one operation of a _bulk request.
type itemResult struct {
	status  int
	errType string // error.type, e.g. version_conflict_engine_exception
	reason  string // error.reason, with caused_by when there is one
	version int64  // _version the op left: a delete's is its tombstone's; 0 when not answered
}

// outcome is what the writer does with an item's result.
type outcome uint8

const (
	// outcomeDone: written, or a delete of a document (or index) that is not there.
	outcomeDone outcome = iota
	// outcomeConflict: the stored document has a higher version; the epoch rule decides.
	outcomeConflict
	// outcomeRetry: OpenSearch could not take it now (429, 5xx); retried with backoff.
	outcomeRetry
	// outcomeMissingAlias: the alias an index op requires is gone; recreated, then retried.
	outcomeMissingAlias
	// outcomePermanent: it will never be accepted (a mapping conflict, say); a store.Failure.
	outcomePermanent
)

func (o outcome) String() string {
	return [...]string{"done", "conflict", "retry", "missing-alias", "permanent"}[o]
}

// classify decides what to do with the result of an op.
func classify(a action, r itemResult) outcome {
	switch {
	case r.status >= 200 && r.status < 300:
		return outcomeDone
	case r.status == 404 && a == actionDelete:
		// The document is not there (OpenSearch still records the delete's version, so a late index
		// of an older version is refused), or the index was never created.
		return outcomeDone
	case r.status == 404 && r.errType == "index_not_found_exception":
		return outcomeMissingAlias
	case r.status == 409:
		return outcomeConflict
	case transient(r.status, r.errType):
		return outcomeRetry
	default:
		return outcomePermanent
	}
}

// bulk implements docStore.
func (s *Store) bulk(ctx context.Context, ops []*op) ([]itemResult, error) {
	body := appendBulk(make([]byte, 0, bulkSize(ops)), ops)
	s.metrics.bulkBytes.Observe(float64(len(body)))
	s.metrics.bulkItems.Observe(float64(len(ops)))
	status, resp, err := s.do(ctx, http.MethodPost, request{path: "/_bulk", body: body, ndjson: true})
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, responseError("POST", "/_bulk", status, resp)
	}
	return parseBulkResponse(resp, len(ops))
}

// parseBulkResponse reads the per-item results of a _bulk answer.
func parseBulkResponse(body []byte, n int) ([]itemResult, error) {
	items := gjson.GetBytes(body, "items")
	if !items.IsArray() {
		return nil, &requestError{status: 200, err: fmt.Errorf("_bulk answer has no items: %s", truncate(body, 256))}
	}
	out := make([]itemResult, 0, n)
	items.ForEach(func(_, it gjson.Result) bool {
		// Each item is {"<action>": {...}}.
		var r itemResult
		it.ForEach(func(_, v gjson.Result) bool {
			r.status = int(v.Get("status").Int())
			r.version = v.Get("_version").Int()
			if e := v.Get("error"); e.Exists() {
				r.errType, r.reason = errorCause(e)
			}
			return false
		})
		out = append(out, r)
		return true
	})
	if len(out) != n {
		// The answer does not line up with the request; nothing in it can be trusted per item.
		return nil, &requestError{status: 200, err: fmt.Errorf("_bulk answered %d items for %d operations", len(out), n)}
	}
	return out, nil
}

// storedVersions implements docStore with one _mget, realtime (it sees writes not yet refreshed).
func (s *Store) storedVersions(ctx context.Context, keys []docKey) (map[docKey]storedDoc, error) {
	type doc struct {
		Index string `json:"_index"`
		ID    string `json:"_id"`
	}
	req := struct {
		Docs []doc `json:"docs"`
	}{Docs: make([]doc, len(keys))}
	for i, k := range keys {
		req.Docs[i] = doc{k.index, k.id}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode _mget: %w", err)
	}
	// The labels are the change feed's (Priors); the epoch rule reads the rest.
	q := url.Values{"_source_includes": {"epoch,resourceVersion,object.metadata.labels,fullObject.metadata.labels"}}
	status, resp, err := s.do(ctx, http.MethodPost, request{path: "/_mget", query: q, body: body})
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, responseError("POST", "/_mget", status, resp)
	}
	return parseMget(resp, keys)
}

func parseMget(body []byte, keys []docKey) (map[docKey]storedDoc, error) {
	docs := gjson.GetBytes(body, "docs").Array()
	if len(docs) != len(keys) {
		return nil, fmt.Errorf("_mget answered %d documents for %d", len(docs), len(keys))
	}
	out := make(map[docKey]storedDoc, len(keys))
	for i, d := range docs {
		// An error (index_not_found_exception) means not found as well.
		s := storedDoc{found: d.Get("found").Bool()}
		if s.found {
			s.epoch = d.Get("_source.epoch").Int()
			s.rv = d.Get("_source.resourceVersion").Int()
			if obj, err := mappings.StoredObject([]byte(d.Get("_source").Raw)); err == nil {
				if l := gjson.GetBytes(obj, "metadata.labels"); l.IsObject() {
					s.labels = json.RawMessage(l.Raw)
				}
			}
			if sq := d.Get("_seq_no"); sq.Exists() {
				s.hasSeqNo, s.seqNo, s.primaryTerm = true, sq.Int(), d.Get("_primary_term").Int()
			}
		}
		out[keys[i]] = s
	}
	return out, nil
}
