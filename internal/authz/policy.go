package authz

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"os"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/kubesearch/kubesearch/internal/auth"
)

// Verbs a rule can grant; the query API is read-only.
const (
	VerbGet   = "get"
	VerbList  = "list"
	VerbWatch = "watch"
)

// Any, as a cluster, namespace, group or resource of Allowed, asks whether any value is allowed.
// No real name can be "*".
const Any = "*"

// Subject kinds.
const (
	KindUser           = "User"
	KindGroup          = "Group"
	KindServiceAccount = "ServiceAccount"
)

// Dimensions of a rule and of a grant.
const (
	dimClusters = iota
	dimNamespaces
	dimResources
	dims
)

// Policy is a parsed policy file. Its rules never change, so one request can use one Policy for all its
// checks while the file is reloaded.
type Policy struct {
	rules      []rule
	ruleUsers  map[string][]int // user name → indexes of the rules naming it
	ruleGroups map[string][]int
	// urlRules grant get on non-resource paths (/metrics), apart from rules: they never widen
	// a Scope.
	urlRules []urlRule

	seed    maphash.Seed
	mu      sync.Mutex
	byUser  map[string]*compiledScope   // verb, user name and groups → scope; see compiled
	byRules map[uint64][]*compiledScope // hash of the rules matched → scopes
}

// rule is a parsed rule. Each dimension is a sorted list without duplicates, nil for every value.
// Resources are keys: "<group>/<plural>" ("/pods" for core pods), "*/<plural>" for a plural in any
// group, a group-specific key never beside the any-group key of its plural.
type rule struct {
	dims  [dims][]string
	verbs verbSet
}

type verbSet uint8

// urlRule grants get on paths: a path, or a prefix ending in "*", as RBAC's nonResourceURLs.
type urlRule struct {
	paths         []string
	users, groups []string
}

var verbBits = map[string]verbSet{VerbGet: 1, VerbList: 2, VerbWatch: 4}

const allVerbs verbSet = 7

// Rules is the number of rules of the policy.
func (p *Policy) Rules() int { return len(p.rules) }

// Load reads and checks a policy file; the error lists every problem, each with its field path.
func Load(path string) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("policy file: %w", err)
	}
	p, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("policy file %s: %w", path, err)
	}
	return p, nil
}

// Parse reads a policy strictly: an unknown or duplicate field, a value of the wrong type, an
// omitted or empty list are errors, all of them reported, each with its field path.
func Parse(data []byte) (*Policy, error) {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		// One line: the YAML parser's errors (with their line numbers) span several.
		return nil, errors.New(strings.Join(strings.Fields(err.Error()), " "))
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	var c checker
	p := newPolicy()
	top, ok := doc.(map[string]any)
	if !ok {
		if doc == nil {
			return nil, errors.New("empty policy; want rules: [...] (rules: [] grants nothing)")
		}
		return nil, fmt.Errorf("must be a mapping with rules, not %s", typeName(doc))
	}
	c.unknownFields(top, nil, "rules")
	var rules []any
	if _, ok := top["rules"]; ok {
		rules, _ = c.list(top, "rules", nil, "")
	} else {
		c.fail(field.NewPath("rules"), "required (rules: [] grants nothing)")
	}
	for i, rv := range rules {
		p.addRule(&c, rv, field.NewPath("rules").Index(i))
	}
	if err := errors.Join(c.errs...); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Policy) addRule(c *checker, v any, path *field.Path) {
	m, ok := v.(map[string]any)
	if !ok {
		c.fail(path, "must be a mapping, not %s", typeName(v))
		return
	}
	n := len(c.errs)
	if _, ok := m["nonResourceURLs"]; ok {
		p.addURLRule(c, m, path)
		return
	}
	c.unknownFields(m, path, "subjects", "clusters", "namespaces", "resources", "verbs", "nonResourceURLs")
	var r rule
	r.dims[dimClusters] = c.strings(m, "clusters", path, "clusters", checkCluster)
	r.dims[dimNamespaces] = c.strings(m, "namespaces", path, "namespaces and cluster-scoped objects", checkNamespace)
	r.dims[dimResources] = c.resources(m, path)
	r.verbs = c.verbs(m, path)
	users, groups := c.subjects(m, path)
	if len(c.errs) > n {
		return // a rule with a problem is not half-added: the policy fails as a whole anyway
	}
	p.add(r, users, groups)
}

