package registry

import (
	"time"

	"github.com/kubesearch/kubesearch/internal/store"
)

// Collection states, as in Karmada's ClusterCacheStatus.
const (
	StateRunning = "Running"
	StateFailed  = "Failed"
	StateUnknown = "Unknown"
)

// ResourceStatus is the seeds' ClusterCacheStatus: the state of one resource of one cluster, as
// selected by one registry. The collector reports it (its /status rows), the query API reads it to
// say how fresh each cluster's part of an answer is.
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
	// Listing is true while a list (the first, or a re-list after a watch expired) is under way.
	// Listed counts the objects it has read so far, or read in all once it is done; ListTotal is how
	// many the member says the list holds (the items read plus the last page's remainingItemCount),
	// 0 while the member has not said. A progress display reads them; TotalNum is what is held.
	Listing   bool  `json:"listing,omitempty"`
	Listed    int   `json:"listed,omitempty"`
	ListTotal int64 `json:"listTotal,omitempty"`
	// PurgedAt is set while the member does not serve the resource any more (its CRD deleted, its
	// API version removed) and says when its documents were purged; State is then Failed and Reason
	// says why. It goes when the resource is served again.
	PurgedAt *time.Time `json:"purgedAt,omitempty"`
}

// Settled reports whether the row's collection has listed once or failed: what a first sync waits for.
func (r ResourceStatus) Settled() bool {
	return r.State == StateFailed || (r.State == StateRunning && r.Epoch != 0)
}

// Pair is the row's pair.
func (r ResourceStatus) Pair() store.Pair {
	return store.Pair{Cluster: r.Cluster, Group: r.Group, Resource: r.Resource}
}
