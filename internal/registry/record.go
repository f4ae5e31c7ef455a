package registry

import "time"

// The ledger is the collectors' durable memory, a compacted Kafka topic next to the event topic
// (LedgerTopic). Collectors write it; the query API reads it too: its selection records are what
// each member has cached, which is what the Kubernetes facade discovers.

// LedgerVersion is the version of the ledger records this build writes and reads.
const LedgerVersion = 1

// Key prefixes of the ledger's records.
const (
	SelectionRecordPrefix = "selection/"
	EpochsRecordPrefix    = "epochs/"
)

// LedgerTopic is the ledger's topic for an event topic.
func LedgerTopic(topic string) string { return topic + ".collectors" }

// SelectionRecordKey is the key of a selection's record: "selection/<cluster>/<group>/<kind>/<namespace>".
func SelectionRecordKey(cluster string, k SelectionKey) string {
	return SelectionRecordPrefix + cluster + "/" + k.Group + "/" + k.Kind + "/" + k.Namespace
}

// SelectionRecord is one selection a collector started collecting and has not purged since: its
// documents may be in the index. It carries what the member's discovery says of the resource the
// selection resolved to, so readers can describe it without asking the member.
type SelectionRecord struct {
	V         int    `json:"v"`
	Cluster   string `json:"cluster"`
	Owner     string `json:"owner,omitempty"`
	Group     string `json:"group"`
	Version   string `json:"version"`
	Resource  string `json:"resource"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	// Namespaced, Singular, ShortNames and Categories are the member's discovery of the resource.
	Namespaced bool      `json:"namespaced,omitempty"`
	Singular   string    `json:"singular,omitempty"`
	ShortNames []string  `json:"shortNames,omitempty"`
	Categories []string  `json:"categories,omitempty"`
	UpdatedAt  time.Time `json:"updatedAt,omitzero"`
}

// Key is the record's selection.
func (r SelectionRecord) Key() SelectionKey {
	return SelectionKey{Group: r.Group, Kind: r.Kind, Namespace: r.Namespace}
}