// addURLRule reads a rule of nonResourceURLs: operational paths such as /metrics, which name every
// member, granted apart from any cluster, namespace or resource, as kube-apiserver's RBAC grants
// get on /metrics. Its verbs are get (or "*"): the paths are read-only.
func (p *Policy) addURLRule(c *checker, m map[string]any, path *field.Path) {
	n := len(c.errs)
	c.unknownFields(m, path, "subjects", "nonResourceURLs", "verbs", "clusters", "namespaces", "resources")
	for _, k := range []string{"clusters", "namespaces", "resources"} {
		if _, ok := m[k]; ok {
			c.fail(path.Child(k), "a rule grants either nonResourceURLs or clusters, namespaces and resources, not both")
		}
	}
	urls := c.strings(m, "nonResourceURLs", path, "paths", func(s string) string {
		if !strings.HasPrefix(s, "/") || strings.Contains(strings.TrimSuffix(s, "*"), "*") {
			return `not a path; want one starting with "/", ending in "*" to grant a prefix`
		}
		return ""
	})
	if urls == nil {
		urls = []string{"*"} // "*" (or a problem already reported)
	}
	c.strings(m, "verbs", path, "verbs", func(s string) string {
		if s != VerbGet {
			return "nonResourceURLs are read with get only"
		}
		return ""
	})
	users, groups := c.subjects(m, path)
	if len(c.errs) > n {
		return
	}
	p.urlRules = append(p.urlRules, urlRule{paths: urls, users: users, groups: groups})
}

// AllowedURL reports whether user may get a non-resource path (/metrics) by a rule of
// nonResourceURLs.
func (p *Policy) AllowedURL(user auth.User, urlPath string) bool {
	for _, r := range p.urlRules {
		if !slices.Contains(r.users, user.Name) && !slices.ContainsFunc(user.Groups, func(g string) bool { return slices.Contains(r.groups, g) }) {
			continue
		}
		for _, u := range r.paths {
			if u == "*" || u == urlPath || (strings.HasSuffix(u, "*") && strings.HasPrefix(urlPath, strings.TrimSuffix(u, "*"))) {
				return true
			}
		}
	}
	return false
}

func newPolicy() *Policy {
	return &Policy{ruleUsers: map[string][]int{}, ruleGroups: map[string][]int{}, seed: maphash.MakeSeed(),
		byUser: map[string]*compiledScope{}, byRules: map[uint64][]*compiledScope{}}
}

// add adds a checked rule granted to users and groups.
func (p *Policy) add(r rule, users, groups []string) {
	i := len(p.rules)
	p.rules = append(p.rules, r)
	for _, u := range users {
		p.ruleUsers[u] = append(p.ruleUsers[u], i)
	}
	for _, g := range groups {
		p.ruleGroups[g] = append(p.ruleGroups[g], i)
	}
}

