package authz

import (
	"encoding/binary"
	"hash/maphash"
	"slices"
	"strings"

	"github.com/kubesearch/kubesearch/internal/auth"
	"github.com/kubesearch/kubesearch/internal/query"
)

// maxSubsumptionCheck bounds the grants compared pairwise for one dropping another: merging
// (linear) already made them few; beyond it the Scope stays correct, only less compact.
const maxSubsumptionCheck = 512

// maxCachedScopes bounds the users × verbs (and so the distinct scopes) a Policy keeps.
const maxCachedScopes = 4096

// Scope is what user may see with verb, for the query model: the union of the rules whose
// subjects include the user and whose verbs include verb. nil means everything (some rule grants
// "*" in every list); a Scope without grants means nothing (no rule matches, or verb is not get,
// list or watch).
//
// The Scope is compact, because every backend compiles it into each query: rules that differ in
// one list only are merged into one grant (a cluster × namespace × resource product is never
// expanded), and grants within another are dropped. So rules of one namespace each, or one
// cluster each, over the same other lists, become one grant whatever their number; a grant's
// lists each become one clause. The Scope depends only on the policy, the user's name and the set
// of its groups (not their order), so a query's fingerprint, which covers it, stays the same
// from one request to the next. It shares nothing with the Policy: the caller may keep it.
func (p *Policy) Scope(user auth.User, verb string) *query.Scope {
	c := p.compiled(user, verb)
	if c.everything {
		return nil
	}
	s := &query.Scope{Grants: make([]query.Grant, len(c.grants))}
	for i, g := range c.grants {
		s.Grants[i] = query.Grant{
			Clusters:   slices.Clone(g.dims[dimClusters]),
			Namespaces: slices.Clone(g.dims[dimNamespaces]),
			Resources:  toResources(g.dims[dimResources]),
		}
	}
	return s
}

// Allowed reports whether user may, with verb, see some object in cluster and namespace ("" for
// cluster-scoped objects) of resource (the plural) in group ("" for core). Each of cluster,
// namespace, group and resource may be Any, to ask about any value: Allowed(u, "list", "member1",
// Any, "", "pods") is whether the user sees pods in any namespace of member1. It agrees with
// Scope: with no Any, it is Scope(user, verb).Allows(cluster, namespace, group, resource); with
// Any, whether that holds for some value. A request for which it is false is wholly outside the
// user's scope: a 403.
func (p *Policy) Allowed(user auth.User, verb, cluster, namespace, group, resource string) bool {
	c := p.compiled(user, verb)
	if c.everything {
		return true
	}
	for i := range c.grants {
		if c.grants[i].allows(cluster, namespace, group, resource) {
			return true
		}
	}
	return false
}

// Visible reports whether user may, with verb, see any object of resource in group in any
// cluster and namespace: whether discovery lists the resource for the user.
func (p *Policy) Visible(user auth.User, verb, group, resource string) bool {
	return p.Allowed(user, verb, Any, Any, group, resource)
}

// VisibleInCluster reports whether user may, with verb, see any object of resource in group in
// cluster: whether a one-cluster view's discovery lists the resource for the user.
func (p *Policy) VisibleInCluster(user auth.User, verb, cluster, group, resource string) bool {
	return p.Allowed(user, verb, cluster, Any, group, resource)
}

// allows is Allowed for one rule or grant (see rule for its lists).
func allows(d *[dims][]string, cluster, namespace, group, resource string) bool {
	return has(d[dimClusters], cluster) && has(d[dimNamespaces], namespace) && hasResource(d[dimResources], group, resource)
}

func (r *rule) allows(cluster, namespace, group, resource string) bool {
	return allows(&r.dims, cluster, namespace, group, resource)
}

func (g *grant) allows(cluster, namespace, group, resource string) bool {
	return allows(&g.dims, cluster, namespace, group, resource)
}

