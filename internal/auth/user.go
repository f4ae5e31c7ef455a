package auth

import "slices"

// Kubernetes' names for the identities every request gets.
const (
	// Anonymous is the user of a request without credentials, when anonymous access is enabled.
	Anonymous = "system:anonymous"
	// GroupUnauthenticated is the group of the anonymous user.
	GroupUnauthenticated = "system:unauthenticated"
	// GroupAuthenticated is the group of every user whose credentials were verified.
	GroupAuthenticated = "system:authenticated"
)

// User is who a request comes from, with Kubernetes' semantics: Name is the user name (a
// ServiceAccount's is system:serviceaccount:<namespace>:<name>), UID is optional, Groups include
// system:authenticated for every verified user and system:unauthenticated for the anonymous one.
type User struct {
	Name   string
	UID    string
	Groups []string
	// Proxied is set for a user a trusted front proxy named (requestheader.go) and for no other:
	// a kube-apiserver's aggregation layer names a user only after the control plane's own
	// authorizer allowed the request, so what only that authorizer may decide (the Karmada
	// ResourceRegistry objects the query API serves for a control plane) is served to such users
	// alone.
	Proxied bool
}

// IsAnonymous reports whether u is the anonymous user.
func (u User) IsAnonymous() bool { return u.Name == Anonymous }

var anonymousUser = User{Name: Anonymous, Groups: []string{GroupUnauthenticated}}

// authenticated returns the user of verified credentials: groups without empty names or
// duplicates, and system:authenticated, as every Kubernetes authenticator adds it.
func authenticated(name, uid string, groups []string) User {
	out := make([]string, 0, len(groups)+1)
	for _, g := range groups {
		if g != "" && !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	if !slices.Contains(out, GroupAuthenticated) {
		out = append(out, GroupAuthenticated)
	}
	return User{Name: name, UID: uid, Groups: out}
}
