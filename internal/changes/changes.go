// Package changes is the change feed (issue 25): every change the indexers make to the index, in
// the order they make it, as records of a Kafka topic ("<events topic>.changes") with as many
// partitions as the event stream. A record is the envelope of the event that made the change, its
// type saying what the change did to the index (ADDED: a new document, MODIFIED: a document
// replaced, DELETED: a document removed), plus where the event was read (Source) and what the
// index held before (Previous). Events that change nothing are left out: a re-list repeating an
// unchanged object, a replay of an older state. The documents a SYNC or PURGE marker removes are
// DELETED records, each followed by the marker itself, so a reader of the feed needs no copy of
// the index to tell what went away.
//
// Why a feed: a reader of the event stream itself (the query API's watch cache) must keep the
// identity of every object of the fleet to tell a change from a repeat, and to turn a SYNC into
// deletions — memory that grows with the fleet, and a position per cluster. The indexer already
// reads what the index holds for every write (the epoch rule); published, that makes the feed's
// offsets a position of fixed size, and its readers stateless.
//
// Order and delivery: a record is published before its change is written (a record whose change
// is not searchable yet is a change a LIST does not show yet: a watch from the LIST's position
// replays it). Partition p of the feed holds the changes of the event stream's partition p (the
// same key, the pair, hashes to the same partition of topics of equal size), written by the one
// indexer consuming it, so the feed keeps the stream's order per pair. A crash between publishing
// and writing publishes the change again: records may repeat, never go missing. A consumer that
// lost its partition in a rebalance may still publish a batch in flight behind its successor's
// records. Source.Batch tells them: records of one batch carry the batch's last offset, which
// grows from batch to batch; a reader drops a record whose Batch is below one it read already.
// That loses nothing: each consumer starts at the offset committed before it, which is at most
// what was published, and publishes every batch in order, so once a record of Batch b is in the
// feed, records for every event up to b are too. (Within a batch, records are not in offset
// order: a batch's SYNC markers come after its object events.)
//
// It leaves out reading the feed (the watch cache's) and its retention (the topic's).
package changes

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/store"
)

// Suffix names the feed of an events topic: "<topic>.changes".
const Suffix = ".changes"

// None, as a feed topic, says there is none: the indexer publishes no feed, the query API follows
// the event stream.
const None = "none"

// TopicOf is the feed topic of the events topic.
func TopicOf(events string) string { return events + Suffix }

// BookmarkGroup is the consumer group, never joined, in which the indexers of group commit, on the
// feed topic, where a reader must start to miss no change the index does not show yet: after each
// batch is written, the feed's end as it was before the batch published anything (every record
// below it is of a batch written before). A reader starting there, less the changes written but
// not yet searchable, needs nothing older.
func BookmarkGroup(indexerGroup string) string { return indexerGroup + Suffix }

// Record is one change of the index.
type Record struct {
	envelope.Event
	Source Source `json:"source"`
	// Previous is what the index held of the object before an ADDED, MODIFIED or DELETED record's
	// change (for ADDED: nothing, nil).
	Previous *Previous `json:"previous,omitempty"`
	// Marker is set on the DELETED records of a marker's collection: SYNC or PURGE. Their
	// ListResourceVersion is the SYNC's (the list that found the object gone).
	Marker envelope.Type `json:"marker,omitempty"`
}

// Source is where the event that made the change was read: its partition and offset, and the last
// offset in that partition of the batch that published it (see above).
type Source struct {
	Partition int   `json:"partition"`
	Offset    int64 `json:"offset"`
	Batch     int64 `json:"batch"`
}

// Previous is the object's state in the index before the change.
type Previous struct {
	ResourceVersion string `json:"resourceVersion"`
	Epoch           int64  `json:"epoch"`
	// Labels are its metadata.labels, omitted when it had none: what a watch with a label
	// selector needs to tell an object leaving the selection.
	Labels json.RawMessage `json:"labels,omitempty"`
}

// Marshal encodes the record.
func (r *Record) Marshal() ([]byte, error) { return json.Marshal(r) }

// Unmarshal decodes a record and checks its envelope (envelope.Unmarshal's rules).
func Unmarshal(b []byte) (*Record, error) {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%w: %v", envelope.ErrMalformed, err)
	}
	// The envelope's own checks, on the fields just decoded (not a second decoding).
	if err := r.Event.Validate(); err != nil {
		return nil, err
	}
	return &r, nil
}

