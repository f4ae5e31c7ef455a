package authz

import (
	"strings"
	"testing"

	"github.com/kubesearch/kubesearch/internal/auth"
)

// Problems are reported all at once, each with its field path.
func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string // each a line of the error
	}{
		{
			name: "unknown field with a suggestion",
			in: `rules:
- subjects: [{kind: User, name: alice}]
  clusters: ["*"]
  namespaces: ["*"]
  resources: ["*"]
  verb: [get]
`,
			want: []string{
				"rules[0].verb: unknown field; did you mean verbs?",
				`rules[0].verbs: required; "*" for all verbs`,
			},
		},
		{
			name: "several rules, several problems",
			in: `rules:
- subjects: [{kind: User, name: alice}, {kind: Role, name: x}, {kind: user, name: bob}]
  clusters: [member1]
  namespaces: [shop]
  resources: [pods]
  verbs: [get]
- subjects: [{kind: ServiceAccount, name: viewer}, {kind: Group, name: sre, namespace: shop}, {kind: User, name: "*"}]
  clusters: [Member_1, 7]
  namespaces: [no, "Shop"]
  resources: ["*.apps", "deployments.apps", "Pods", "x.not_a_group"]
  verbs: [get, create]
- subjects: []
  clusters: []
  resources: member1
  verbs: "*"
  subject: []
`,
			want: []string{
				`rules[0].subjects[1].kind: "Role": must be User, Group or ServiceAccount`,
				`rules[0].subjects[2].kind: "user": must be User, Group or ServiceAccount; did you mean User?`,
				"rules[1].subjects[0].namespace: required",
				"rules[1].subjects[1].namespace: only a ServiceAccount has a namespace",
				`rules[1].subjects[2].name: "*" is not a subject; Group system:authenticated is every authenticated user`,
				`rules[1].clusters[0]: "Member_1": not a cluster name`,
				"rules[1].clusters[1]: must be a string, not a number (quote it)",
				"rules[1].namespaces[0]: must be a string, not a boolean (quote it)",
				`rules[1].namespaces[1]: "Shop": not a namespace`,
				`rules[1].resources[0]: "*.apps": a group wildcard cannot be granted`,
				`rules[1].resources[2]: "Pods": not a resource`,
				`rules[1].resources[3]: "x.not_a_group": not an API group`,
				`rules[1].verbs[1]: "create": not a verb here; must be get, list, watch or "*"`,
				"rules[2].subject: unknown field; did you mean subjects?",
				`rules[2].clusters: must not be empty; "*" for all clusters`,
				`rules[2].namespaces: required; "*" for all namespaces and cluster-scoped objects`,
				"rules[2].resources: must be a list, not a string",
				"rules[2].verbs: must be a list, not a string",
				"rules[2].subjects: must not be empty; a User, Group or ServiceAccount",
			},
		},
		{name: "no rules", in: "rule: []\n", want: []string{"rule: unknown field; did you mean rules?", "rules: required (rules: [] grants nothing)"}},
		{name: "empty", in: "", want: []string{"empty policy"}},
		{name: "not a mapping", in: "- a\n", want: []string{"must be a mapping with rules, not a list"}},
		{name: "a rule not a mapping", in: "rules: [x]\n", want: []string{"rules[0]: must be a mapping, not a string"}},
		{name: "duplicate key", in: "rules: []\nrules: []\n", want: []string{`line 2: key "rules" already set in map`}},
		{name: "bad YAML", in: "rules: [\n", want: []string{"yaml: line"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.in))
			if err == nil {
				t.Fatal("no error")
			}
			lines := strings.Split(err.Error(), "\n")
			for _, want := range tt.want {
				found := false
				for _, l := range lines {
					found = found || strings.Contains(l, want)
				}
				if !found {
					t.Errorf("no line contains %q in:\n%s", want, err)
				}
			}
			if len(lines) != len(tt.want) {
				t.Errorf("%d problems, want %d:\n%s", len(lines), len(tt.want), err)
			}
		})
	}
}

func TestParseAcceptsTheIssueExample(t *testing.T) {
	p, err := Parse([]byte(`rules:
- subjects: [{kind: User, name: alice}, {kind: Group, name: sre}]
  clusters: [member1]          # "*" for all
  namespaces: [shop, web]      # "*" for all, "" for cluster-scoped objects
  resources: ["pods", "deployments.apps", "*"]
  verbs: [get, list, watch]
- subjects: [{kind: ServiceAccount, namespace: shop, name: viewer}]
  clusters: ["*"]
  namespaces: [""]
  resources: [nodes, events.*, pods.core, events.events.k8s.io]
  verbs: ["*"]
- subjects: [{kind: Group, name: nobody}]
  clusters: [member1]
  namespaces: [shop]
  resources: [pods]
  verbs: [get]
`))
	if err != nil {
		t.Fatal(err)
	}
	if p.Rules() != 3 {
		t.Fatalf("%d rules", p.Rules())
	}
	if got := p.rules[1].dims[dimResources]; strings.Join(got, " ") != "*/events /nodes /pods" {
		t.Errorf("resource keys %q", got)
	}
	if _, err := Parse([]byte("rules: []\n")); err != nil {
		t.Errorf("an empty rule list (nothing granted) is refused: %v", err)
	}
}

// A rule of nonResourceURLs grants get on operational paths and nothing else: it never widens a
// Scope, and mixing it with resources is an error naming the field.
func TestNonResourceURLs(t *testing.T) {
	p, err := Parse([]byte(`rules:
- subjects: [{kind: User, name: prometheus}]
  nonResourceURLs: [/metrics, "/debug/*"]
  verbs: [get]
`))
	if err != nil {
		t.Fatal(err)
	}
	prom := auth.User{Name: "prometheus"}
	for path, want := range map[string]bool{"/metrics": true, "/debug/pprof": true, "/metricsx": false, "/api": false} {
		if got := p.AllowedURL(prom, path); got != want {
			t.Errorf("AllowedURL(%s) = %v, want %v", path, got, want)
		}
	}
	if p.AllowedURL(auth.User{Name: "alice"}, "/metrics") {
		t.Error("alice may get /metrics without a rule")
	}
	if s := p.Scope(prom, VerbGet); s == nil || len(s.Grants) != 0 {
		t.Errorf("the URL rule widened prometheus's Scope: %+v", s)
	}
	if p.Allowed(prom, VerbGet, Any, Any, Any, Any) {
		t.Error("the URL rule allows objects")
	}

	_, err = Parse([]byte(`rules:
- subjects: [{kind: User, name: prometheus}]
  nonResourceURLs: [metrics]
  resources: [pods]
  verbs: [list]
`))
	for _, want := range []string{
		"rules[0].resources: a rule grants either nonResourceURLs or clusters, namespaces and resources, not both",
		`rules[0].nonResourceURLs[0]: "metrics": not a path`,
		`rules[0].verbs[0]: "list": nonResourceURLs are read with get only`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}
