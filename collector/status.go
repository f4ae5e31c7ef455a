package collector

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/kubesearch/kubesearch/internal/registry"
)

// maxUnpublished bounds the objects a status row names; the metric counts them all.
const maxUnpublished = 20

// statusEntry is the live status of one collection, shared by the registries that select it.
type statusEntry struct {
	mu         sync.Mutex
	row        registry.ResourceStatus
	registries []string
	settled    bool // listed once, or failed: what /readyz waits for
	now        func() time.Time
	// unpublished: object key → why Kafka refused it, since the last list began.
	unpublished map[string]string
}

func newStatusEntry(row registry.ResourceStatus, registries []string) *statusEntry {
	row.State = registry.StateUnknown
	row.UpdateTime = time.Now().UTC()
	return &statusEntry{row: row, registries: registries, now: time.Now}
}

func (s *statusEntry) update(f func(r *registry.ResourceStatus)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.row)
	s.row.UpdateTime = s.now().UTC()
}

func (s *statusEntry) synced(epoch int64, count int, rv string) {
	s.update(func(r *registry.ResourceStatus) {
		r.State, r.Reason, r.Epoch, r.TotalNum = registry.StateRunning, "", epoch, count
		r.Listing = false
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
	ok := s.row.State == registry.StateFailed && s.row.Epoch != 0
	s.mu.Unlock()
	if ok { // a watch works again after a failure: the epoch's data is good
		s.update(func(r *registry.ResourceStatus) { r.State, r.Reason = registry.StateRunning, "" })
	}
}

func (s *statusEntry) failed(err error) {
	s.update(func(r *registry.ResourceStatus) {
		r.State, r.Reason, r.Listing = registry.StateFailed, err.Error(), false
	})
	s.mu.Lock()
	s.settled = true
	s.mu.Unlock()
}

// reasonNotServed starts the reason of a selection purged because the member stopped serving it.
const reasonNotServed = "not served by the member: purged: "

// purged records that the member no longer serves the selection (why, as discovery put it) and
// that its documents were purged. The row keeps saying so until the kind is served again.
func (s *statusEntry) purged(why string) {
	s.update(func(r *registry.ResourceStatus) {
		now := s.now().UTC()
		r.State, r.Reason, r.Listing, r.TotalNum, r.PurgedAt = registry.StateFailed, reasonNotServed+why, false, 0, &now
	})
	s.mu.Lock()
	s.settled = true
	s.unpublished = nil
	s.mu.Unlock()
}

func (s *statusEntry) isPurged() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.row.PurgedAt != nil
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

// listProgress records how far the current list is: listed objects read, total the member's count of
// the whole list (0 unknown). Not an update: UpdateTime says when the state last changed.
func (s *statusEntry) listProgress(listed int, total int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.row.Listing, s.row.Listed, s.row.ListTotal = true, listed, total
}

func (s *statusEntry) rows() []registry.ResourceStatus {
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
	out := make([]registry.ResourceStatus, 0, len(s.registries))
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

func sortRows(rows []registry.ResourceStatus) {
	slices.SortFunc(rows, func(a, b registry.ResourceStatus) int {
		return cmp.Or(cmp.Compare(a.Registry, b.Registry), cmp.Compare(a.Cluster, b.Cluster),
			cmp.Compare(a.Group, b.Group), cmp.Compare(a.Resource, b.Resource), cmp.Compare(a.Namespace, b.Namespace))
	})
}
