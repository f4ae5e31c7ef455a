// Package query is kubesearch's backend-neutral search model (DESIGN section 5): what a REST search
// asks for, parsed and validated from URL parameters. Each store backend compiles a Query into its own
// language (OpenSearch DSL today, the embedded store of the standalone mode later); nothing here knows
// either. Paging state is opaque here: a backend issues and reads its own continue tokens.
package query

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// Op is the operator of a label or field requirement.
type Op string

// Operators. Kubernetes' "=" and "==" are one operator here.
const (
	Equals    Op = "="
	NotEquals Op = "!="
	In        Op = "in"
	NotIn     Op = "notin"
	Exists    Op = "exists"
	NotExists Op = "!"
)

// Query is one search. The zero value matches every object of every type in every cluster.
type Query struct {
	// Resources limits the search to these types; empty means every type.
	Resources []Resource `json:"resources,omitempty"`
	// Clusters, Namespaces and Names match exactly, any of the values.
	Clusters   []string `json:"clusters,omitempty"`
	Namespaces []string `json:"namespaces,omitempty"`
	Names      []string `json:"names,omitempty"`
	// NamePrefix matches names starting with it (case-sensitive, as names are lower-case anyway).
	NamePrefix string `json:"namePrefix,omitempty"`
	// FuzzyName matches names containing it, ignoring case, or within a small edit distance of one
	// of the name's words ("ngnix" finds "nginx-7d9f").
	FuzzyName string `json:"fuzzyName,omitempty"`
	// Labels are ANDed, with Kubernetes label selector semantics.
	Labels []Requirement `json:"labels,omitempty"`
	// Fields are ANDed; Key is a dotted path into the object (status.phase).
	Fields []Requirement `json:"fields,omitempty"`
	// Text is free text, matched against names, label values, images and the other words of the
	// analysed text field; every word must match.
	Text  string `json:"text,omitempty"`
	Owner *Owner `json:"owner,omitempty"`
	// Time bounds: creationTimestamp ≥ CreatedSince and < CreatedBefore; lastChangedAt ≥ ChangedSince.
	CreatedSince  *Instant `json:"createdSince,omitempty"`
	CreatedBefore *Instant `json:"createdBefore,omitempty"`
	ChangedSince  *Instant `json:"changedSince,omitempty"`
	// Now is the instant relative bounds ("1h" ago) are measured from. Parse sets it; a backend
	// continuing a query sets it back to the first page's, so every page filters alike.
	Now time.Time `json:"-"`
	// Sort is the order of the results; a backend breaks ties by uid. Empty means relevance when Text
	// is set, else cluster, namespace, name.
	Sort []Sort `json:"sort,omitempty"`
	// Limit is the page size, within [1, MaxLimit].
	Limit int `json:"limit"`
	// Continue is a backend's opaque token for the next page; empty for the first page.
	Continue string `json:"continue,omitempty"`
	// Facets asks for counts by these dimensions over the whole result (first page only).
	Facets []Facet `json:"facets,omitempty"`
	// MetadataOnly returns apiVersion, kind and metadata of each object, nothing else.
	MetadataOnly bool `json:"metadataOnly,omitempty"`
	// Versions asks, with the first page and in its snapshot, for the newest resourceVersion per
	// cluster among the objects of the query's resources, clusters and scope, whatever the other
	// filters: how far the snapshot shows each member, which a facade LIST's resourceVersion needs.
	Versions bool `json:"versions,omitempty"`
	// Scope is what the subject asking may see; nil means everything. It is not a parameter: the
	// server sets it from who is asking, every backend's compiler applies it as a filter inside the
	// query (never by filtering answers afterwards, which would break totals, facets and paging), and
	// the fingerprint covers it, so a continue token issued to one subject does not page for another.
	Scope *Scope `json:"scope,omitempty"`
	// Subject names who asks, when the server authenticates. No compiler reads it; the fingerprint
	// covers it, so a continue token minted for one subject is refused for another, even one whose
	// scope is the same. Backends count what a subject holds by it (store.Limits).
	Subject string `json:"subject,omitempty"`
	// Drain says the server itself reads every page of the query at once and releases what is
	// left (a facade LIST without a limit, a watch's initial events), never handing a continue
	// token to a client: its snapshot may take the share no client token takes, and is never
	// closed to make room (store.Limits). It is not a parameter, and selects nothing.
	Drain bool `json:"-"`
	// Peek says the server reads the first page only and never continues it (a lookup of its own):
	// no snapshot is opened or held for it, Continue is always empty, and Total says whether more
	// matched. It is not a parameter.
	Peek bool `json:"-"`
}

