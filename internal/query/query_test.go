package query

import (
	"testing"
	"time"
)

func TestScopeAllows(t *testing.T) {
	scope := &Scope{Grants: []Grant{
		{Clusters: []string{"member1"}, Namespaces: []string{"shop"}, Resources: []Resource{{Resource: "pods", AnyGroup: true}, {Resource: "deployments", Group: "apps"}}},
		{Namespaces: []string{""}, Resources: []Resource{{Resource: "nodes", Group: ""}}},
	}}
	for _, tt := range []struct {
		cluster, namespace, group, resource string
		want                                bool
	}{
		{"member1", "shop", "", "pods", true},
		{"member1", "shop", "example.com", "pods", true}, // a plural without a group: any group
		{"member1", "shop", "apps", "deployments", true},
		{"member1", "shop", "extensions", "deployments", false},
		{"member2", "shop", "", "pods", false},
		{"member1", "web", "", "pods", false},
		{"member3", "", "", "nodes", true},
		{"member3", "", "example.com", "nodes", false}, // core nodes only
		{"member3", "kube-system", "", "nodes", false},
	} {
		if got := scope.Allows(tt.cluster, tt.namespace, tt.group, tt.resource); got != tt.want {
			t.Errorf("Allows(%s, %q, %q, %s) = %v, want %v", tt.cluster, tt.namespace, tt.group, tt.resource, got, tt.want)
		}
	}
	var everything *Scope
	if !everything.Allows("any", "any", "", "pods") {
		t.Error("a nil scope must allow everything")
	}
	if (&Scope{}).Allows("member1", "shop", "", "pods") {
		t.Error("a scope without grants must allow nothing")
	}
}

// A continue token carries the fingerprint: it must differ between subjects' scopes, so a token
// issued to one subject never pages another subject's query.
func TestFingerprintCoversScope(t *testing.T) {
	q := Query{Limit: 10, Now: time.Unix(0, 0)}
	a, b, c := q, q, q
	b.Scope = &Scope{}
	c.Scope = &Scope{Grants: []Grant{{Clusters: []string{"member1"}}}}
	fa, fb, fc := a.Fingerprint(), b.Fingerprint(), c.Fingerprint()
	if fa == fb || fb == fc || fa == fc {
		t.Errorf("fingerprints do not tell scopes apart: %s %s %s", fa, fb, fc)
	}
}
