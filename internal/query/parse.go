package query

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/kubesearch/kubesearch/internal/table"
)

// Parameter names, as Kubernetes and Clusterpedia spell them where they have one.
const (
	ParamResources     = "resources"
	ParamClusters      = "clusters"
	ParamNamespaces    = "namespaces"
	ParamNames         = "names"
	ParamNamePrefix    = "namePrefix"
	ParamFuzzyName     = "fuzzyName"
	ParamLabelSelector = "labelSelector"
	ParamFieldSelector = "fieldSelector"
	ParamText          = "q"
	ParamOwner         = "owner"
	ParamCreatedSince  = "createdSince"
	ParamCreatedBefore = "createdBefore"
	ParamChangedSince  = "changedSince"
	ParamSort          = "sort"
	ParamLimit         = "limit"
	ParamContinue      = "continue"
	ParamFacets        = "facets"
	ParamFacetSize     = "facetSize"
	ParamMetadataOnly  = "metadataOnly"
)

// Params lists every parameter Parse accepts; any other is an error, so a misspelt one
// (labelselector) is reported instead of silently widening the search.
var Params = []string{ParamResources, ParamClusters, ParamNamespaces, ParamNames, ParamNamePrefix,
	ParamFuzzyName, ParamLabelSelector, ParamFieldSelector, ParamText, ParamOwner, ParamCreatedSince,
	ParamCreatedBefore, ParamChangedSince, ParamSort, ParamLimit, ParamContinue, ParamFacets,
	ParamFacetSize, ParamMetadataOnly}

// Error is one bad parameter.
type Error struct {
	Param   string
	Message string
}

func (e Error) Error() string { return e.Param + ": " + e.Message }

// Errors are all the bad parameters of one request.
type Errors []Error

func (e Errors) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

// Limits on the size of one query. Each is far above what people and scripts write; together they
// bound the query a backend has to run, so no input can make a store refuse it as too large and have
// that read as an unavailable store. OpenSearch refuses a query of more than
// indices.query.bool.max_clause_count (by default 1024) leaf clauses; one at every limit at once has
// at most 781 by osstore's count (TestLargestQueryFitsClauseLimit), about 720 on OpenSearch 2.19
// (the e2e TestQueryCapsOnOpenSearch runs it). Lists of values (clusters, names, the values of one
// in) cost one term set, whatever their length; requirements, resources and words each cost one or
// more clauses of their own, so those are bounded apart from the lists.
const (
	// MaxListValues bounds the values of one list parameter (clusters, namespaces, names, sort,
	// facets) and of one in or notin requirement.
	MaxListValues = 1000
	// MaxResources bounds the resource types of one query (absent means every type).
	MaxResources = 100
	// MaxFacets bounds the facets of one query: each is an aggregation of up to MaxFacetSize
	// buckets, and a dashboard asks for a handful.
	MaxFacets = 20
	// MaxRequirements bounds the requirements of a label selector, and those of a field selector.
	MaxRequirements = 50
	// MaxSelectorLength bounds the length of each selector, in bytes: an in of 1000 label values
	// (at most 63 characters each) fits.
	MaxSelectorLength = 64 << 10
	// MaxTextWords and MaxFuzzyNameWords bound the words of q and fuzzyName (see words): each word
	// of q is one clause, each word of fuzzyName up to 50 (a backend's fuzzy expansions).
	MaxTextWords      = 64
	MaxFuzzyNameWords = 5
	// MaxValueLength bounds one name, path or value, and MaxTextLength q.
	MaxValueLength = 1024
	MaxTextLength  = 1024
	// MinFuzzyNameLength is the shortest fuzzyName, in characters (spaces aside): a shorter one
	// is contained in most names, so its wildcard matches nearly everything at the full cost of
	// reading every name, and its words are too short to be fuzzy (AUTO allows no edit below
	// three characters). namePrefix and names serve short names.
	MinFuzzyNameLength = 3
)

