package authz

import (
	"testing"

	"github.com/kubesearch/kubesearch/internal/auth"
)

// FuzzPolicyFile: any input either fails to parse or gives a policy whose merged Scope allows
// exactly what its rules allow, and whose Allowed agrees with both.
func FuzzPolicyFile(f *testing.F) {
	for _, seed := range []string{
		examplePolicy,
		"rules: []\n",
		"",
		"rules:\n- verb: [get]\n",
		`rules:
- subjects: [{kind: Group, name: g}]
  clusters: [c1, c2]
  namespaces: [a, ""]
  resources: [pods, events.*, deployments.apps]
  verbs: [list]
- subjects: [{kind: Group, name: g}]
  clusters: [c1]
  namespaces: [b]
  resources: [pods, events.*, deployments.apps]
  verbs: [list, get]
- subjects: [{kind: User, name: u}]
  clusters: ["*"]
  namespaces: [a]
  resources: [events.events.k8s.io, pods.core]
  verbs: ["*"]
`,
		"rules:\n- subjects: [{kind: ServiceAccount, namespace: a, name: u}]\n  clusters: [c1]\n  namespaces: ['*']\n  resources: ['*']\n  verbs: [watch]\n",
		"rules: [{subjects: [{kind: User, name: u}], clusters: [no], namespaces: [0123], resources: [x.*], verbs: [get]}]\n",
		"{rules: [{subjects: [{kind: Role}], clusters: 1}]}\n",
	} {
		f.Add([]byte(seed))
	}
	users := []auth.User{
		{Name: "u", Groups: []string{"g"}},
		{Name: "system:serviceaccount:a:u", Groups: []string{auth.GroupAuthenticated}},
		{Name: "alice", Groups: []string{"sre", "dev"}},
	}
	values := [][]string{{"c1", "c2", "member1", "x"}, {"a", "b", "", "shop", "web"}}
	resources := [][2]string{{"", "pods"}, {"apps", "deployments"}, {"", "events"}, {"events.k8s.io", "events"}, {"x.io", "pods"}, {"", "nodes"}}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data)
		if err != nil {
			return
		}
		for _, u := range users {
			for _, verb := range []string{VerbGet, VerbList, VerbWatch} {
				s := p.Scope(u, verb)
				if s != nil && len(s.Grants) > p.Rules() {
					t.Fatalf("%d grants of %d rules", len(s.Grants), p.Rules())
				}
				rules := p.matching(u, verb)
				for _, c := range values[0] {
					for _, ns := range values[1] {
						for _, r := range resources {
							naive := false
							for _, i := range rules {
								naive = naive || p.rules[i].allows(c, ns, r[0], r[1])
							}
							if got := s.Allows(c, ns, r[0], r[1]); got != naive {
								t.Fatalf("%s %s: Scope.Allows(%s, %s, %v) = %v, the rules say %v", u.Name, verb, c, ns, r, got, naive)
							}
							if got := p.Allowed(u, verb, c, ns, r[0], r[1]); got != naive {
								t.Fatalf("%s %s: Allowed(%s, %s, %v) = %v, the rules say %v", u.Name, verb, c, ns, r, got, naive)
							}
						}
					}
				}
			}
		}
	})
}