// state is a document's state as the feed tracks it through a batch.
type state struct {
	found     bool
	epoch, rv int64
	labels    json.RawMessage
}

// Tracker decides, for the ops of one batch in order, which change each makes, from what the
// index held before the batch (store.Prior per document): later ops of a document are judged
// against the state the earlier ones left. The rule is the backends' (the epoch rule over
// external_gte versioning): an op is written when it is unversioned, when its resourceVersion is
// at least the stored one, or when its epoch is newer. A written op that repeats the stored
// resourceVersion changes nothing visible (a re-list), and makes no record.
type Tracker struct {
	docs map[string]*state
}

// NewTracker starts a batch.
func NewTracker() *Tracker { return &Tracker{docs: map[string]*state{}} }

// Prior gives the index's state of the op's document before the batch; call it once per
// document, before Change.
func (t *Tracker) Prior(o store.Op, p store.Prior) {
	if _, ok := t.docs[o.ID()+"\x00"+o.Kind]; ok {
		return
	}
	t.docs[o.ID()+"\x00"+o.Kind] = &state{found: p.Found, epoch: p.Epoch, rv: p.ResourceVersion, labels: p.Labels}
}

// Change is the record op makes (ev is its event, read at src), or nil when it changes nothing.
func (t *Tracker) Change(o store.Op, ev *envelope.Event, src Source) *Record {
	key := o.ID() + "\x00" + o.Kind
	st := t.docs[key]
	if st == nil {
		st = &state{}
		t.docs[key] = st
	}
	written := !o.Versioned || !st.found || o.Version >= st.rv || o.Epoch > st.epoch
	if !written {
		return nil // a replay: the index keeps its newer state
	}
	rec := &Record{Event: *ev, Source: src}
	if st.found {
		rec.Previous = &Previous{ResourceVersion: strconv.FormatInt(st.rv, 10), Epoch: st.epoch, Labels: st.labels}
	}
	if o.Delete {
		if !st.found {
			return nil // nothing to delete
		}
		*st = state{}
		rec.Type = envelope.Deleted
		return rec
	}
	repeat := st.found && o.Versioned && o.Version == st.rv
	labels := json.RawMessage(nil)
	if l := gjson.GetBytes(ev.Object, "metadata.labels"); l.IsObject() {
		labels = json.RawMessage(l.Raw)
	}
	found := st.found
	*st = state{found: true, epoch: max(st.epoch, o.Epoch), rv: o.Version, labels: labels}
	if repeat {
		return nil
	}
	rec.Type = envelope.Added
	if found {
		rec.Type = envelope.Modified
	}
	return rec
}

// Gone is the DELETED record of a document a marker's garbage collection removes: marker is the
// SYNC or PURGE, read at src.
func Gone(marker *envelope.Event, g store.Gone, src Source) *Record {
	obj := gjson.ParseBytes(g.Object)
	ev := envelope.Event{V: envelope.Version, Type: envelope.Deleted, Cluster: marker.Cluster, Group: marker.Group,
		Version: marker.Version, Resource: marker.Resource, Kind: marker.Kind,
		Namespace: obj.Get("metadata.namespace").Str, Name: obj.Get("metadata.name").Str, UID: g.UID,
		ResourceVersion: strconv.FormatInt(g.ResourceVersion, 10), Epoch: marker.Epoch, ObservedAt: marker.ObservedAt,
		Object: g.Object}
	if ev.Resource == "" {
		ev.Resource = g.Resource
	}
	if ev.Version == "" {
		// A PURGE of a selection the member never served names no version; the object does.
		_, ev.Version = splitAPIVersion(obj.Get("apiVersion").Str)
	}
	ev.ListResourceVersion = marker.ListResourceVersion
	rec := &Record{Event: ev, Source: src, Previous: &Previous{ResourceVersion: ev.ResourceVersion, Epoch: g.Epoch}, Marker: marker.Type}
	if l := obj.Get("metadata.labels"); l.IsObject() {
		rec.Previous.Labels = json.RawMessage(l.Raw)
	}
	return rec
}

// Marker is the record of a SYNC or PURGE marker, after the DELETED records of what it removed.
func Marker(ev *envelope.Event, src Source) *Record { return &Record{Event: *ev, Source: src} }

func splitAPIVersion(av string) (group, version string) {
	for i := len(av) - 1; i >= 0; i-- {
		if av[i] == '/' {
			return av[:i], av[i+1:]
		}
	}
	return "", av
}
