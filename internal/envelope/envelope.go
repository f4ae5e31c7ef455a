// Package envelope defines the versioned JSON event that collectors publish to Kafka and indexers and
// query APIs consume (DESIGN section 3). It covers the wire shape and the partition key; it leaves out
// how events are produced or applied.
package envelope

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/kubesearch/kubesearch/internal/store"
)

// Version is the envelope version this build writes and understands.
const Version = 1

// Type says what an event means for the index.
type Type string

const (
	// Added, Modified and Deleted carry one object's change; Added is also used for every object of a
	// (re-)list.
	Added    Type = "ADDED"
	Modified Type = "MODIFIED"
	Deleted  Type = "DELETED"
	// Sync closes a list: every document of the scope from an older epoch is gone from the member.
	Sync Type = "SYNC"
	// Purge says the (cluster, resource) left every registry: all its documents go.
	Purge Type = "PURGE"
)

// Event is one record of the event stream.
type Event struct {
	V        int    `json:"v"`
	Type     Type   `json:"type"`
	Cluster  string `json:"cluster"`
	Group    string `json:"group"`
	Version  string `json:"version"`
	Resource string `json:"resource"`
	Kind     string `json:"kind"`
	// Namespace is the object's namespace; on SYNC and PURGE it is the scope ("" means every namespace).
	Namespace       string `json:"namespace,omitempty"`
	Name            string `json:"name,omitempty"`
	UID             string `json:"uid,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
	// Epoch increases with every list of a scope and across collector restarts.
	Epoch      int64     `json:"epoch"`
	ObservedAt time.Time `json:"observedAt"`
	// ChangedAt is when the object last changed, as far as the collector knows, on ADDED, MODIFIED
	// and DELETED: the time a watch saw the change, or for a listed object the latest of its
	// managedFields times, creation and deletion — not the time of the list, so a re-list (a
	// collector restart, an expired watch) does not make every object look changed. Zero when
	// unknown (an older collector); readers fall back to ObservedAt.
	ChangedAt time.Time `json:"changedAt,omitzero"`
	// Count and ListResourceVersion are set on SYNC only: how many objects the list held, at which
	// resourceVersion of the member.
	Count               *int   `json:"count,omitempty"`
	ListResourceVersion string `json:"listResourceVersion,omitempty"`
	// Object is the pruned object on ADDED and MODIFIED, and the last known state on DELETED.
	Object json.RawMessage `json:"object,omitempty"`
}

// Key is the Kafka message key, the pair's ID: all events of one resource type of one cluster share a
// partition, so they are totally ordered, which SYNC garbage collection relies on.
func (e *Event) Key() []byte { return []byte(e.Pair().ID()) }

// Pair is the (cluster, group, resource) the event is about.
func (e *Event) Pair() store.Pair {
	return store.Pair{Cluster: e.Cluster, Group: e.Group, Resource: e.Resource}
}

// LastChanged is ChangedAt, or ObservedAt for an event that does not say.
func (e *Event) LastChanged() time.Time {
	if e.ChangedAt.IsZero() {
		return e.ObservedAt
	}
	return e.ChangedAt
}

// GroupResource is "resource.group", or the resource alone in the core group, as kubectl names it.
func (e *Event) GroupResource() string {
	if e.Group == "" {
		return e.Resource
	}
	return e.Resource + "." + e.Group
}

// NamespacedName is "namespace/name", or the name alone for a cluster-scoped object.
func (e *Event) NamespacedName() string {
	if e.Namespace == "" {
		return e.Name
	}
	return e.Namespace + "/" + e.Name
}

// Marshal encodes the event. The object is written as it is: encoding/json would validate and
// compact it again, about a tenth of a collector's list (a CPU profile of a 9,000-Pod resync), for
// bytes that are an apiserver's compact JSON or this process's own encoding. Readers validate the
// whole message anyway (Unmarshal), as the topic is not trusted: a malformed object is
// dead-lettered by the indexer, never written.
func (e *Event) Marshal() ([]byte, error) {
	head := *e
	head.Object = nil
	b, err := json.Marshal(&head)
	if err != nil || len(e.Object) == 0 {
		return b, err
	}
	// The object is the last member: the header's closing brace gives way to it.
	out := make([]byte, 0, len(b)+len(`,"object":`)+len(e.Object))
	out = append(out, b[:len(b)-1]...)
	out = append(out, `,"object":`...)
	out = append(out, e.Object...)
	return append(out, '}'), nil
}

// ErrMalformed marks an event that can never be applied, however often it is retried.
var ErrMalformed = errors.New("envelope: malformed event")

// Unmarshal decodes and checks an event. Errors wrap ErrMalformed.
func Unmarshal(data []byte) (*Event, error) {
	var e Event
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if err := e.validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return &e, nil
}

// Validate checks an event decoded by other means than Unmarshal (a record embedding one) by
// Unmarshal's rules. Errors wrap ErrMalformed.
func (e *Event) Validate() error {
	if err := e.validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return nil
}

func (e *Event) validate() error {
	var errs []error
	if e.V != Version {
		errs = append(errs, fmt.Errorf("v: unsupported envelope version %d (this build reads %d)", e.V, Version))
	}
	if e.Cluster == "" {
		errs = append(errs, errors.New("cluster: required"))
	}
	// kind names the index (kubernetes-<kind>), so every event needs it. A PURGE of a selection the
	// member never served has no resource or version to name.
	if e.Kind == "" {
		errs = append(errs, errors.New("kind: required"))
	}
	if e.Type != Purge && (e.Resource == "" || e.Version == "") {
		errs = append(errs, errors.New("version, resource: required"))
	}
	switch e.Type {
	case Added, Modified, Deleted:
		if e.UID == "" || e.Name == "" {
			errs = append(errs, fmt.Errorf("uid, name: required on %s", e.Type))
		}
		if e.Type != Deleted && len(e.Object) == 0 {
			errs = append(errs, fmt.Errorf("object: required on %s", e.Type))
		}
	case Sync:
		if e.Count == nil {
			errs = append(errs, errors.New("count: required on SYNC"))
		}
	case Purge:
	default:
		errs = append(errs, fmt.Errorf("type: unknown event type %q", e.Type))
	}
	return errors.Join(errs...)
}