// matching are the indexes of the rules whose subjects include user, in the policy's order (so
// that a Scope does not depend on the order of the user's groups).
func (p *Policy) matching(user auth.User, verb string) []int {
	bit, ok := verbBits[verb]
	if !ok {
		return nil
	}
	idx := slices.Clone(p.ruleUsers[user.Name])
	for _, g := range user.Groups {
		idx = append(idx, p.ruleGroups[g]...)
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	return slices.DeleteFunc(idx, func(i int) bool { return p.rules[i].verbs&bit == 0 })
}

// ServiceAccountUser is the user name Kubernetes gives a ServiceAccount's tokens.
func ServiceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// checker collects the problems of a policy, each with its field path.
type checker struct {
	errs []error
}

func (c *checker) fail(path *field.Path, format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
}

// unknownFields reports the fields of m that are not known, suggesting the nearest known one.
func (c *checker) unknownFields(m map[string]any, path *field.Path, known ...string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the map's order is random; the errors' must not be
	for _, k := range keys {
		if slices.Contains(known, k) {
			continue
		}
		if s := suggest(k, known); s != "" {
			c.fail(child(path, k), "unknown field; did you mean %s?", s)
		} else {
			c.fail(child(path, k), "unknown field; want %s", strings.Join(known, ", "))
		}
	}
}

// child is path.key; key alone at the top.
func child(path *field.Path, key string) *field.Path {
	if path == nil {
		return field.NewPath(key)
	}
	return path.Child(key)
}

// list is the list at m[key]. hint completes the message of an omitted or empty list; an empty
// list is accepted only without a hint.
func (c *checker) list(m map[string]any, key string, path *field.Path, hint string) ([]any, bool) {
	p := child(path, key)
	v, present := m[key]
	if !present || v == nil {
		c.fail(p, "required%s", hint)
		return nil, false
	}
	l, ok := v.([]any)
	if !ok {
		c.fail(p, "must be a list, not %s", typeName(v))
		return nil, false
	}
	if hint != "" && len(l) == 0 {
		c.fail(p, "must not be empty%s", hint)
		return nil, false
	}
	return l, true
}

// strings reads the required list of strings m[key], each passing check; "*" among them makes it
// nil (every value). what names the values for the message of an omitted list.
func (c *checker) strings(m map[string]any, key string, path *field.Path, what string, check func(string) string) []string {
	raw, ok := c.list(m, key, path, fmt.Sprintf("; \"*\" for all %s", what))
	if !ok {
		return nil
	}
	p := child(path, key)
	out := make([]string, 0, len(raw))
	all := false
	for i, v := range raw {
		s, ok := v.(string)
		switch {
		case !ok:
			c.fail(p.Index(i), "must be a string, not %s%s", typeName(v), quoteHint(v))
		case s == Any:
			all = true
		default:
			if msg := check(s); msg != "" {
				c.fail(p.Index(i), "%q: %s", s, msg)
			}
			out = append(out, s)
		}
	}
	if all {
		return nil
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func checkCluster(s string) string {
	if errs := validation.IsDNS1123Label(s); len(errs) > 0 {
		return "not a cluster name: " + errs[0]
	}
	return ""
}

func checkNamespace(s string) string {
	if s == "" {
		return "" // cluster-scoped objects
	}
	if errs := validation.IsDNS1123Label(s); len(errs) > 0 {
		return "not a namespace: " + errs[0]
	}
	return ""
}

// resources reads the resources of a rule into keys (see rule).
func (c *checker) resources(m map[string]any, path *field.Path) []string {
	names := c.strings(m, "resources", path, "resources", checkResource)
	if names == nil {
		return nil
	}
	keys := make([]string, len(names))
	for i, s := range names {
		keys[i] = resourceKey(s)
	}
	return normalizeResources(keys)
}

func checkResource(s string) string {
	plural, group, dotted := strings.Cut(s, ".")
	if plural == Any {
		return "a group wildcard cannot be granted; list the group's resources (deployments.apps, ...)"
	}
	if errs := validation.IsDNS1123Label(plural); len(errs) > 0 {
		return "not a resource (the lower-case plural, e.g. pods or deployments.apps): " + errs[0]
	}
	if dotted && group != Any && group != "core" {
		if errs := validation.IsDNS1123Subdomain(group); len(errs) > 0 {
			return "not an API group: " + errs[0]
		}
	}
	return ""
}

// resourceKey maps a checked resource of the policy to its key: a bare plural and "<plural>.core"
// are the core group, "<plural>.*" any group.
func resourceKey(s string) string {
	plural, group, _ := strings.Cut(s, ".")
	if group == "core" {
		group = ""
	}
	return group + "/" + plural
}

// normalizeResources sorts keys, drops duplicates and the group-specific keys of a plural granted
// in any group.
func normalizeResources(keys []string) []string {
	slices.Sort(keys)
	keys = slices.Compact(keys)
	anyGroup := map[string]bool{}
	for _, k := range keys {
		if g, plural, _ := strings.Cut(k, "/"); g == Any {
			anyGroup[plural] = true
		}
	}
	if len(anyGroup) == 0 {
		return keys
	}
	return slices.DeleteFunc(keys, func(k string) bool {
		g, plural, _ := strings.Cut(k, "/")
		return g != Any && anyGroup[plural]
	})
}

func (c *checker) verbs(m map[string]any, path *field.Path) verbSet {
	vs := c.strings(m, "verbs", path, "verbs", func(s string) string {
		if _, ok := verbBits[s]; !ok {
			return `not a verb here; must be get, list, watch or "*"`
		}
		return ""
	})
	if vs == nil {
		return allVerbs // or a problem already reported
	}
	var set verbSet
	for _, v := range vs {
		set |= verbBits[v]
	}
	return set
}

// subjects reads the subjects of a rule: the user names and group names they match.
func (c *checker) subjects(m map[string]any, path *field.Path) (users, groups []string) {
	raw, _ := c.list(m, "subjects", path, "; a User, Group or ServiceAccount")
	for i, v := range raw {
		p := path.Child("subjects").Index(i)
		s, ok := v.(map[string]any)
		if !ok {
			c.fail(p, "must be a mapping (kind, name, and namespace for a ServiceAccount), not %s", typeName(v))
			continue
		}
		n := len(c.errs)
		c.unknownFields(s, p, "kind", "name", "namespace")
		kind := c.str(s, "kind", p)
		name := c.str(s, "name", p)
		_, hasNS := s["namespace"]
		switch kind {
		case "":
		case KindUser, KindGroup:
			if hasNS {
				c.fail(p.Child("namespace"), "only a ServiceAccount has a namespace")
			}
		case KindServiceAccount:
			if ns := c.str(s, "namespace", p); ns != "" {
				if msg := checkNamespace(ns); msg != "" {
					c.fail(p.Child("namespace"), "%q: %s", ns, msg)
				}
				name = ServiceAccountUser(ns, name)
			}
		default:
			hint := ""
			if s := suggest(kind, []string{KindUser, KindGroup, KindServiceAccount}); s != "" {
				hint = "; did you mean " + s + "?"
			}
			c.fail(p.Child("kind"), "%q: must be User, Group or ServiceAccount%s", kind, hint)
		}
		if name == Any {
			c.fail(p.Child("name"), `"*" is not a subject; Group system:authenticated is every authenticated user`)
		}
		if len(c.errs) > n {
			continue
		}
		if kind == KindGroup {
			groups = append(groups, name)
		} else {
			users = append(users, name)
		}
	}
	return users, groups
}

// str is the required, non-empty string m[key]; "" after reporting a problem.
func (c *checker) str(m map[string]any, key string, path *field.Path) string {
	p := path.Child(key)
	v, present := m[key]
	if !present || v == nil {
		c.fail(p, "required")
		return ""
	}
	s, ok := v.(string)
	if !ok {
		c.fail(p, "must be a string, not %s%s", typeName(v), quoteHint(v))
		return ""
	}
	if s == "" {
		c.fail(p, "must not be empty")
	}
	return s
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%T", v)
}

// quoteHint helps with YAML's surprises: no, off and 0123 are not strings unless quoted.
func quoteHint(v any) string {
	switch v.(type) {
	case bool, json.Number:
		return " (quote it)"
	}
	return ""
}

// suggest is the known name nearest to s, if near enough to be a typo.
func suggest(s string, known []string) string {
	best, bestDist := "", 3
	for _, k := range known {
		if strings.EqualFold(s, k) {
			return k
		}
		if d := editDistance(strings.ToLower(s), strings.ToLower(k)); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is Levenshtein's distance, for short names.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 30
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
