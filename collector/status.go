package collector

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Collection states, as in Karmada's ClusterCacheStatus.
const (
	StateRunning = "Running"
	StateFailed  = "Failed"
	StateUnknown = "Unknown"
)

// ResourceStatus is one row of /status: one resource of one cluster, as selected by one registry.
type ResourceStatus struct {
	Registry   string    `json:"registry"`
	Cluster    string    `json:"cluster"`
	Group      string    `json:"group"`
	Version    string    `json:"version"`
	Resource   string    `json:"resource"`
	Kind       string    `json:"kind"`
	Namespace  string    `json:"namespace,omitempty"`
	State      string    `json:"state"`
	Reason     string    `json:"reason,omitempty"`
	TotalNum   int       `json:"totalNum"`
	UpdateTime time.Time `json:"updateTime"`
	Epoch      int64     `json:"epoch,omitempty"`
	// ResourceVersion is the member resourceVersion of the last event published: a watch event's
	// object, or a completed list. PublishedAt is when it was handed to the publisher. A reader
	// comparing them with the indexer's watermarks tells how far the index is behind.
	ResourceVersion string     `json:"resourceVersion,omitempty"`
	PublishedAt     *time.Time `json:"publishedAt,omitempty"`
	// Unpublished names the objects Kafka will never take (too large), "namespace/name: reason",
	// since the last list began; they are missing from the index while State may be Running.
	Unpublished []string `json:"unpublished,omitempty"`
}

// maxUnpublished bounds the objects a status row names; the metric counts them all.
const maxUnpublished = 20

// statusEntry is the live status of one collection, shared by the registries that select it.
type statusEntry struct {
	mu         sync.Mutex
	row        ResourceStatus
	registries []string
	settled    bool // listed once, or failed: what /readyz waits for
	now        func() time.Time
	// unpublished: object key → why Kafka refused it, since the last list began.
	unpublished map[string]string
}

func newStatusEntry(row ResourceStatus, registries []string) *statusEntry {
	row.State = StateUnknown
	row.UpdateTime = time.Now().UTC()
	return &statusEntry{row: row, registries: registries, now: time.Now}
}

func (s *statusEntry) update(f func(r *ResourceStatus)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.row)
	s.row.UpdateTime = s.now().UTC()
}

func (s *statusEntry) synced(epoch int64, count int, rv string) {
	s.update(func(r *ResourceStatus) {
		r.State, r.Reason, r.Epoch, r.TotalNum = StateRunning, "", epoch, count
		now := s.now().UTC()
		r.ResourceVersion, r.PublishedAt = rv, &now
	})
	s.mu.Lock()
	s.settled = true
	s.mu.Unlock()
}

// published records a watch event handed to the publisher, and the number of objects now held.
func (s *statusEntry) published(n int, rv string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now().UTC()
	s.row.TotalNum, s.row.ResourceVersion, s.row.PublishedAt = n, rv, &now
}

func (s *statusEntry) running() {
	s.mu.Lock()
	ok := s.row.State == StateFailed && s.row.Epoch != 0
	s.mu.Unlock()
	if ok { // a watch works again after a failure: the epoch's data is good
		s.update(func(r *ResourceStatus) { r.State, r.Reason = StateRunning, "" })
	}
}

func (s *statusEntry) failed(err error) {
	s.update(func(r *ResourceStatus) { r.State, r.Reason = StateFailed, err.Error() })
	s.mu.Lock()
	s.settled = true
	s.mu.Unlock()
}

// refused records an object that can never be published.
func (s *statusEntry) refused(key, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unpublished == nil {
		s.unpublished = map[string]string{}
	}
	s.unpublished[key] = reason
}

// listStarted forgets the refused objects: the list publishes every object again.
func (s *statusEntry) listStarted() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unpublished = nil
}

func (s *statusEntry) rows() []ResourceStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	var unpublished []string
	for k, why := range s.unpublished {
		unpublished = append(unpublished, k+": "+why)
	}
	slices.Sort(unpublished)
	if n := len(unpublished); n > maxUnpublished {
		unpublished = append(unpublished[:maxUnpublished], fmt.Sprintf("... and %d more", n-maxUnpublished))
	}
	out := make([]ResourceStatus, 0, len(s.registries))
	for _, reg := range s.registries {
		r := s.row
		r.Registry, r.Unpublished = reg, unpublished
		out = append(out, r)
	}
	return out
}

func (s *statusEntry) isSettled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.settled
}

func sortRows(rows []ResourceStatus) {
	slices.SortFunc(rows, func(a, b ResourceStatus) int {
		return cmp.Or(cmp.Compare(a.Registry, b.Registry), cmp.Compare(a.Cluster, b.Cluster),
			cmp.Compare(a.Group, b.Group), cmp.Compare(a.Resource, b.Resource), cmp.Compare(a.Namespace, b.Namespace))
	})
}
