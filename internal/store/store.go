// Package store is kubesearch's storage contract (DESIGN section 1): the types that every store
// backend — OpenSearch (internal/osstore) and the embedded store of the standalone mode — and every
// user of one share: the pair of one resource of one member cluster, the writes and garbage
// collection scopes of the indexer, watermarks, the results of a search, the error vocabulary, and
// the bounds of what one subject's searches may hold, which every backend applies alike (Limits,
// the ledger of snapshots, the count of costly searches running). It holds no backend code and
// knows no wire protocol.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Pair is one resource of one member cluster: the unit of the stream's partition key, of a
// watermark, of a status row, and of the per-pair counts.
type Pair struct {
	Cluster  string `json:"cluster"`
	Group    string `json:"group"`
	Resource string `json:"resource"`
}

// ID is the pair as one string, "cluster/group/resource": the stream's message key and the stored
// watermark's id.
func (p Pair) ID() string { return p.Cluster + "/" + p.Group + "/" + p.Resource }

// Errors every backend answers with, and every caller turns into HTTP answers (queryapi): callers
// switch on these, never on one backend's own errors.
var (
	// ErrUnavailable: the backend did not answer, or cannot serve now (for OpenSearch: 5xx, 429).
	ErrUnavailable = errors.New("search backend unavailable")
	// ErrExpired: the continue token's snapshot is gone (Kubernetes answers 410 Gone).
	ErrExpired = errors.New("continue token expired")
	// ErrBadToken: the continue token was not issued by this store for this query.
	ErrBadToken = errors.New("invalid continue token")
	// ErrRejected: the backend refused the request for good — a compiled query as malformed or too
	// large, a garbage collection it will never run —; the message says why. Retrying cannot help
	// (Kubernetes answers 400; the indexer dead-letters the marker).
	ErrRejected = errors.New("request rejected by the search backend")
)

// Op is one write of the indexer: an object's new state, or its deletion, as one event says. The
// backend names the index (one per kind) and keeps the epoch rule (DESIGN section 4).
type Op struct {
	// Delete removes the document; otherwise Doc replaces it.
	Delete bool
	// Kind is the object's kind, which names its index. Cluster and UID name the document (DocID):
	// a uid is unique within one member only — a member registered under two names, or members
	// cloned from one etcd snapshot, have objects with the same uid.
	Kind    string
	Cluster string
	UID     string
	// Doc is the document (package document), one line of JSON; nil for a delete.
	Doc []byte
	// Epoch is the epoch of the event: an op of a newer epoch replaces the stored state whatever the
	// resourceVersions say. The converse is the indexer's to keep: an op of an older epoch with a
	// higher resourceVersion is accepted (OpenSearch's external versioning orders by resourceVersion
	// alone, and the embedded store answers alike), so the indexer never writes an event of an epoch
	// older than one it has seen for the scope (indexer: superseded).
	Epoch int64
	// Version is the object's resourceVersion when Versioned: no op then replaces a newer state
	// (a replayed or late event). A resourceVersion that is not an integer is written unversioned.
	Version   int64
	Versioned bool
}

// DocID is the id of the document of the object uid of cluster, in the index of its kind: the
// member's name, "/", the uid. Every backend keys documents by it, so two members' objects never
// overwrite each other whatever their uids. "/" cannot occur in a member's name (a DNS label).
func DocID(cluster, uid string) string { return cluster + "/" + uid }

// ID is the id of the op's document (DocID).
func (o Op) ID() string { return DocID(o.Cluster, o.UID) }

// Failure is an op the backend will never accept (a mapping conflict, say): the op at position Pos
// of the slice written, and why in the backend's words.
type Failure struct {
	Pos int
	Err string
}

// Prior is what the index holds of an op's document just before the op is written (realtime:
// writes not yet refreshed count): what the change feed (package changes) tells a change from a
// repeat or a replay by, and a watcher's previous labels.
type Prior struct {
	Found                  bool
	Epoch, ResourceVersion int64
	// Labels are the stored object's metadata.labels (a JSON object), nil when it has none.
	Labels json.RawMessage
}

// Gone is a document garbage collection deletes after a SYNC or PURGE marker, as it was stored.
type Gone struct {
	Cluster, Resource, UID string
	Epoch, ResourceVersion int64
	// Object is the stored object's apiVersion, kind and metadata (what a watcher is told of an
	// object that went away).
	Object json.RawMessage
}

// GoneFunc is told, before they are deleted, the documents garbage collection deletes: marker is
// the position of the marker in the call (0 when the call applies one). An error stops the
// collection, which the caller retries as a whole: what is told and not yet deleted is told again.
type GoneFunc func(ctx context.Context, marker int, gone []Gone) error

// ListScope is what one list of the collector covers, and a SYNC marker completes: the objects of
// one pair (of one kind) in one namespace, or in every namespace when Namespace is "".
type ListScope struct {
	Pair
	Kind      string
	Namespace string
}

// Sync is one SYNC marker's garbage: the documents of Scope from an epoch older than Epoch.
type Sync struct {
	Scope ListScope
	Epoch int64
}

