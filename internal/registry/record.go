package registry

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// The ledger is the collectors' durable memory, a compacted Kafka topic next to the event topic
// (LedgerTopic). Collectors write it; the query API reads it too: its selection records are what
// each member has cached, which is what the Kubernetes facade discovers.

// LedgerVersion is the version of the ledger records this build writes and reads.
const LedgerVersion = 1

// Key prefixes of the ledger's records.
const (
	SelectionRecordPrefix = "selection/"
	EpochsRecordPrefix    = "epochs/"
	OpenAPIRecordPrefix   = "openapi/"
)

// LedgerMaxMessageBytes is the ledger topic's max.message.bytes: an OpenAPI record holds a whole
// OpenAPI v3 document, and api/v1's is 1.5 MiB of JSON (a few hundred KiB compressed).
const LedgerMaxMessageBytes = 16 << 20

// LedgerTopicConfig is the configuration the ledger's topic is created with: compacted (the last
// record of each key is the state), with room for OpenAPI records.
func LedgerTopicConfig() map[string]string {
	return map[string]string{"cleanup.policy": "compact", "max.message.bytes": strconv.Itoa(LedgerMaxMessageBytes)}
}

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

// EpochsRecordKey is the key of a cluster's epochs record: "epochs/<cluster>".
func EpochsRecordKey(cluster string) string { return EpochsRecordPrefix + cluster }

// EpochsRecord says how far the epochs of a member cluster were reserved: a writer of the
// cluster's events hands out no epoch above EpochsReserved before it recorded a higher one, and
// one starting later hands out epochs above it, whatever its clock says. Never deleted.
type EpochsRecord struct {
	V              int       `json:"v"`
	Cluster        string    `json:"cluster"`
	Owner          string    `json:"owner,omitempty"`
	EpochsReserved int64     `json:"epochsReserved"`
	UpdatedAt      time.Time `json:"updatedAt"`
}

// OpenAPIRecordKey is the key of an OpenAPI record: "openapi/<cluster>/<path>", path as the
// member's /openapi/v3 index names it ("api/v1", "apis/apps/v1").
func OpenAPIRecordKey(cluster, path string) string {
	return OpenAPIRecordPrefix + cluster + "/" + path
}

// ParseOpenAPIRecordKey reads an OpenAPI record's key, which names its cluster and path (a
// tombstone says nothing else).
func ParseOpenAPIRecordKey(key string) (cluster, path string, ok bool) {
	rest, ok := strings.CutPrefix(key, OpenAPIRecordPrefix)
	if !ok {
		return "", "", false
	}
	cluster, path, ok = strings.Cut(rest, "/")
	return cluster, path, ok && cluster != "" && path != ""
}

// OpenAPIRecord is a member's OpenAPI v3 document of one group-version it has collected, relayed so
// the query API can serve it without asking the member. A collector writes it again only when the
// member's hash changes, and makes it a tombstone once nothing of that group-version is collected.
type OpenAPIRecord struct {
	V       int    `json:"v"`
	Cluster string `json:"cluster"`
	Owner   string `json:"owner,omitempty"`
	// Path is the document's path under /openapi/v3: "api/v1", "apis/<group>/<version>".
	Path string `json:"path"`
	// Hash is the member's hash of the document (the hash parameter of its serverRelativeURL), which
	// clients cache the document by.
	Hash      string          `json:"hash"`
	Document  json.RawMessage `json:"document"`
	UpdatedAt time.Time       `json:"updatedAt,omitzero"`
}

// OpenAPIPath is the /openapi/v3 path of a group-version's document.
func OpenAPIPath(group, version string) string {
	if group == "" {
		return "api/" + version
	}
	return "apis/" + group + "/" + version
}

// EventsGroup is the API group of the newer Event API.
const EventsGroup = "events.k8s.io"

// EventsSibling is, for a collected resource, the other group-version that serves the same
// objects: a member's core v1 Events and its events.k8s.io/v1 Events are one set of objects
// (kube-apiserver stores one and converts). The query API serves both from whichever is collected,
// and the collector relays both groups' OpenAPI documents for it.
func EventsSibling(group, version, resource string) (siblingGroup, siblingVersion string, ok bool) {
	if resource != "events" || version != "v1" {
		return "", "", false
	}
	switch group {
	case "":
		return EventsGroup, "v1", true
	case EventsGroup:
		return "", "v1", true
	}
	return "", "", false
}