// compiledScope is the merged grants of a set of rules; everything when one of them grants "*" in
// every list. It is never modified once made.
type compiledScope struct {
	rules      []int // the indexes of the rules, sorted
	everything bool
	grants     []grant
}

// compiled is the user's scope for verb, merged once and kept: merging thousands of rules takes
// milliseconds, and every request of the user needs it. Users matching the same rules (the
// members of a group) share one scope, so the cache holds one copy of a large scope, not one per
// user. The cache is per Policy (a reload starts afresh) and bounded.
func (p *Policy) compiled(user auth.User, verb string) *compiledScope {
	groups := slices.Clone(user.Groups)
	slices.Sort(groups)
	key := verb + "\x00" + user.Name + "\x00" + strings.Join(slices.Compact(groups), "\x00")
	p.mu.Lock()
	c, ok := p.byUser[key]
	p.mu.Unlock()
	if ok {
		return c
	}

	idx := p.matching(user, verb)
	h := hashRules(p.seed, idx)
	p.mu.Lock()
	for _, c := range p.byRules[h] {
		if slices.Equal(c.rules, idx) {
			p.remember(key, h, c, false)
			p.mu.Unlock()
			return c
		}
	}
	p.mu.Unlock()

	c = p.compile(idx)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.remember(key, h, c, true)
	return c
}

// remember caches c for the user key (and, if new, for its rules); p.mu is held.
func (p *Policy) remember(key string, h uint64, c *compiledScope, isNew bool) {
	if len(p.byUser) >= maxCachedScopes {
		// Simple and bounded: users come back and are compiled again.
		clear(p.byUser)
		clear(p.byRules)
		isNew = true
	}
	p.byUser[key] = c
	if isNew {
		p.byRules[h] = append(p.byRules[h], c)
	}
}

func (p *Policy) compile(idx []int) *compiledScope {
	gs := make([]grant, 0, len(idx))
	for _, i := range idx {
		r := &p.rules[i]
		if r.dims[dimClusters] == nil && r.dims[dimNamespaces] == nil && r.dims[dimResources] == nil {
			return &compiledScope{rules: idx, everything: true}
		}
		gs = append(gs, grant{dims: r.dims})
	}
	return &compiledScope{rules: idx, grants: merge(gs)}
}

func hashRules(seed maphash.Seed, idx []int) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	var b [8]byte
	for _, i := range idx {
		binary.LittleEndian.PutUint64(b[:], uint64(i))
		h.Write(b[:])
	}
	return h.Sum64()
}

func has(list []string, v string) bool {
	if list == nil || v == Any {
		return true
	}
	_, found := slices.BinarySearch(list, v)
	return found
}

func hasResource(keys []string, group, resource string) bool {
	if keys == nil {
		return true
	}
	for _, k := range keys {
		g, plural, _ := strings.Cut(k, "/")
		if (resource == Any || plural == resource) && (group == Any || g == Any || g == group) {
			return true
		}
	}
	return false
}

func toResources(keys []string) []query.Resource {
	if keys == nil {
		return nil
	}
	out := make([]query.Resource, len(keys))
	for i, k := range keys {
		g, plural, _ := strings.Cut(k, "/")
		out[i] = query.Resource{Resource: plural, Group: g}
		if g == Any {
			out[i] = query.Resource{Resource: plural, AnyGroup: true}
		}
	}
	return out
}

// grant is a product of its dimensions while merging, with the dimensions' hashes. Its lists may
// be a rule's: they are never modified, a merge makes new ones.
type grant struct {
	dims [dims][]string
	sum  [dims]uint64
}

// merge makes the union of gs compact without changing it: two grants equal in all dimensions
// but one are one grant (A×B×C ∪ A×B'×C = A×(B∪B')×C), and a grant within another is dropped,
// until neither applies. The result keeps the order of first appearance: deterministic.
func merge(gs []grant) []grant {
	seed := maphash.MakeSeed()
	for i := range gs {
		for d := range dims {
			gs[i].sum[d] = hashList(seed, gs[i].dims[d])
		}
	}
	for {
		n := len(gs)
		for d := range dims {
			gs = mergeAlong(seed, gs, d)
		}
		gs = dropSubsumed(gs)
		if len(gs) == n {
			return gs
		}
	}
}