// Costly says the query costs more than its matches: a fuzzy name is a case-insensitive
// wildcard *text* and a fuzzy match over the names of every index, whose cost grows with the
// number of distinct names whatever the other filters. Backends bound how many such searches one
// subject runs at once (store.Limits).
func (q *Query) Costly() bool { return q.FuzzyName != "" }

// Scope is the union of grants: an object is visible when one grant allows its cluster, its
// namespace and its resource. A Scope without grants allows nothing.
type Scope struct {
	Grants []Grant `json:"grants"`
}

// Grant allows clusters × namespaces × resources. An empty list allows every value; in Namespaces,
// "" stands for cluster-scoped objects (which have no namespace).
type Grant struct {
	Clusters   []string   `json:"clusters,omitempty"`
	Namespaces []string   `json:"namespaces,omitempty"`
	Resources  []Resource `json:"resources,omitempty"`
}

// Allows reports whether the scope lets the subject see an object of resource (group, resource)
// in cluster and namespace ("" for cluster-scoped): for answers that do not come from a query, such
// as the per-pair counts of the fleet status, and for a backend's tests of its compiler.
func (s *Scope) Allows(cluster, namespace, group, resource string) bool {
	if s == nil {
		return true
	}
	for _, g := range s.Grants {
		if g.allows(cluster, namespace, group, resource) {
			return true
		}
	}
	return false
}

// AllowsPair reports whether the scope lets the subject see some object of resource (group,
// resource) in cluster, in whichever namespace: for per-pair answers (freshness, status rows).
func (s *Scope) AllowsPair(cluster, group, resource string) bool {
	if s == nil {
		return true
	}
	for _, g := range s.Grants {
		if g.allowsIn(cluster, group, resource) {
			return true
		}
	}
	return false
}

// AllowsWholePair reports whether the scope lets the subject see every object of resource (group,
// resource) in cluster, in every namespace: for what is said of a cluster-wide collection as a
// whole (its error text may name any namespace).
func (s *Scope) AllowsWholePair(cluster, group, resource string) bool {
	if s == nil {
		return true
	}
	for _, g := range s.Grants {
		if len(g.Namespaces) == 0 && g.allowsIn(cluster, group, resource) {
			return true
		}
	}
	return false
}

func (g Grant) allows(cluster, namespace, group, resource string) bool {
	if len(g.Namespaces) > 0 && !slices.Contains(g.Namespaces, namespace) {
		return false
	}
	return g.allowsIn(cluster, group, resource)
}

func (g Grant) allowsIn(cluster, group, resource string) bool {
	if len(g.Clusters) > 0 && !slices.Contains(g.Clusters, cluster) {
		return false
	}
	if len(g.Resources) == 0 {
		return true
	}
	return slices.ContainsFunc(g.Resources, func(r Resource) bool {
		return r.Resource == resource && (r.AnyGroup || r.Group == group)
	})
}

// Resource names a type: Resource is the plural name (pods); Group is its API group when AnyGroup
// is false ("" is the core group).
type Resource struct {
	Resource string `json:"resource"`
	Group    string `json:"group,omitempty"`
	AnyGroup bool   `json:"anyGroup,omitempty"`
}

