package authz

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kubesearch/kubesearch/internal/auth"
	"github.com/kubesearch/kubesearch/internal/query"
)

func mustParse(t testing.TB, policy string) *Policy {
	t.Helper()
	p, err := Parse([]byte(policy))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var (
	alice = auth.User{Name: "alice", Groups: []string{"dev", auth.GroupAuthenticated}}
	bob   = auth.User{Name: "bob", Groups: []string{"sre", auth.GroupAuthenticated}}
	carol = auth.User{Name: "carol", Groups: []string{auth.GroupAuthenticated}}
	anon  = auth.User{Name: auth.Anonymous, Groups: []string{auth.GroupUnauthenticated}}
	sa    = auth.User{Name: "system:serviceaccount:shop:viewer", Groups: []string{"system:serviceaccounts", auth.GroupAuthenticated}}
)

const examplePolicy = `rules:
- subjects: [{kind: User, name: alice}]
  clusters: [member1]
  namespaces: [shop]
  resources: [pods, deployments.apps]
  verbs: [get, list, watch]
- subjects: [{kind: User, name: alice}]
  clusters: [member1]
  namespaces: [web]
  resources: [deployments.apps, pods]
  verbs: [list]
- subjects: [{kind: User, name: alice}]
  clusters: [member2]
  namespaces: [shop]
  resources: [pods, deployments.apps]
  verbs: [list]
- subjects: [{kind: Group, name: sre}]
  clusters: ["*"]
  namespaces: ["*"]
  resources: ["*"]
  verbs: ["*"]
- subjects: [{kind: ServiceAccount, namespace: shop, name: viewer}]
  clusters: [member1]
  namespaces: ["", shop]
  resources: [nodes, events.*]
  verbs: [get]
- subjects: [{kind: Group, name: system:authenticated}]
  clusters: [member1]
  namespaces: [public]
  resources: [configmaps]
  verbs: [list]
`

func TestScope(t *testing.T) {
	p := mustParse(t, examplePolicy)
	public := query.Grant{Clusters: []string{"member1"}, Namespaces: []string{"public"}, Resources: []query.Resource{{Resource: "configmaps"}}}
	podsAndDeployments := []query.Resource{{Resource: "pods"}, {Resource: "deployments", Group: "apps"}}
	tests := []struct {
		name string
		user auth.User
		verb string
		want *query.Scope
	}{
		{name: "a group granted everything", user: bob, verb: VerbWatch, want: nil},
		{
			// member1/shop, member1/web and member2/shop: the first two differ in namespaces only,
			// the first and third in clusters only. Merged along clusters first, two grants remain
			// (no product is all three).
			name: "rules merged along one dimension", user: alice, verb: VerbList,
			want: &query.Scope{Grants: []query.Grant{
				{Clusters: []string{"member1", "member2"}, Namespaces: []string{"shop"}, Resources: podsAndDeployments},
				{Clusters: []string{"member1"}, Namespaces: []string{"web"}, Resources: podsAndDeployments},
				public,
			}},
		},
		{
			name: "only the rules of the verb", user: alice, verb: VerbGet,
			want: &query.Scope{Grants: []query.Grant{
				{Clusters: []string{"member1"}, Namespaces: []string{"shop"}, Resources: podsAndDeployments},
			}},
		},
		{
			name: "a ServiceAccount by its user name; any-group resources", user: sa, verb: VerbGet,
			want: &query.Scope{Grants: []query.Grant{
				{Clusters: []string{"member1"}, Namespaces: []string{"", "shop"}, Resources: []query.Resource{{Resource: "events", AnyGroup: true}, {Resource: "nodes"}}},
			}},
		},
		{name: "every authenticated user", user: carol, verb: VerbList, want: &query.Scope{Grants: []query.Grant{public}}},
		{name: "nothing for anonymous", user: anon, verb: VerbList, want: &query.Scope{Grants: []query.Grant{}}},
		{name: "nothing for another verb", user: bob, verb: "delete", want: &query.Scope{Grants: []query.Grant{}}},
		{name: "cached: the same again", user: alice, verb: VerbGet, want: &query.Scope{Grants: []query.Grant{
			{Clusters: []string{"member1"}, Namespaces: []string{"shop"}, Resources: podsAndDeployments},
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := p.Scope(tt.user, tt.verb)
			if !reflect.DeepEqual(got, tt.want) {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(tt.want)
				t.Fatalf("scope\n%s\nwant\n%s", g, w)
			}
		})
	}
}

func TestAllowed(t *testing.T) {
	p := mustParse(t, examplePolicy)
	tests := []struct {
		user                                      auth.User
		verb, cluster, namespace, group, resource string
		want                                      bool
	}{
		{alice, VerbGet, "member1", "shop", "", "pods", true},
		{alice, VerbGet, "member1", "shop", "apps", "deployments", true},
		{alice, VerbGet, "member1", "shop", "evil.io", "pods", false}, // a CRD named pods is not core pods
		{alice, VerbGet, "member1", "web", "", "pods", false},         // web is list only
		{alice, VerbList, "member1", "web", "", "pods", true},
		{alice, VerbList, "member2", "web", "", "pods", false},
		{alice, VerbGet, "member1", "shop", "", "secrets", false},
		{alice, VerbList, "member1", Any, "", "pods", true},           // a list across namespaces
		{alice, VerbList, "member3", Any, "", "pods", false},          // a cluster wholly outside
		{alice, VerbList, Any, Any, "", "secrets", false},             // discovery hides secrets
		{alice, VerbList, Any, Any, Any, "deployments", true},         // in some group
		{alice, VerbList, "member1", "shop", "apps", Any, true},       // some resource of apps
		{alice, VerbList, "member1", "shop", "batch", Any, false},     // none of batch
		{sa, VerbGet, "member1", "", "", "nodes", true},               // cluster-scoped
		{sa, VerbGet, "member1", "", "events.k8s.io", "events", true}, // any group
		{sa, VerbGet, "member1", "", "", "events", true},              // any group, core too
		{sa, VerbGet, "member1", "", "whatever.io", Any, true},        // events.* is in every group
		{sa, VerbGet, "member1", "kube-system", "", "nodes", false},
		{bob, "list", "any-cluster", "any-ns", "any.group", "anything", true},
		{bob, "create", "member1", "shop", "", "pods", false},
		{anon, VerbList, Any, Any, Any, Any, false},
		{carol, VerbList, "member1", "public", "", "configmaps", true},
		{carol, VerbGet, "member1", "public", "", "configmaps", false},
	}
	for _, tt := range tests {
		name := fmt.Sprintf("%s %s %s/%s %s.%s", tt.user.Name, tt.verb, tt.cluster, tt.namespace, tt.resource, tt.group)
		t.Run(name, func(t *testing.T) {
			if got := p.Allowed(tt.user, tt.verb, tt.cluster, tt.namespace, tt.group, tt.resource); got != tt.want {
				t.Fatalf("Allowed = %v, want %v", got, tt.want)
			}
			if !strings.Contains(tt.cluster+tt.namespace+tt.group+tt.resource, Any) {
				if got := p.Scope(tt.user, tt.verb).Allows(tt.cluster, tt.namespace, tt.group, tt.resource); got != tt.want {
					t.Fatalf("Scope.Allows = %v, Allowed %v", got, tt.want)
				}
			}
		})
	}
	if !p.Visible(sa, VerbGet, "", "nodes") || p.Visible(sa, VerbGet, "", "pods") {
		t.Error("Visible disagrees with the policy")
	}
	if !p.VisibleInCluster(alice, VerbList, "member2", "", "pods") || p.VisibleInCluster(alice, VerbList, "member2", "", "configmaps") {
		t.Error("VisibleInCluster disagrees with the policy")
	}
}

// The Scope depends on the set of the user's groups, not their order: a query's fingerprint (and
// so its continue token) stays the same.
func TestScopeDeterministic(t *testing.T) {
	p := mustParse(t, examplePolicy)
	u1 := auth.User{Name: "alice", Groups: []string{"sre", auth.GroupAuthenticated, "dev"}}
	u2 := auth.User{Name: "alice", Groups: []string{"dev", auth.GroupAuthenticated}}
	u3 := auth.User{Name: "alice", Groups: []string{auth.GroupAuthenticated, "dev"}}
	if a, b := p.Scope(u2, VerbList), p.Scope(u3, VerbList); !reflect.DeepEqual(a, b) {
		t.Fatalf("%v != %v", a, b)
	}
	if p.Scope(u1, VerbList) != nil {
		t.Fatal("sre sees everything")
	}
	// The caller may modify the Scope: the policy is not changed.
	s := p.Scope(u2, VerbList)
	s.Grants[0].Namespaces[0] = "kube-system"
	if p.Allowed(u2, VerbList, "member1", "kube-system", "", "pods") {
		t.Fatal("modifying a Scope changed the policy")
	}
}

// A subject allowed 5,000 namespaces across 50 clusters gets a handful of grants, however the
// rules are written: per namespace, per cluster, per pair. The first case goes through a policy
// file; the larger ones (a quarter of a million names) are built directly, as parsing that much
// YAML under the race detector takes a while and tests nothing more.
func TestScopeLargePolicyIsCompact(t *testing.T) {
	const clusters, namespaces = 50, 5000
	clusterNames := make([]string, clusters)
	for i := range clusterNames {
		clusterNames[i] = fmt.Sprintf("member%d", i)
	}
	nsName := func(i int) string { return fmt.Sprintf("team%04d", i) }
	type testRule struct{ clusters, namespaces, resources []string }
	user := auth.User{Name: "t", Groups: []string{"tenants"}}
	tests := []struct {
		name      string
		rules     func(add func(testRule))
		parse     bool
		maxGrants int
		allowed   func(c, n int) bool
	}{
		{
			name: "a rule per cluster, 100 namespaces of its own each, from a policy file",
			rules: func(add func(testRule)) {
				for c := range clusters {
					var ns []string
					for n := c * 100; n < (c+1)*100; n++ {
						ns = append(ns, nsName(n))
					}
					add(testRule{[]string{clusterNames[c]}, ns, []string{"pods"}})
				}
			},
			parse:     true,
			maxGrants: clusters, // each cluster its own namespaces: no product covers two
			allowed:   func(c, n int) bool { return n/100 == c },
		},
		{
			name: "a rule per namespace, every cluster",
			rules: func(add func(testRule)) {
				for n := range namespaces {
					add(testRule{clusterNames, []string{nsName(n)}, []string{"pods", "deployments.apps"}})
				}
			},
			maxGrants: 1,
			allowed:   func(c, n int) bool { return true },
		},
		{
			name: "a rule per cluster and namespace pair, 250,000 rules",
			rules: func(add func(testRule)) {
				for c := range clusters {
					for n := range namespaces {
						add(testRule{[]string{clusterNames[c]}, []string{nsName(n)}, []string{"pods"}})
					}
				}
			},
			maxGrants: 1,
			allowed:   func(c, n int) bool { return true },
		},
		{
			name: "per namespace rules over two resource sets, plus everything in one cluster",
			rules: func(add func(testRule)) {
				for n := range namespaces {
					res := []string{"pods"}
					if n%2 == 1 {
						res = []string{"pods", "services"}
					}
					add(testRule{clusterNames, []string{nsName(n)}, res})
				}
				add(testRule{clusterNames[:1], []string{Any}, []string{Any}})
			},
			maxGrants: 3,
			allowed:   func(c, n int) bool { return true },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPolicy()
			var b strings.Builder
			b.WriteString("rules:\n")
			tt.rules(func(r testRule) {
				if tt.parse {
					fmt.Fprintf(&b, "- subjects: [{kind: Group, name: tenants}]\n  clusters: [%s]\n  namespaces: [%s]\n  resources: [%s]\n  verbs: [get, list, watch]\n",
						strings.Join(r.clusters, ", "), strings.Join(r.namespaces, ", "), strings.Join(r.resources, ", "))
					return
				}
				list := func(l []string) []string {
					if slices.Contains(l, Any) {
						return nil
					}
					return slices.Sorted(slices.Values(l))
				}
				var keys []string
				for _, s := range r.resources {
					keys = append(keys, resourceKey(s))
				}
				res := normalizeResources(keys)
				if slices.Contains(r.resources, Any) {
					res = nil
				}
				p.add(rule{dims: [dims][]string{list(r.clusters), list(r.namespaces), res}, verbs: allVerbs}, nil, []string{"tenants"})
			})
			if tt.parse {
				p = mustParse(t, b.String())
			}
			s := p.Scope(user, VerbList)
			if s == nil || len(s.Grants) == 0 || len(s.Grants) > tt.maxGrants {
				t.Fatalf("%d grants, want 1 to %d", len(s.Grants), tt.maxGrants)
			}
			// Each grant is at most one clause per list in a backend's query.
			if clauses := 3 * len(s.Grants); clauses > 1024 {
				t.Fatalf("%d clauses", clauses)
			}
			for c := range clusters {
				for _, n := range []int{0, 1, c * 100, c*100 + 99, namespaces - 1} {
					want := tt.allowed(c, n)
					if got := s.Allows(clusterNames[c], nsName(n), "", "pods"); got != want {
						t.Fatalf("Allows(%s, %s) = %v, want %v", clusterNames[c], nsName(n), got, want)
					}
					if got := p.Allowed(user, VerbList, clusterNames[c], nsName(n), "", "pods"); got != want {
						t.Fatalf("Allowed(%s, %s) = %v, want %v", clusterNames[c], nsName(n), got, want)
					}
				}
			}
			if s.Allows("member-unknown", nsName(0), "", "pods") || s.Allows(clusterNames[1], "kube-system", "", "pods") {
				t.Fatal("allows outside the rules")
			}
		})
	}
}

// Merging never changes what a Scope allows: on random policies, the merged Scope, the union of
// the rules taken one by one, and Allowed agree on every probe.
func TestScopeMergeIsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	values := map[int][]string{
		dimClusters:   {"c1", "c2", "c3", `"*"`},
		dimNamespaces: {"a", "b", "c", `""`, `"*"`},
		dimResources:  {"pods", "deployments.apps", "events.*", "events.events.k8s.io", "nodes", `"*"`},
	}
	pick := func(d int) string {
		vs := values[d]
		n := 1 + rng.IntN(3)
		out := make([]string, n)
		for i := range out {
			out[i] = vs[rng.IntN(len(vs))]
			if out[i] == `"*"` && rng.IntN(3) > 0 { // "*" less often, or everything is everything
				out[i] = vs[0]
			}
		}
		return strings.Join(out, ", ")
	}
	type probe struct{ cluster, namespace, group, resource string }
	var probes []probe
	for _, c := range []string{"c1", "c2", "c3", "c4"} {
		for _, n := range []string{"a", "b", "c", "d", ""} {
			for _, r := range [][2]string{{"", "pods"}, {"apps", "deployments"}, {"", "events"}, {"events.k8s.io", "events"}, {"", "nodes"}, {"x.io", "pods"}, {"", "secrets"}} {
				probes = append(probes, probe{c, n, r[0], r[1]})
			}
		}
	}
	user := auth.User{Name: "u", Groups: []string{"g"}}
	for iter := range 300 {
		var b strings.Builder
		b.WriteString("rules:\n")
		for range 1 + rng.IntN(12) {
			fmt.Fprintf(&b, "- subjects: [{kind: Group, name: g}]\n  clusters: [%s]\n  namespaces: [%s]\n  resources: [%s]\n  verbs: [list]\n",
				pick(dimClusters), pick(dimNamespaces), pick(dimResources))
		}
		p := mustParse(t, b.String())
		s := p.Scope(user, VerbList)
		for _, pr := range probes {
			naive := false
			for i := range p.rules {
				naive = naive || p.rules[i].allows(pr.cluster, pr.namespace, pr.group, pr.resource)
			}
			if got := s.Allows(pr.cluster, pr.namespace, pr.group, pr.resource); got != naive {
				t.Fatalf("policy %d:\n%s\nScope.Allows(%v) = %v, the rules say %v; scope %+v", iter, b.String(), pr, got, naive, s)
			}
			if got := p.Allowed(user, VerbList, pr.cluster, pr.namespace, pr.group, pr.resource); got != naive {
				t.Fatalf("Allowed(%v) = %v, the rules say %v", pr, got, naive)
			}
		}
		if s != nil && len(s.Grants) > p.Rules() {
			t.Fatalf("%d grants of %d rules", len(s.Grants), p.Rules())
		}
	}
}

func BenchmarkScopeLargePolicy(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("rules:\n")
	for n := range 5000 {
		fmt.Fprintf(&sb, "- subjects: [{kind: Group, name: tenants}]\n  clusters: [\"*\"]\n  namespaces: [team%04d]\n  resources: [pods]\n  verbs: [list]\n", n)
	}
	p := mustParse(b, sb.String())
	user := auth.User{Name: "t", Groups: []string{"tenants"}}
	b.ReportAllocs()
	for b.Loop() {
		if s := p.Scope(user, VerbList); len(s.Grants) != 1 {
			b.Fatal(len(s.Grants))
		}
	}
}