// mergeAlong merges the grants equal in every dimension but d, in one pass: buckets by the other
// dimensions' hashes, each checked for equality (a hash is not proof), unions built once per
// bucket.
func mergeAlong(seed maphash.Seed, gs []grant, d int) []grant {
	o1, o2 := (d+1)%dims, (d+2)%dims
	type key struct{ a, b uint64 }
	buckets := make(map[key][]int, len(gs)) // → indexes into out
	out := make([]grant, 0, len(gs))
	var members [][][]string // per out index, the lists to unite along d, if more than one
	for _, g := range gs {
		k := key{g.sum[o1], g.sum[o2]}
		merged := false
		for _, j := range buckets[k] {
			if slices.Equal(out[j].dims[o1], g.dims[o1]) && slices.Equal(out[j].dims[o2], g.dims[o2]) &&
				(out[j].dims[o1] == nil) == (g.dims[o1] == nil) && (out[j].dims[o2] == nil) == (g.dims[o2] == nil) {
				if members[j] == nil {
					members[j] = [][]string{out[j].dims[d]}
				}
				members[j] = append(members[j], g.dims[d])
				merged = true
				break
			}
		}
		if !merged {
			buckets[k] = append(buckets[k], len(out))
			out = append(out, g)
			members = append(members, nil)
		}
	}
	for j, lists := range members {
		if lists == nil {
			continue
		}
		out[j].dims[d] = unite(lists, d == dimResources)
		out[j].sum[d] = hashList(seed, out[j].dims[d])
	}
	return out
}

// unite is the sorted union of lists; nil (every value) if one of them is.
func unite(lists [][]string, resources bool) []string {
	n := 0
	for _, l := range lists {
		if l == nil {
			return nil
		}
		n += len(l)
	}
	out := make([]string, 0, n)
	for _, l := range lists {
		out = append(out, l...)
	}
	if resources {
		return normalizeResources(out)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// dropSubsumed drops the grants within another one (or equal to an earlier one).
func dropSubsumed(gs []grant) []grant {
	if len(gs) < 2 || len(gs) > maxSubsumptionCheck {
		return gs
	}
	keep := make([]bool, len(gs))
	for i := range gs {
		keep[i] = true
		for j := range gs {
			if i == j || !keep[j] && j < i {
				continue
			}
			// Of two equal grants, the first is kept.
			if within(&gs[i], &gs[j]) && (j < i || !within(&gs[j], &gs[i])) {
				keep[i] = false
				break
			}
		}
	}
	out := gs[:0:0]
	for i, g := range gs {
		if keep[i] {
			out = append(out, g)
		}
	}
	return out
}

// within reports whether every object a allows, b allows.
func within(a, b *grant) bool {
	for d := range dims {
		if !subset(a.dims[d], b.dims[d], d == dimResources) {
			return false
		}
	}
	return true
}

func subset(a, b []string, resources bool) bool {
	if b == nil {
		return true
	}
	if a == nil {
		return false
	}
	if !resources && len(a) > len(b) {
		return false
	}
	for _, v := range a {
		if _, found := slices.BinarySearch(b, v); found {
			continue
		}
		if resources {
			if _, plural, _ := strings.Cut(v, "/"); slices.Contains(b, Any+"/"+plural) {
				continue
			}
		}
		return false
	}
	return true
}

func hashList(seed maphash.Seed, l []string) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	if l == nil {
		h.WriteByte(1) // every value: unlike any list
		return h.Sum64()
	}
	for _, s := range l {
		h.WriteString(s)
		h.WriteByte(0)
	}
	return h.Sum64()
}