var (
	resourceName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	groupName    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// Parse builds a Query from URL parameters. now anchors relative times ("1h" means an hour before
// now). Every bad parameter is reported, each naming the parameter, as Errors.
func Parse(v url.Values, now time.Time) (*Query, error) {
	p := parser{v: v}
	for name := range v {
		if !slices.Contains(Params, name) {
			param := name
			if param == "" {
				param = `""` // "?=x": a value without a name
			}
			p.fail(param, "unknown parameter; known: %s", strings.Join(Params, ", "))
		}
	}
	q := &Query{Now: now, Limit: DefaultLimit}
	for _, s := range p.list(ParamResources, MaxResources) {
		q.Resources = append(q.Resources, p.resource(s))
	}
	q.Clusters = p.list(ParamClusters, MaxListValues)
	q.Namespaces = p.list(ParamNamespaces, MaxListValues)
	q.Names = p.list(ParamNames, MaxListValues)
	q.NamePrefix = p.single(ParamNamePrefix, MaxValueLength)
	q.FuzzyName = p.fuzzyName()
	q.Labels = p.labels()
	q.Fields = p.fields()
	q.Text = p.words(ParamText, MaxTextLength, MaxTextWords)
	q.Owner = p.owner()
	q.CreatedSince = p.instant(ParamCreatedSince)
	q.CreatedBefore = p.instant(ParamCreatedBefore)
	q.ChangedSince = p.instant(ParamChangedSince)
	q.Sort = p.sort(q.Resources)
	if n, ok := p.int(ParamLimit, 1, MaxLimit); ok {
		q.Limit = n
	}
	q.Continue = p.single(ParamContinue, 64<<10)
	size := DefaultFacetSize
	if n, ok := p.int(ParamFacetSize, 1, MaxFacetSize); ok {
		size = n
	}
	q.Facets = p.facets(size)
	q.MetadataOnly = p.bool(ParamMetadataOnly)
	if len(p.errs) > 0 {
		return nil, p.errs
	}
	return q, nil
}

type parser struct {
	v    url.Values
	errs Errors
	// columns are the sort columns of the one resource searched, looked up once (looked) for
	// every column a sort names; printed: the resource has a printer.
	columns         []string
	looked, printed bool
}

func (p *parser) fail(param, format string, args ...any) {
	p.errs = append(p.errs, Error{Param: param, Message: fmt.Sprintf(format, args...)})
}

// single is a parameter given at most once.
func (p *parser) single(name string, maxLen int) string {
	vals := p.v[name]
	switch {
	case len(vals) == 0:
		return ""
	case len(vals) > 1:
		p.fail(name, "given %d times; give it once", len(vals))
		return ""
	case len(vals[0]) > maxLen:
		p.fail(name, "longer than %d bytes", maxLen)
		return ""
	}
	return vals[0]
}

// words is a single parameter of at most maxWords words.
func (p *parser) words(name string, maxLen, maxWords int) string {
	s := p.single(name, maxLen)
	if n := words(s); n > maxWords {
		p.fail(name, "%d words; at most %d", n, maxWords)
		return ""
	}
	return s
}

// fuzzyName is the fuzzyName parameter: a few words, at least MinFuzzyNameLength characters.
func (p *parser) fuzzyName() string {
	s := p.words(ParamFuzzyName, MaxValueLength, MaxFuzzyNameWords)
	if n := utf8.RuneCountInString(strings.Join(strings.Fields(s), "")); s != "" && n < MinFuzzyNameLength {
		p.fail(ParamFuzzyName, "%q: at least %d characters (a shorter text is in most names); use namePrefix or names for short names", s, MinFuzzyNameLength)
		return ""
	}
	return s
}

// list is a comma-separated list of at most maxValues distinct entries; the parameter may also
// repeat (names=a&names=b).
func (p *parser) list(name string, maxValues int) []string {
	var out []string
	for _, val := range p.v[name] {
		for s := range strings.SplitSeq(val, ",") {
			s = strings.TrimSpace(s)
			switch {
			case s == "":
				p.fail(name, "empty entry in %q", val)
				return nil
			case len(s) > MaxValueLength:
				p.fail(name, "an entry is longer than %d bytes", MaxValueLength)
				return nil
			}
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	if len(out) > maxValues {
		p.fail(name, "%d values; at most %d", len(out), maxValues)
		return nil
	}
	return out
}

// resource reads "pods" (that plural in any group: a CRD named pods too), "deployments.apps", or
// "pods.core" for the core group only ("core" cannot be a CRD's group, which needs a dot).
func (p *parser) resource(s string) Resource {
	name, group, dotted := strings.Cut(strings.ToLower(s), ".")
	r := Resource{Resource: name, Group: group, AnyGroup: !dotted}
	if group == "core" {
		r.Group = ""
	}
	if !resourceName.MatchString(name) {
		p.fail(ParamResources, "%q: not a resource name (the plural, e.g. pods or deployments.apps)", s)
	}
	if dotted && !groupName.MatchString(group) {
		p.fail(ParamResources, "%q: %q is not an API group", s, group)
	}
	return r
}

func (p *parser) labels() []Requirement {
	s := p.single(ParamLabelSelector, MaxSelectorLength)
	if s == "" {
		return nil
	}
	reqs, err := labels.ParseToRequirements(s)
	if err != nil {
		p.fail(ParamLabelSelector, "%v", err)
		return nil
	}
	if len(reqs) > MaxRequirements {
		p.fail(ParamLabelSelector, "%d requirements; at most %d", len(reqs), MaxRequirements)
		return nil
	}
	var out []Requirement
	for _, r := range reqs {
		req := Requirement{Key: r.Key(), Values: r.ValuesUnsorted()}
		if len(req.Values) > MaxListValues {
			p.fail(ParamLabelSelector, "%q: %d values; at most %d", r.Key()+" "+string(r.Operator())+" (...)", len(req.Values), MaxListValues)
			continue
		}
		slices.Sort(req.Values)
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals:
			req.Op = Equals
		case selection.NotEquals:
			req.Op = NotEquals
		case selection.In:
			req.Op = In
		case selection.NotIn:
			req.Op = NotIn
		case selection.Exists:
			req.Op = Exists
		case selection.DoesNotExist:
			req.Op = NotExists
		default:
			p.fail(ParamLabelSelector, "%q: operator %s is not supported (label values are matched as strings)", r.String(), r.Operator())
			continue
		}
		out = append(out, req)
	}
	return out
}

func (p *parser) fields() []Requirement {
	s := p.single(ParamFieldSelector, MaxSelectorLength)
	if s == "" {
		return nil
	}
	sel, err := fields.ParseSelector(s)
	if err != nil {
		p.fail(ParamFieldSelector, "%v", err)
		return nil
	}
	reqs := sel.Requirements()
	if len(reqs) > MaxRequirements {
		p.fail(ParamFieldSelector, "%d requirements; at most %d", len(reqs), MaxRequirements)
		return nil
	}
	var out []Requirement
	for _, r := range reqs {
		if bad := badPath(r.Field); bad != "" {
			p.fail(ParamFieldSelector, "%q: %s", r.Field, bad)
			continue
		}
		req := Requirement{Key: r.Field, Values: []string{r.Value}}
		switch r.Operator {
		case selection.Equals, selection.DoubleEquals:
			req.Op = Equals
		case selection.NotEquals:
			req.Op = NotEquals
		default: // the field parser knows no others; kept so a new one is an error, not a match
			p.fail(ParamFieldSelector, "%q: operator %s is not supported", r.Field, r.Operator)
			continue
		}
		out = append(out, req)
	}
	return out
}

// badPath says what is wrong with a field selector path, or "" when nothing is. Path segments are
// object keys joined by dots; keys may hold anything else (annotation keys have slashes).
func badPath(path string) string {
	switch {
	case len(path) > MaxValueLength:
		return fmt.Sprintf("a field path is at most %d bytes", MaxValueLength)
	case path == "":
		return "empty field path"
	case slices.Contains(strings.Split(path, "."), ""):
		return "empty segment in field path (write metadata.name, not metadata..name)"
	}
	return ""
}

func (p *parser) owner() *Owner {
	s := p.single(ParamOwner, MaxValueLength)
	if s == "" {
		return nil
	}
	kind, name, ok := strings.Cut(s, "/")
	if !ok {
		return &Owner{UID: s}
	}
	if kind == "" || name == "" || strings.Contains(name, "/") {
		p.fail(ParamOwner, "%q: give an owner UID, or Kind/name such as ReplicaSet/web-7d9f8c6b5", s)
		return nil
	}
	return &Owner{Kind: kind, Name: name}
}

// instant reads an RFC 3339 time, or a duration before now: 90s, 15m, 1h, 7d.
func (p *parser) instant(name string) *Instant {
	s := p.single(name, 64)
	if s == "" {
		return nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return &Instant{At: t.UTC()}
	}
	d, err := parseAgo(s)
	if err != nil {
		p.fail(name, "%q: want an RFC 3339 time (2026-11-29T10:00:00Z) or a duration before now (90s, 15m, 1h, 7d)", s)
		return nil
	}
	return &Instant{Ago: d}
}

func parseAgo(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || n > 36500 {
			return 0, fmt.Errorf("bad days")
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("bad duration")
	}
	return d, nil
}

// sort reads "creationTimestamp:desc,name", and a column of the one resource searched:
// "columns.restarts:desc".
func (p *parser) sort(resources []Resource) []Sort {
	var out []Sort
	for _, s := range p.list(ParamSort, MaxListValues) {
		field, dir, _ := strings.Cut(s, ":")
		if id, ok := ColumnSort(field); ok {
			if !p.column(field, id, resources) {
				continue
			}
		} else if !slices.Contains(SortFields, field) {
			p.fail(ParamSort, "%q: unknown sort field; known: %s, and %s<column> of the one resource searched (%s)",
				field, strings.Join(SortFields, ", "), SortColumnPrefix, ParamResources)
			continue
		}
		if slices.ContainsFunc(out, func(o Sort) bool { return o.Field == field }) {
			p.fail(ParamSort, "%q: sort field given twice", field)
			continue
		}
		switch dir {
		case "", "asc":
			out = append(out, Sort{Field: field})
		case "desc":
			out = append(out, Sort{Field: field, Desc: true})
		default:
			p.fail(ParamSort, "%q: direction must be asc or desc", s)
		}
	}
	return out
}

// column checks that id is a column of the Table of the one resource searched, the only case where
// the column means one thing (READY is a count in Pods and a ratio in Deployments) and its key
// exists (table.Printer.SortKeys; a resource given without its group is taken as the built-in one
// of that name, as kubectl would). Custom resources have no keys: their columns are their CRD's,
// which the indexer does not know when it writes.
func (p *parser) column(field, id string, resources []Resource) bool {
	if len(resources) != 1 {
		p.fail(ParamSort, "%q: a column sorts the objects of one resource: give exactly one in %s (e.g. %s=pods&%s=%srestarts), not %d",
			field, ParamResources, ParamResources, ParamSort, SortColumnPrefix, len(resources))
		return false
	}
	r := resources[0]
	if !resourceName.MatchString(r.Resource) || (r.Group != "" && !groupName.MatchString(r.Group)) {
		return false // resources says so, quoting it: printed here, a line break would cut this error
	}
	if !p.looked {
		p.looked = true
		for _, b := range table.BuiltIn() {
			group, name, _ := strings.Cut(b, "/")
			if name == r.Resource && (r.AnyGroup || group == r.Group) {
				printer, _ := table.Lookup(group, name)
				p.columns, p.printed = printer.SortColumns(), true
				break
			}
		}
	}
	if !p.printed {
		p.fail(ParamSort, "%q: %s has no sortable columns: only the built-in kinds' columns are indexed (a custom resource's are its CRD's)", field, r)
		return false
	}
	known := p.columns
	if len(known) == 0 {
		p.fail(ParamSort, "%q: %s has no columns besides NAME and AGE (sort=%s, sort=%s)", field, r, SortName, SortCreationTimestamp)
		return false
	}
	if !slices.Contains(known, id) {
		p.fail(ParamSort, "%q: %s has no column %q; known: %s", field, r, id, strings.Join(known, ", "))
		return false
	}
	return true
}

func (p *parser) int(name string, lo, hi int) (int, bool) {
	s := p.single(name, 32)
	if s == "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		p.fail(name, "%q: want an integer from %d to %d", s, lo, hi)
		return 0, false
	}
	return n, true
}

func (p *parser) bool(name string) bool {
	s := p.single(name, 32)
	if s == "" {
		return false
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		p.fail(name, "%q: want true or false", s)
	}
	return b
}

// facets reads "cluster,namespace,resource,labels,label:app.kubernetes.io/name".
func (p *parser) facets(size int) []Facet {
	var out []Facet
	for _, s := range p.list(ParamFacets, MaxFacets) {
		dim, key, hasKey := strings.Cut(s, ":")
		f := Facet{Dimension: dim, Key: key, Size: size}
		switch {
		case dim == FacetLabel && hasKey:
			if errs := validLabelKey(key); errs != "" {
				p.fail(ParamFacets, "%q: %s", s, errs)
				continue
			}
		case hasKey || !slices.Contains([]string{FacetCluster, FacetNamespace, FacetResource, FacetLabels}, dim):
			p.fail(ParamFacets, "%q: unknown facet; known: cluster, namespace, resource, labels, label:<key>", s)
			continue
		}
		if slices.ContainsFunc(out, func(o Facet) bool { return o.Name() == f.Name() }) {
			continue
		}
		out = append(out, f)
	}
	return out
}

func validLabelKey(key string) string {
	if _, err := labels.NewRequirement(key, selection.Exists, nil); err != nil {
		return err.Error()
	}
	return ""
}