func (r Resource) String() string {
	switch {
	case r.AnyGroup:
		return r.Resource
	case r.Group == "":
		return r.Resource + ".core"
	}
	return r.Resource + "." + r.Group
}

// Requirement is one term of a label or field selector. Values has one value for Equals and
// NotEquals, one or more for In and NotIn, none for Exists and NotExists.
type Requirement struct {
	Key    string   `json:"key"`
	Op     Op       `json:"op"`
	Values []string `json:"values,omitempty"`
}

// Instant is a point in time, absolute (At) or relative to Query.Now (Ago before it).
type Instant struct {
	At  time.Time     `json:"at,omitzero"`
	Ago time.Duration `json:"ago,omitempty"`
}

// Resolve gives the absolute time.
func (i Instant) Resolve(now time.Time) time.Time {
	if i.At.IsZero() {
		return now.Add(-i.Ago)
	}
	return i.At
}

// Owner matches objects with an owner reference: by UID, or by Kind and Name.
type Owner struct {
	UID  string `json:"uid,omitempty"`
	Kind string `json:"kind,omitempty"`
	Name string `json:"name,omitempty"`
}

// Sort fields.
const (
	SortCluster   = "cluster"
	SortNamespace = "namespace"
	SortKind      = "kind"
	SortName      = "name"
	// SortStatus orders by the STATUS the object's Table prints (document.FieldStatus), which
	// objects of kinds without a Status column, and documents written before it, lack.
	SortStatus            = "status"
	SortCreationTimestamp = "creationTimestamp"
	SortLastChangedAt     = "lastChangedAt"
)

// SortFields are the fields a result can be sorted by, besides the columns of one kind's Table
// (SortColumnPrefix).
var SortFields = []string{SortCluster, SortNamespace, SortKind, SortName, SortStatus, SortCreationTimestamp, SortLastChangedAt}

// SortColumnPrefix starts a sort field naming a column of the Table of the one resource a query
// searches: "columns.restarts" orders Pods by their RESTARTS (document.FieldColumns holds the key
// the indexer computed from the printer, table.Printer.SortKeys). Objects without the key (a
// custom resource, an empty or placeholder cell, a document written before mapping version 4)
// sort last in either direction.
const SortColumnPrefix = "columns."

// ColumnSort returns the column id (table.ColumnID) a sort field names, and whether it names one.
func ColumnSort(field string) (string, bool) {
	id, ok := strings.CutPrefix(field, SortColumnPrefix)
	return id, ok && id != ""
}

// Sort is one sort key.
type Sort struct {
	Field string `json:"field"`
	Desc  bool   `json:"desc,omitempty"`
}

// Facet dimensions.
const (
	FacetCluster   = "cluster"
	FacetNamespace = "namespace"
	FacetResource  = "resource"
	// FacetLabels counts label pairs (key=value) of any key.
	FacetLabels = "labels"
	// FacetLabel counts the values of one label key (Facet.Key).
	FacetLabel = "label"
)

// Facet is one requested count.
type Facet struct {
	Dimension string `json:"dimension"`
	Key       string `json:"key,omitempty"` // the label key, for FacetLabel
	Size      int    `json:"size"`
}

// Name is the facet's name in a response: the dimension, or "label:<key>".
func (f Facet) Name() string {
	if f.Dimension == FacetLabel {
		return FacetLabel + ":" + f.Key
	}
	return f.Dimension
}

// Limits.
const (
	DefaultLimit     = 100
	MaxLimit         = 1000
	DefaultFacetSize = 10
	MaxFacetSize     = 1000
)

// Fingerprint identifies what a query selects and in which order: everything but Limit, Continue
// and the response shape (facets, metadataOnly, versions); the Scope included. A continue token carries it, so a token is only accepted for the query
// that issued it.
func (q *Query) Fingerprint() string {
	c := *q
	c.Limit, c.Continue, c.Facets, c.MetadataOnly, c.Versions = 0, "", nil, false, false
	b, _ := json.Marshal(c) // a struct of strings, slices and times: cannot fail
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}