// Selection is what a PURGE marker removes: every object of (Cluster, Group, Kind), or of one
// namespace of it. It names the kind, not the resource: a selection the member never served has no
// resource name.
type Selection struct {
	Cluster, Group, Kind string
	Namespace            string
}

// Watermark says how far the index is for one resource of one member cluster (DESIGN section 5):
// every event of the pair up to ResourceVersion is written and searchable. A LIST answered from the
// index may claim this resourceVersion for the pair, and no more.
type Watermark struct {
	Cluster  string `json:"cluster"`
	Group    string `json:"group"`
	Resource string `json:"resource"`
	Kind     string `json:"kind"`
	// ResourceVersion is the member's resourceVersion up to which the index is complete; 0 when not
	// known yet, or when the resource's versions are not integers.
	ResourceVersion int64 `json:"resourceVersion"`
	// Epoch is the epoch of the last completed list (SYNC marker).
	Epoch int64 `json:"epoch"`
	// Listing is true while a list is in progress (objects of a newer epoch than the last SYNC are
	// arriving), or before any list completed. ResourceVersion does not move meanwhile.
	Listing   bool      `json:"listing"`
	UpdatedAt time.Time `json:"updatedAt"`
	// Scopes are the namespace scopes of the pair (one, "", for a cluster-wide selection);
	// ResourceVersion is their minimum, 0 while one has never completed a list.
	Scopes []WatermarkScope `json:"scopes,omitempty"`
	// Position is the offset, in the pair's partition of the event stream, of the last event this
	// watermark accounts for; 0 when unknown (written before it was kept). Stores keep the
	// watermark of the highest position (a save of a lower one is not an error, and changes
	// nothing): an indexer that lost the partition in a rebalance, still storing what it had read,
	// cannot move back what the partition's new owner stored.
	Position int64 `json:"position,omitempty"`
}

// WatermarkScope is the progress of one namespace scope of a pair: its own list and watch.
type WatermarkScope struct {
	Namespace       string `json:"namespace"`
	ResourceVersion int64  `json:"resourceVersion"`
	Epoch           int64  `json:"epoch"`
	Listing         bool   `json:"listing"`
	// Synced is false until the scope's first SYNC marker was seen.
	Synced bool `json:"synced"`
	// Ceiling is, after the scope's member went back (a list below what the scope showed: etcd
	// restored, the cluster rebuilt), the highest resourceVersion of the numbering it left, until
	// the new numbering passes it; 0 otherwise. A query API started later tells by it that a
	// client's position up to it is of the old numbering (410, list again) and not one ahead of
	// the stream (a wait, then 504).
	Ceiling int64 `json:"ceiling,omitempty"`
}

// Pair is the watermark's pair.
func (w Watermark) Pair() Pair { return Pair{w.Cluster, w.Group, w.Resource} }

// Result is one page of a search.
type Result struct {
	// Items are the stored objects (mappings.StoredObject), in order.
	Items []json.RawMessage
	// Epochs are, per item, the epoch of the list or watch that wrote it: what the facade's watch
	// cache needs to tell which objects a later list's SYNC removes.
	Epochs []int64
	// Total counts every match of the query in its snapshot; TotalIsLowerBound is set if OpenSearch
	// could only say "at least".
	Total             int64
	TotalIsLowerBound bool
	// Continue fetches the next page; empty on the last.
	Continue string
	// Versions is, when the query asked, the newest resourceVersion per cluster of its resources
	// in the page's snapshot (first page only).
	Versions map[string]int64
	// Facets, in the order asked, on the first page only.
	Facets []FacetResult
	// Took sums OpenSearch's own "took" over the searches this page needed.
	Took time.Duration
	// Warnings say how the answer falls short (for a Warning header).
	Warnings []string
}

// FacetResult is the top buckets of one facet.
type FacetResult struct {
	Name    string   `json:"name"`
	Buckets []Bucket `json:"buckets"`
	// Other counts objects in buckets past the top ones.
	Other int64 `json:"other"`
	// ErrorBound is OpenSearch's upper bound of the error of the counts; 0 means exact.
	ErrorBound int64 `json:"errorBound,omitempty"`
}

// Bucket is one value of a facet and how many objects have it.
type Bucket struct {
	Value string `json:"value"`
	Count int64  `json:"count"`
}

// Count is how many documents one resource of one cluster has in the index.
type Count struct {
	Cluster, Group, Resource string
	Documents                int64
}

// Pair is the count's pair.
func (c Count) Pair() Pair { return Pair{c.Cluster, c.Group, c.Resource} }

// SetupOptions are what a backend's Setup needs beyond the backend's own options.
type SetupOptions struct {
	// BatchSize and BatchBytes bound the writes of a backend's own copies (for OpenSearch, the _bulk requests of a roll), as they bound the
	// indexer's own batches (0: 1000 documents, 8 MiB).
	BatchSize  int
	BatchBytes int
	// Step, when set, hears what setup is doing or waiting for (a roll, another indexer's roll
	// lease), for a readiness probe.
	Step func(string)
}
