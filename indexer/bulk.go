package indexer

import (
	"strconv"

	"github.com/kubesearch/kubesearch/internal/document"
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

// op is one _bulk operation, built from one event.
type op struct {
	seq    int // position in the batch, so retries keep the event order
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

	item *item // the event the op came from
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
}

// outcome is what the indexer does with an item's result.
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
	// outcomePermanent: it will never be accepted (a mapping conflict, say); dead-lettered.
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

// transient says an answer (a whole request's or one item's) may succeed later, so it is retried
// with backoff instead of the event being dead-lettered: OpenSearch cannot take it now (429, 5xx),
// the credentials or permissions are wrong (401, 403: an operator fixes them, and a permissions slip
// must not discard events), or the index refuses writes for now (cluster_block_exception: a roll
// copies it, see roll.go, or the disk passed the flood stage).
func transient(status int, errType string) bool {
	return status == 429 || status >= 500 || status == 401 || status == 403 || errType == "cluster_block_exception"
}
