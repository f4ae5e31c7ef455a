// Package authz decides what a user may see: the authorization policy file
// (--authorization-policy-file) or the members' SubjectAccessReview API, compiled into the query
// model's Scope, which every backend applies inside its queries, and the checks the server makes
// before querying (a request wholly outside the scope is a 403; discovery lists only what the user
// may see).
//
// The policy is a list of rules, each granting its subjects the product of its clusters,
// namespaces and resources for its verbs:
//
//	rules:
//	- subjects: [{kind: User, name: alice}, {kind: Group, name: sre},
//	             {kind: ServiceAccount, namespace: shop, name: viewer}]
//	  clusters: [member1]              # "*" for every cluster
//	  namespaces: [shop, web, ""]      # "*" for every namespace and cluster-scoped objects; "" for cluster-scoped objects
//	  resources: [pods, deployments.apps]
//	  verbs: [get, list, watch]        # "*" for all three
//
// Resources are read as RBAC reads them, never more than written, because a grant must not widen
// when a CRD appears: a bare plural is the core group ("pods" is core pods, not a CRD named pods),
// "pods.core" says the same explicitly, "deployments.apps" is that plural in group apps,
// "events.*" is that plural in any group, and "*" is every resource of every group. A group
// wildcard ("*.apps") is refused: the query model names resources one by one.
//
// Subjects are matched as Kubernetes does: a User by name, a Group by any of the user's groups
// (system:authenticated is every verified user, system:unauthenticated the anonymous one), a
// ServiceAccount as the user system:serviceaccount:<namespace>:<name>. Every list in a rule is
// required: an omitted list is an error, never "everything".
//
// The SubjectAccessReview mode (Reviewer, review.go) asks each member instead, per request: its
// answers, cached, become grants of the same Scope, so both are applied in the same one place.
//
// It leaves out who the user is (package auth) and how a Scope becomes a query (each backend).
package authz
