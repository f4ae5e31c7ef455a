package storetest

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/store"
)

// Cases are the suite's cases, in the order they run: queries of the corpus as loaded first, then
// the cases that change it (paging while writing, the version rules, garbage collection), then
// watermarks and the large-total case. Later cases see what earlier ones changed, on every backend
// alike.
func Cases() []Case {
	var out []Case
	for _, qc := range queryCases() {
		out = append(out, Case{Name: qc.name, Run: qc.run})
	}
	out = append(out,
		Case{"counts per pair", func(r *R) { r.counts(nil) }},
		Case{"counts per pair within a scope", func(r *R) { r.counts(scopes["one cluster, one namespace, deployments"]) }},
		Case{"counts per pair of an empty scope", func(r *R) { r.counts(&query.Scope{}) }},
	)
	out = append(out, tokenCases()...)
	out = append(out, Case{SnapshotLimitsCase, snapshotLimits})
	out = append(out, writeCases()...)
	out = append(out, gcCases()...)
	out = append(out, watermarkCases()...)
	out = append(out, Case{"totals are exact past 10,000 matches", largeTotal})
	return out
}

// queryCase is a search of the corpus: every page read, and checked against the objects the
// corpus says match, in order, exactly as stored, with the exact total, facets and versions.
type queryCase struct {
	name string
	v    url.Values
	mod  func(*query.Query) // what is not a URL parameter: scope, versions
	// unordered: relevance order, which the corpus cannot predict; items are compared as sets
	// with the expectation (between backends, still in order).
	unordered bool
	// none: the corpus has no match (otherwise a case without matches fails: it could not).
	none bool
}

func (qc queryCase) run(r *R) {
	r.unordered = qc.unordered
	q := r.parse(qc.v)
	if qc.mod != nil {
		qc.mod(q)
	}
	want := r.want(q)
	if qc.none {
		r.expect(len(want) == 0, "the corpus has %d matches for a case that expects none", len(want))
	} else if !r.expect(len(want) > 0, "the corpus has no match: the case could not fail") {
		return
	}
	items, first, err := r.walk(qc.v.Encode(), q, len(want)/q.Limit+3)
	if !r.noError("search", err) {
		return
	}
	r.expectItems(items, want, qc.unordered, q.MetadataOnly)
	r.expect(first.Total == int64(len(want)) && !first.TotalIsLowerBound, "total %d (lower bound %v), want exactly %d",
		first.Total, first.TotalIsLowerBound, len(want))
	if r.expect(len(first.Facets) == len(q.Facets), "%d facets, asked for %d", len(first.Facets), len(q.Facets)) {
		for i, f := range q.Facets {
			exp := expectedFacet(want, f)
			r.expect(fmt.Sprint(first.Facets[i]) == fmt.Sprint(exp), "facet %s:\n got  %+v\n want %+v", f.Name(), first.Facets[i], exp)
		}
	}
	if q.Versions {
		exp := expectedVersions(r.c.Live(), q)
		r.expect(fmt.Sprint(first.Versions) == fmt.Sprint(exp), "versions %v, want %v", first.Versions, exp)
	}
}

// Scopes of the scope cases: what a subject may see.
var scopes = map[string]*query.Scope{
	"one cluster, one namespace, deployments": {Grants: []query.Grant{{Clusters: []string{"prod-eu"}, Namespaces: []string{"shop"},
		Resources: []query.Resource{{Resource: "deployments", Group: "apps"}}}}},
	"cluster-scoped only, two clusters": {Grants: []query.Grant{{Clusters: []string{"prod-us", "staging"}, Namespaces: []string{""}}}},
	"two grants, one of a plural in any group": {Grants: []query.Grant{
		{Namespaces: []string{"payments", ""}, Resources: []query.Resource{{Resource: "configmaps", AnyGroup: true}, {Resource: "nodes"}}},
		{Clusters: []string{"staging"}, Resources: []query.Resource{{Resource: "pods"}}},
	}},
	"nothing": {},
}

func withScope(name string) func(*query.Query) {
	return func(q *query.Query) { q.Scope = scopes[name] }
}

func withVersions(q *query.Query) { q.Versions = true }

func queryCases() []queryCase {
	ownerUID := uid("prod-eu", "ReplicaSet", "shop", "web-7d9f8c6b5")
	return []queryCase{
		// What and where.
		{name: "everything, default order, two pages", v: params()},
		{name: "one page of everything", v: params("limit", "1000")},
		{name: "a plural in any group", v: params("resources", "pods")},
		{name: "a resource in its group", v: params("resources", "deployments.apps")},
		{name: "the core group only", v: params("resources", "pods.core")},
		{name: "a resource in another group", v: params("resources", "deployments.example.com"), none: true},
		{name: "a kind never written", v: params("resources", "ingresses.networking.k8s.io"), none: true},
		{name: "several resources", v: params("resources", "services,nodes")},
		{name: "clusters", v: params("clusters", "prod-eu,staging", "resources", "deployments.apps")},
		{name: "namespaces", v: params("namespaces", "payments", "resources", "services")},
		{name: "names repeated across clusters and namespaces", v: params("names", "web")},
		{name: "names past one page", v: params("names", "web,api", "limit", "5")},
		{name: "name prefix", v: params("namePrefix", "web-", "resources", "pods")},
		{name: "a cluster-scoped kind", v: params("resources", "nodes", "clusters", "staging")},

		// Label selectors: every operator, dotted and slashed keys.
		{name: "label =, dotted key", v: params("labelSelector", "app.kubernetes.io/name=web")},
		{name: "label ==", v: params("labelSelector", "app.kubernetes.io/name==api")},
		{name: "label != matches objects without the key", v: params("labelSelector", "example.com/tier!=frontend")},
		{name: "label in", v: params("labelSelector", "app.kubernetes.io/name in (web,worker)")},
		{name: "label notin matches objects without the key", v: params("labelSelector", "app.kubernetes.io/name notin (web,api)")},
		{name: "label exists", v: params("labelSelector", "example.com/tier")},
		{name: "label does not exist", v: params("labelSelector", "!example.com/tier")},
		{name: "label app is not app.kubernetes.io/name", v: params("labelSelector", "app")},
		{name: "label !app", v: params("labelSelector", "!app", "resources", "pods")},
		{name: "label with an empty value", v: params("labelSelector", "node-role.kubernetes.io/control-plane=")},
		{name: "label with an empty value exists", v: params("labelSelector", "node-role.kubernetes.io/control-plane")},
		{name: "label requirements are ANDed", v: params("labelSelector", "app.kubernetes.io/name=web,example.com/tier=frontend,app,!pod-template-hash")},
		{name: "label value nobody has", v: params("labelSelector", "app.kubernetes.io/name=nope"), none: true},
		{name: "label key with an underscore", v: params("labelSelector", "grafana_dashboard=1")},
		{name: "label notin and in together", v: params("labelSelector", "example.com/tier in (frontend,backend),app.kubernetes.io/name notin (api)")},

		// Field selectors on any path.
		{name: "field metadata.name", v: params("fieldSelector", "metadata.name=web")},
		{name: "field metadata.namespace != keeps cluster-scoped objects", v: params("fieldSelector", "metadata.namespace!=shop")},
		{name: "field metadata.namespace empty is cluster-scoped", v: params("fieldSelector", "metadata.namespace=")},
		{name: "field status.phase", v: params("fieldSelector", "status.phase=Pending")},
		{name: "field on an array: any element", v: params("fieldSelector", "spec.containers.name=istio-proxy", "resources", "pods")},
		{name: "field on an array of images", v: params("fieldSelector", "spec.containers.image=nginx:1.26")},
		{name: "fields on an array flatten (two elements match)", v: params("fieldSelector", "spec.containers.name=web,spec.containers.image=istio/proxyv2:1.22")},
		{name: "field != on an array: no element equals", v: params("fieldSelector", "spec.containers.name!=istio-proxy", "resources", "pods")},
		{name: "field = empty: missing or empty", v: params("fieldSelector", "spec.nodeName=", "resources", "pods")},
		{name: "field != empty: present and not empty", v: params("fieldSelector", "spec.nodeName!=", "resources", "pods")},
		{name: "field with a slashed, dotted key", v: params("fieldSelector", "metadata.annotations.example.com/team=checkout")},
		{name: "field on a label path", v: params("fieldSelector", "metadata.labels.app.kubernetes.io/name=api")},
		{name: "field number matched as text", v: params("fieldSelector", "spec.replicas=3", "resources", "deployments")},
		{name: "field boolean matched as text", v: params("fieldSelector", "spec.unschedulable=true")},
		{name: "field in an array of objects", v: params("fieldSelector", "metadata.ownerReferences.kind=ReplicaSet,status.containerStatuses.restartCount=2")},
		{name: "field on a small leaf of a near-1 MiB object", v: params("fieldSelector", "data.small=yes")},
		{name: "field on a leaf too long to index never matches", v: params("fieldSelector", "metadata.annotations.example.com/blob!="), none: true},
		{name: "field present but empty is not != empty", v: params("fieldSelector", "data.EMPTY!=", "resources", "configmaps"), none: true},
		{name: "field present but empty is = empty", v: params("fieldSelector", "data.EMPTY=", "resources", "configmaps")},
		{name: "field value nobody has", v: params("fieldSelector", "status.phase=Failed"), none: true},
		{name: "field metadata.uid", v: params("fieldSelector", "metadata.uid="+uid("staging", "Node", "node-3"))},
		{name: "field kind and apiVersion", v: params("fieldSelector", "kind=Deployment,apiVersion=apps/v1", "clusters", "prod-us")},
		{name: "field on a label with an empty value: != empty", v: params("fieldSelector", "metadata.labels.node-role.kubernetes.io/control-plane!="), none: true},
		{name: "field on the cache annotation", v: params("fieldSelector", "metadata.annotations.resource.karmada.io/cached-from-cluster=staging", "resources", "nodes")},
		{name: "fields and labels together", v: params("fieldSelector", "metadata.namespace=payments,status.phase!=Pending", "labelSelector", "example.com/tier=backend")},

		// Free text and fuzzy names.
		{name: "text, one word", v: params("q", "istio", "sort", "name")},
		{name: "text, every word must match", v: params("q", "istio proxy", "resources", "deployments.apps", "sort", "cluster,namespace,name")},
		{name: "text ignores case", v: params("q", "WORKER", "sort", "name")},
		{name: "text of node names and kinds", v: params("q", "node", "sort", "name")},
		{name: "text of a cluster name", v: params("q", "eu", "resources", "services", "sort", "name")},
		{name: "text in relevance order", v: params("q", "payments"), unordered: true},
		{name: "text nobody has", v: params("q", "zzzz"), none: true},
		{name: "fuzzy name with a transposition", v: params("fuzzyName", "wokrer")},
		{name: "fuzzy name is a case-insensitive substring", v: params("fuzzyName", "WEB")},
		{name: "fuzzy name with one edit", v: params("fuzzyName", "apj")},
		{name: "fuzzy name substring with a dash", v: params("fuzzyName", "grafana-dash")},
		{name: "fuzzy name of a hash", v: params("fuzzyName", "7d9f8c6b5", "limit", "10")},
		{name: "fuzzy name with two edits", v: params("fuzzyName", "pymants")},
		{name: "fuzzy name of two words", v: params("fuzzyName", "grafana dashbords")},
		{name: "fuzzy name too far", v: params("fuzzyName", "wbe-confg-x"), none: true},
		{name: "text of an image", v: params("q", "nginx", "sort", "name")},
		{name: "text of an image version", v: params("q", "1.26", "sort", "name")},
		{name: "text of a label value and a kind", v: params("q", "frontend deployment", "sort", "name")},
		{name: "text and a fuzzy name", v: params("q", "istio", "fuzzyName", "api", "sort", "name")},

		// Owners and time.
		{name: "owner by kind and name, in every cluster", v: params("owner", "ReplicaSet/web-7d9f8c6b5")},
		{name: "owner by uid, one cluster", v: params("owner", ownerUID)},
		{name: "owner that owns nothing", v: params("owner", "Deployment/web"), none: true},
		{name: "created since", v: params("createdSince", "2026-01-11T00:00:00Z", "resources", "pods")},
		{name: "created before is exclusive", v: params("createdBefore", "2026-01-02T00:00:00Z")},
		{name: "created since is inclusive", v: params("createdSince", "2026-01-02T00:00:00Z", "createdBefore", "2026-01-03T00:00:00Z")},
		{name: "created since, relative", v: params("createdSince", "35d", "sort", "creationTimestamp")},
		{name: "changed since", v: params("changedSince", "2026-01-11T00:30:00Z")},

		// Sort, with the uid tiebreaker across page boundaries, and paging.
		{name: "sort creationTimestamp desc, ties by uid, paged", v: params("resources", "pods", "sort", "creationTimestamp:desc", "limit", "4")},
		{name: "sort name, paged", v: params("sort", "name", "limit", "9")},
		{name: "sort namespace desc: cluster-scoped last", v: params("sort", "namespace:desc,name", "limit", "10")},
		{name: "sort namespace asc: cluster-scoped last", v: params("sort", "namespace", "resources", "nodes,services", "limit", "8")},
		{name: "sort lastChangedAt then cluster", v: params("sort", "lastChangedAt,cluster", "limit", "13")},
		{name: "sort cluster desc, name desc", v: params("sort", "cluster:desc,name:desc", "resources", "services,deployments.apps", "limit", "5")},
		{name: "sort kind, ties by uid, paged", v: params("sort", "kind", "limit", "11")},
		{name: "sort kind desc, namespace, name", v: params("sort", "kind:desc,namespace,name", "resources", "configmaps,nodes,pods,services", "limit", "6")},
		{name: "sort status, ties by uid, paged", v: params("sort", "status", "resources", "pods,nodes", "limit", "7")},
		{name: "sort status desc, name: kinds without a status last", v: params("sort", "status:desc,name", "resources", "pods,nodes,deployments.apps", "limit", "9")},
		{name: "sort status, every kind, paged", v: params("sort", "status,cluster", "limit", "25")},
		// A kind's own columns (issue 28): numbers as numbers, text, keys missing last.
		{name: "sort column restarts desc, paged", v: params("resources", "pods", "sort", "columns.restarts:desc", "limit", "9")},
		{name: "sort column node, unscheduled last, paged", v: params("resources", "pods", "sort", "columns.node,name", "limit", "13")},
		{name: "sort column node desc, unscheduled last", v: params("resources", "pods", "sort", "columns.node:desc", "limit", "1000")},
		{name: "sort column ip, addresses as numbers, paged", v: params("resources", "pods", "sort", "columns.ip", "limit", "11")},
		{name: "sort column ready then restarts", v: params("resources", "pods", "sort", "columns.ready,columns.restarts:desc", "limit", "10")},
		{name: "sort column up-to-date desc, paged", v: params("resources", "deployments.apps", "sort", "columns.up-to-date:desc,cluster", "limit", "4")},
		{name: "sort column type of services", v: params("resources", "services", "sort", "columns.type:desc", "limit", "5")},
		{name: "default order, paged by 7", v: params("resources", "pods", "limit", "7")},
		{name: "limit 1, every page", v: params("resources", "deployments.apps", "limit", "1")},
		{name: "limit equal to the total: one page, no token", v: params("resources", "services", "limit", "12")},
		{name: "limit one less than the total", v: params("resources", "services", "limit", "11")},
		{name: "created since with fractional seconds", v: params("createdSince", "2026-01-11T00:00:00.5Z", "createdBefore", "2026-01-11T03:00:00.001Z")},

		// Facets, totals, versions, metadata only.
		{name: "facets of everything", v: params("facets", "cluster,namespace,resource,labels,label:app.kubernetes.io/name", "limit", "1000")},
		{name: "facets with few buckets count the others", v: params("facetSize", "2", "facets", "cluster,namespace,resource,labels,label:example.com/tier")},
		{name: "facets of a filtered search", v: params("resources", "pods", "labelSelector", "app", "facets", "label:app,cluster,namespace")},
		{name: "facets, paged", v: params("facets", "cluster,resource", "limit", "10", "resources", "pods,services")},
		{name: "facet of a label nobody has", v: params("facets", "label:nope.example.com/x", "resources", "nodes")},
		{name: "versions ignore the other filters", v: params("resources", "pods", "clusters", "prod-eu,staging", "labelSelector", "app"), mod: withVersions},
		{name: "versions of everything", v: params("limit", "1000"), mod: withVersions},
		{name: "versions within a scope", v: params("resources", "configmaps,nodes"), mod: func(q *query.Query) {
			withVersions(q)
			withScope("two grants, one of a plural in any group")(q)
		}},
		{name: "metadata only", v: params("metadataOnly", "true", "resources", "configmaps", "limit", "7")},
		{name: "a near-1 MiB object comes back whole", v: params("names", "grafana-dashboards,release-notes")},

		// Scope, applied inside the query.
		{name: "scope: one cluster, one namespace, deployments", v: params(), mod: withScope("one cluster, one namespace, deployments")},
		{name: "scope: cluster-scoped only", v: params("limit", "4"), mod: withScope("cluster-scoped only, two clusters")},
		{name: "scope: two grants, paged, with facets", v: params("limit", "3", "facets", "cluster,namespace,resource"),
			mod: withScope("two grants, one of a plural in any group")},
		{name: "scope: two grants and a selector", v: params("labelSelector", "app.kubernetes.io/name=web"), mod: withScope("two grants, one of a plural in any group")},
		{name: "scope: no grant sees nothing", v: params("facets", "cluster"), mod: withScope("nothing"), none: true},
	}
}

func (r *R) counts(scope *query.Scope) {
	got, err := r.b.Counts(r.ctx, scope)
	sortCounts(got) // the contract does not order them
	r.record("Counts", got, err)
	if !r.noError("Counts", err) {
		return
	}
	exp := expectedCounts(r.c.Live(), scope)
	r.expect(fmt.Sprint(got) == fmt.Sprint(exp), "counts:\n got  %v\n want %v", got, exp)
}

// tokenCases are the continue token's rules: it continues only its own query, in its snapshot,
// until released or expired.
func tokenCases() []Case {
	first := func(r *R, v url.Values) (*query.Query, []Item, string) {
		r.t.Helper()
		q := r.parse(v)
		res, items, err := r.search("first page", q)
		if !r.noError("first page", err) || !r.expect(res.Continue != "", "no continue token on a first page of %d of %d", len(items), res.Total) {
			r.t.FailNow()
		}
		return q, items, res.Continue
	}
	next := func(r *R, call string, q *query.Query, token, wantErr string) {
		r.t.Helper()
		c := *q
		c.Continue = token
		_, _, err := r.search(call, &c)
		r.expect(errClass(err) == wantErr, "%s: error %v, want class %q", call, err, wantErr)
	}
	pods := params("resources", "pods", "limit", "5")
	return []Case{
		{"a tampered token is refused", func(r *R) {
			q, _, tok := first(r, pods)
			defer r.b.Release(r.ctx, tok)
			i := len(tok) / 2
			c := byte('A')
			if tok[i] == 'A' {
				c = 'B'
			}
			next(r, "tampered", q, tok[:i]+string(c)+tok[i+1:], "ErrBadToken")
			next(r, "truncated", q, tok[:len(tok)-2], "ErrBadToken")
		}},
		{"a string that is no token is refused", func(r *R) {
			q := r.parse(pods)
			next(r, "garbage", q, "not-a-token", "ErrBadToken")
			next(r, "another store's shape", q, "eyJ2IjoxLCJxIjoiIn0.c2lnbmF0dXJl", "ErrBadToken")
		}},
		{"a token continues only its own query", func(r *R) {
			q, _, tok := first(r, pods)
			defer r.b.Release(r.ctx, tok)
			other := r.parse(params("resources", "pods", "limit", "5", "labelSelector", "app"))
			next(r, "another selector", other, tok, "ErrBadToken")
			other = r.parse(params("resources", "pods", "limit", "5", "sort", "name"))
			next(r, "another sort", other, tok, "ErrBadToken")
			other = r.parse(pods)
			other.Scope = scopes["cluster-scoped only, two clusters"]
			next(r, "another scope", other, tok, "ErrBadToken")
			next(r, "the same query", q, tok, "")
		}},
		{"a token continues with another limit, facets and metadataOnly", func(r *R) {
			q, items, tok := first(r, pods)
			want := r.want(q)
			c := r.parse(params("resources", "pods", "limit", "7", "facets", "cluster", "metadataOnly", "true"))
			c.Continue = tok
			res, more, err := r.search("continued with limit 7", c)
			if !r.noError("continue", err) {
				return
			}
			r.b.Release(r.ctx, res.Continue)
			r.expectItems(items, want[:5], false, false)
			r.expectItems(more, want[5:12], false, true)
			r.expect(res.Total == int64(len(want)), "total %d on a later page, want %d", res.Total, len(want))
		}},
		{"a released token's snapshot is gone", func(r *R) {
			q, _, tok := first(r, pods)
			r.b.Release(r.ctx, tok)
			r.record("Release", nil, nil)
			next(r, "released", q, tok, "ErrExpired")
		}},
		{"an expired token is ErrExpired", func(r *R) {
			q, _, tok := first(r, pods)
			defer r.b.Release(r.ctx, tok)
			time.Sleep(KeepAlive + time.Second)
			next(r, "expired", q, tok, "ErrExpired")
		}},
		{"pages keep their snapshot while documents change", pagingSnapshot},
	}
}

// SnapshotLimitsCase names the case of the snapshot bounds (store.Limits).
const SnapshotLimitsCase = "snapshots are bounded per subject and kept for the server's own lists"

// SameUIDCase names the case of two members with objects of the same uid (store.DocID).
const SameUIDCase = "two members with objects of the same uid keep a document each"

// snapshotLimits: a subject that keeps first pages of limit 1 (each holding a snapshot) past its
// share closes its least recently used one, whose token is ErrExpired, and no other subject's; an
// answer of one page holds none; continue tokens of clients hold three quarters of the backend's
// snapshots and the rest stays for queries the server reads to the end (Drain).
func snapshotLimits(r *R) {
	pods := params("resources", "pods", "limit", "1")
	share, clients := Limits.SnapshotsPerSubject, Limits.Snapshots-Limits.Snapshots/4
	var held []*query.Query // queries whose token is still to be released
	first := func(call, subject string, drain bool) *query.Query {
		r.t.Helper()
		q := r.parse(pods)
		q.Subject, q.Drain = subject, drain
		res, _, err := r.search(call, q)
		if !r.noError(call, err) || !r.expect(res.Continue != "", "%s: no continue token", call) {
			r.t.FailNow()
		}
		r.expect(len(res.Warnings) == 0, "%s: no snapshot: %q", call, res.Warnings)
		q.Continue = res.Continue
		held = append(held, q)
		return q
	}
	next := func(call string, q *query.Query, wantErr string) {
		r.t.Helper()
		c := *q
		res, _, err := r.search(call, &c)
		r.expect(errClass(err) == wantErr, "%s: error %v, want class %q", call, err, wantErr)
		if err == nil {
			q.Continue = res.Continue // the same snapshot, one page on
		}
	}
	defer func() {
		for _, q := range held {
			r.b.Release(r.ctx, q.Continue)
		}
	}()

	bob := first("bob's first page", "bob", false)
	var alice []*query.Query
	for i := range share {
		alice = append(alice, first(fmt.Sprintf("alice's first page %d", i), "alice", false))
	}
	one := r.parse(params("resources", "pods", "limit", "1000"))
	one.Subject = "alice"
	if res, _, err := r.search("alice's answer of one page", one); r.noError("one page", err) {
		r.expect(res.Continue == "", "%d pods do not fit one page of 1000", res.Total)
	}
	// The server's own lookups (Query.Peek) read one page and hold nothing: no token, and none of
	// alice's closed for it.
	peek := r.parse(pods)
	peek.Subject, peek.Peek = "alice", true
	if res, _, err := r.search("alice's peek", peek); r.noError("peek", err) {
		r.expect(res.Continue == "" && res.Total > 1 && len(res.Items) == 1,
			"a peek: continue %q, total %d, %d items; want no token, every match counted, one page", res.Continue, res.Total, len(res.Items))
	}
	for i, q := range alice {
		next(fmt.Sprintf("alice's token %d after an answer of one page and a peek", i), q, "")
	}
	alice = append(alice, first("alice's first page past her share", "alice", false))
	next("alice's least recently used token", alice[0], "ErrExpired")
	for i, q := range alice[1:] {
		next(fmt.Sprintf("alice's token %d", i+1), q, "")
	}
	next("bob's token", bob, "")

	// Clients' tokens fill their part of the backend's snapshots: each new one closes the least
	// recently used (those above first). The server's own lists take the rest without closing any,
	// and past it close the least recently used client's, never another list's.
	var users []*query.Query
	for i := range clients + 1 {
		users = append(users, first(fmt.Sprintf("user %d's first page", i), fmt.Sprintf("user%d", i), false))
	}
	next("the least recently used client's token", users[0], "ErrExpired")
	next("the next client's token", users[1], "")
	var lists []*query.Query
	for i := range Limits.Snapshots / 4 {
		lists = append(lists, first(fmt.Sprintf("the server's list %d", i), "facade", true))
	}
	next("the least recently used client's token beside the server's lists", users[2], "")
	lists = append(lists, first("the server's list past the reserve", "facade", true))
	next("the client's token closed for it", users[3], "ErrExpired")
	for i, q := range lists {
		next(fmt.Sprintf("the server's list %d, next page", i), q, "")
	}
}

// pagingSnapshot reads a first page, changes documents that later pages hold (a delete, an object
// that sorts among them, one that stops matching, one whose content changes), and reads on: every
// page shows the first page's snapshot. A new search shows the change.
func pagingSnapshot(r *R) {
	v := params("resources", "leases.coordination.k8s.io", "labelSelector", "example.com/holder", "sort", "name", "limit", "5")
	q := r.parse(v)
	snapshot := r.want(q)
	if !r.expect(len(snapshot) == LeaseCount, "%d leases in the corpus", len(snapshot)) {
		return
	}
	res, items, err := r.search("page 0", q)
	if !r.noError("page 0", err) || !r.expect(res.Continue != "", "no continue token") {
		return
	}
	r.expectItems(items, snapshot[:5], false, false)

	lease := func(name string) *Object { return r.c.find("prod-eu/Lease/kube-system/" + name) }
	changed := Base.Add(39 * 24 * time.Hour)
	gone := lease("lease-07").clone()
	gone.ResourceVersion, gone.Changed = r.c.rv("prod-eu"), changed
	unlabelled := lease("lease-12").clone()
	delete(unlabelled.Labels, "example.com/holder")
	unlabelled.ResourceVersion, unlabelled.Changed = r.c.rv("prod-eu"), changed
	relabelled := lease("lease-15").clone()
	relabelled.Labels["example.com/round"] = "2"
	relabelled.ResourceVersion, relabelled.Changed = r.c.rv("prod-eu"), changed
	added := r.c.lease("prod-eu", "lease-06a", "node-2", changed)
	added.Epoch = Epoch
	r.write(envelope.Deleted, gone)
	r.write(envelope.Modified, unlabelled, relabelled)
	r.write(envelope.Added, added)

	q.Continue = res.Continue
	rest, _, err := r.walk("later pages", q, 10)
	if r.noError("later pages", err) {
		r.expectItems(rest, snapshot[5:], false, false)
	}
	q.Continue = ""
	now, _, err := r.walk("a new search", q, 10)
	if r.noError("a new search", err) {
		r.expectItems(now, r.want(q), false, false)
	}
}

// stored reads the one object of a key as the backend has it (nil when absent).
func (r *R) stored(call string, o *Object) *Item {
	r.t.Helper()
	q := r.parse(params("names", o.Name, "clusters", o.Cluster, "namespaces", o.Namespace))
	_, items, err := r.search(call, q)
	if !r.noError(call, err) {
		return nil
	}
	for _, it := range items {
		if it.UID == o.UID {
			return &it
		}
	}
	return nil
}

// writeRaw writes events without making them the corpus' state: replays, which must change nothing.
func (r *R) writeRaw(call string, typ envelope.Type, objs ...*Object) {
	r.t.Helper()
	var evs []*envelope.Event
	for _, o := range objs {
		evs = append(evs, o.Event(typ))
	}
	ops, err := Ops(evs...)
	if err != nil {
		r.t.Fatal(err)
	}
	failed, err := r.b.Write(r.ctx, ops)
	r.record(call, failed, err)
	r.noError(call, err)
	r.expect(len(failed) == 0, "%s: refused %+v (a replay is not a failure)", call, failed)
	r.refresh(map[string]bool{objs[0].Kind: true})
}

// expectStored checks that the backend holds exactly o (or nothing of its key when o is gone).
func (r *R) expectStored(call string, key *Object, o *Object) {
	r.t.Helper()
	it := r.stored(call, key)
	switch {
	case o == nil:
		r.expect(it == nil, "%s: %s is still stored (%v)", call, key.Key(), it)
	case r.expect(it != nil, "%s: %s is not stored", call, key.Key()):
		r.expect(it.Hash == o.storedHash() && it.Epoch == o.Epoch, "%s: %s stored is %s, want rv %s epoch %d #%s",
			call, key.Key(), it, o.ResourceVersion, o.Epoch, o.storedHash())
	}
}

func (r *R) pod(cluster, ns, dep string) *Object {
	for _, o := range r.c.Live() {
		if o.Cluster == cluster && o.Namespace == ns && o.Kind == "Pod" && o.Labels["app.kubernetes.io/name"] == dep {
			return o
		}
	}
	r.t.Fatalf("no %s pod in %s/%s", dep, cluster, ns)
	return nil
}

func (r *R) mustFind(key string) *Object {
	o := r.c.find(key)
	if o == nil {
		r.t.Fatalf("%s is not in the corpus", key)
	}
	return o
}

// writeCases are the version rules (DESIGN section 4) and what Write refuses.
func writeCases() []Case {
	modified := Base.Add(39 * 24 * time.Hour)
	return []Case{
		{"a replayed older resourceVersion never overwrites newer state", func(r *R) {
			p := r.pod("prod-eu", "shop", "web")
			old := p.clone()
			old.ResourceVersion = fmt.Sprint(p.RV() - 1)
			old.Labels["example.com/tier"] = "replayed"
			r.writeRaw("replay", envelope.Modified, old)
			r.expectStored("after the replay", p, p)
		}},
		{"the same resourceVersion again changes nothing", func(r *R) {
			p := r.pod("prod-eu", "shop", "web")
			r.writeRaw("replay", envelope.Modified, p)
			r.expectStored("after the replay", p, p)
		}},
		{"a newer resourceVersion replaces the document", func(r *R) {
			p := r.pod("prod-eu", "shop", "web").clone()
			p.ResourceVersion, p.Changed = r.c.rv("prod-eu"), modified
			p.Labels["example.com/tier"] = "updated"
			r.write(envelope.Modified, p)
			r.expectStored("after the update", p, p)
		}},
		{"a newer epoch wins with a lower resourceVersion", func(r *R) {
			p := r.pod("prod-eu", "shop", "web").clone()
			p.Epoch, p.ResourceVersion, p.Changed = Epoch+1, "5", modified
			p.Labels["example.com/tier"] = "rebuilt"
			r.write(envelope.Modified, p)
			r.expectStored("after the rebuilt member's event", p, p)
		}},
		{"an older epoch with a higher resourceVersion is written (the indexer never sends one)", func(r *R) {
			// store.Op.Epoch: the stores order by resourceVersion and apply the epoch rule on a
			// conflict only; the indexer drops events of superseded epochs before writing.
			n := r.c.lease("prod-eu", "lease-rebuilt", "node-1", modified)
			n.Epoch, n.ResourceVersion = Epoch+1, "10"
			r.write(envelope.Added, n)
			old := n.clone()
			old.Epoch, old.ResourceVersion = Epoch, "20"
			old.Labels["example.com/round"] = "old-epoch"
			r.write(envelope.Modified, old)
			r.expectStored("after the older epoch's event", old, old)
		}},
		{"a replayed ADDED after its DELETE stays deleted", func(r *R) {
			l := r.mustFind("prod-eu/Lease/kube-system/lease-03")
			d := l.clone()
			d.ResourceVersion = r.c.rv("prod-eu")
			r.write(envelope.Deleted, d)
			r.writeRaw("replay of the ADDED", envelope.Added, l)
			r.expectStored("after the replay", l, nil)
		}},
		{"a DELETE older than the stored state is a replay", func(r *R) {
			l := r.mustFind("prod-eu/Lease/kube-system/lease-04")
			d := l.clone()
			d.ResourceVersion = fmt.Sprint(l.RV() - 1)
			r.writeRaw("a stale delete", envelope.Deleted, d)
			r.expectStored("after the stale delete", l, l)
		}},
		{"a DELETE from a newer epoch applies whatever its resourceVersion", func(r *R) {
			l := r.mustFind("prod-eu/Lease/kube-system/lease-05")
			d := l.clone()
			d.Epoch, d.ResourceVersion = Epoch+1, "3"
			r.write(envelope.Deleted, d)
			r.expectStored("after the delete", l, nil)
		}},
		{"an object restored in a newer epoch passes its delete's tombstone", func(r *R) {
			// A member restored from an etcd snapshot lists, in a new epoch and at a lower
			// resourceVersion, an object deleted within index.gc_deletes before the restore.
			l := r.c.lease("prod-eu", "lease-restored", "node-2", modified)
			r.write(envelope.Added, l)
			d := l.clone()
			d.ResourceVersion = r.c.rv("prod-eu")
			r.write(envelope.Deleted, d)
			r.writeRaw("a replay of the deleting epoch's ADDED", envelope.Added, l)
			r.expectStored("after the replay", l, nil)
			back := l.clone()
			back.Epoch, back.ResourceVersion = Epoch+1, "2"
			r.write(envelope.Added, back)
			r.expectStored("after the restored member's list", back, back)
			r.writeRaw("a replay of the old epoch after the restore", envelope.Added, l)
			r.expectStored("after the late replay", back, back)
		}},
		{"unversioned writes replace whatever is stored", func(r *R) {
			u := r.c.lease("prod-eu", "lease-unversioned", "node-3", modified)
			u.ResourceVersion = "x7"
			r.write(envelope.Added, u)
			n := u.clone()
			n.ResourceVersion = "x1"
			n.Labels["example.com/round"] = "2"
			r.write(envelope.Modified, n)
			r.expectStored("after the second write", n, n)
		}},
		{"write reports what it never accepts, by position", func(r *R) {
			a := r.c.lease("prod-eu", "lease-good-a", "node-1", modified)
			b := r.c.lease("prod-eu", "lease-good-b", "node-2", modified)
			a.Epoch, b.Epoch = Epoch, Epoch
			ops, err := Ops(a.Event(envelope.Added), b.Event(envelope.Added))
			if err != nil {
				r.t.Fatal(err)
			}
			bad := store.Op{Kind: "Lease", UID: uid("prod-eu", "Lease", "kube-system", "broken"), Doc: []byte(`{"cluster":"prod-eu","name":`),
				Epoch: Epoch, Version: 1, Versioned: true}
			failed, err := r.b.Write(r.ctx, []store.Op{ops[0], bad, ops[1]})
			var pos []int
			for _, f := range failed {
				pos = append(pos, f.Pos)
			}
			r.record("Write(good, not JSON, good)", pos, err)
			r.noError("write", err)
			r.expect(slices.Equal(pos, []int{1}), "refused positions %v, want [1]", pos)
			r.refresh(map[string]bool{"Lease": true})
			a.setDoc(ops[0].Doc)
			b.setDoc(ops[1].Doc)
			r.c.put(a)
			r.c.put(b)
			r.expectStored("the first good op", a, a)
			r.expectStored("the second good op", b, b)
		}},
		{"a DELETE of an object never stored is no failure", func(r *R) {
			ghost := r.c.lease("prod-eu", "lease-ghost", "node-1", modified)
			r.writeRaw("delete of a ghost", envelope.Deleted, ghost)
			r.expectStored("after the delete", ghost, nil)
		}},
		{"one batch with two versions of an object keeps the newest", func(r *R) {
			l := r.mustFind("prod-eu/Lease/kube-system/lease-08")
			newer := l.clone()
			newer.ResourceVersion, newer.Changed = r.c.rv("prod-eu"), modified
			newer.Labels["example.com/round"] = "newer"
			newest := newer.clone()
			newest.ResourceVersion = r.c.rv("prod-eu")
			newest.Labels["example.com/round"] = "newest"
			ops, err := Ops(newest.Event(envelope.Modified), newer.Event(envelope.Modified))
			if err != nil {
				r.t.Fatal(err)
			}
			failed, err := r.b.Write(r.ctx, ops)
			r.record("Write(newest, newer)", failed, err)
			r.noError("write", err)
			r.expect(len(failed) == 0, "refused %+v", failed)
			r.refresh(map[string]bool{"Lease": true})
			newest.setDoc(ops[0].Doc)
			r.c.put(newest)
			r.expectStored("after the batch", newest, newest)

			m := r.mustFind("prod-eu/Lease/kube-system/lease-09")
			a := m.clone()
			a.ResourceVersion, a.Changed = r.c.rv("prod-eu"), modified
			a.Labels["example.com/round"] = "deleted-later"
			d := a.clone()
			d.ResourceVersion = r.c.rv("prod-eu")
			ops, err = Ops(a.Event(envelope.Modified), d.Event(envelope.Deleted))
			if err != nil {
				r.t.Fatal(err)
			}
			failed, err = r.b.Write(r.ctx, ops)
			r.record("Write(modified, deleted)", failed, err)
			r.noError("write", err)
			r.refresh(map[string]bool{"Lease": true})
			r.c.remove(func(o *Object) bool { return o.id() == m.id() })
			r.expectStored("after the modify and delete", m, nil)
		}},
		{"objects after the writes", func(r *R) {
			queryCase{v: params("resources", "leases.coordination.k8s.io,pods", "clusters", "prod-eu", "limit", "1000")}.run(r)
		}},
	}
}

// relist writes objs again as a new list of epoch would (ADDED, same resourceVersions).
func (r *R) relist(epoch int64, objs []*Object) {
	r.t.Helper()
	var again []*Object
	for _, o := range objs {
		c := o.clone()
		c.Epoch = epoch
		again = append(again, c)
	}
	r.write(envelope.Added, again...)
}

func (r *R) objects(match func(*Object) bool) []*Object {
	var out []*Object
	for _, o := range r.c.Live() {
		if match(o) {
			out = append(out, o)
		}
	}
	return out
}

// goneLog is what garbage collection told of the documents it deleted (store.GoneFunc), as lines
// every backend must answer alike: the change feed's deletions.
type goneLog []string

func (l *goneLog) report(_ context.Context, _ int, gone []store.Gone) error {
	for _, g := range gone {
		*l = append(*l, fmt.Sprintf("%s %s %s epoch %d rv %d %s", g.Cluster, g.Resource, g.UID, g.Epoch, g.ResourceVersion, g.Object))
	}
	return nil
}

func (l goneLog) sorted() []string {
	out := slices.Clone(l)
	slices.Sort(out)
	return out
}

// gcCases are SYNC (DeleteOlder) and PURGE (DeleteAll).
func gcCases() []Case {
	deleteOlder := func(r *R, scope store.ListScope, epoch int64) {
		r.t.Helper()
		var told goneLog
		n, err := r.b.DeleteOlder(r.ctx, scope, epoch, told.report)
		r.record(fmt.Sprintf("DeleteOlder(%+v, %d)", scope, epoch), n, err)
		r.record(fmt.Sprintf("DeleteOlder(%+v, %d) told", scope, epoch), told.sorted(), nil)
		r.noError("DeleteOlder", err)
		r.expect(len(told) == int(n), "told %d documents gone, deleted %d", len(told), n)
		want := r.c.remove(func(o *Object) bool {
			return o.Pair() == scope.Pair && o.Kind == scope.Kind && (scope.Namespace == "" || o.Namespace == scope.Namespace) && o.Epoch < epoch
		})
		r.expect(n == int64(want), "deleted %d, want %d", n, want)
	}
	deleteAll := func(r *R, sel store.Selection) {
		r.t.Helper()
		var told goneLog
		n, err := r.b.DeleteAll(r.ctx, sel, told.report)
		r.record(fmt.Sprintf("DeleteAll(%+v)", sel), n, err)
		r.record(fmt.Sprintf("DeleteAll(%+v) told", sel), told.sorted(), nil)
		r.noError("DeleteAll", err)
		r.expect(len(told) == int(n), "told %d documents gone, deleted %d", len(told), n)
		want := r.c.remove(func(o *Object) bool {
			return o.Cluster == sel.Cluster && o.Group == sel.Group && o.Kind == sel.Kind && (sel.Namespace == "" || o.Namespace == sel.Namespace)
		})
		r.expect(n == int64(want), "deleted %d, want %d", n, want)
	}
	services := store.ListScope{Pair: store.Pair{Cluster: "staging", Resource: "services"}, Kind: "Service"}
	check := func(r *R, v url.Values) { queryCase{v: v}.run(r) }
	return []Case{
		{"SYNC deletes what the new list did not see", func(r *R) {
			listed := r.objects(func(o *Object) bool { return o.Pair() == services.Pair })
			r.expect(len(listed) == 4, "%d services in staging", len(listed))
			r.relist(Epoch+1, listed[1:])
			deleteOlder(r, services, Epoch+1)
			check(r, params("resources", "services", "clusters", "staging"))
		}},
		{"SYNC after a complete list deletes nothing", func(r *R) {
			deleteOlder(r, services, Epoch+1)
		}},
		{"SYNC of one namespace leaves the others", func(r *R) {
			scope := store.ListScope{Pair: store.Pair{Cluster: "prod-us", Resource: "configmaps"}, Kind: "ConfigMap", Namespace: "shop"}
			r.relist(Epoch+1, []*Object{r.mustFind("prod-us/ConfigMap/shop/shop-settings")})
			deleteOlder(r, scope, Epoch+1)
			check(r, params("resources", "configmaps", "clusters", "prod-us"))
		}},
		{"SYNC of a kind never written deletes nothing", func(r *R) {
			deleteOlder(r, store.ListScope{Pair: store.Pair{Cluster: "staging", Group: "networking.k8s.io", Resource: "ingresses"}, Kind: "Ingress"}, Epoch+1)
		}},
		{"SYNC of an epoch older than the documents deletes nothing", func(r *R) {
			deleteOlder(r, store.ListScope{Pair: store.Pair{Cluster: "prod-eu", Resource: "nodes"}, Kind: "Node"}, Epoch-50)
		}},
		{"PURGE deletes one namespace of a selection", func(r *R) {
			deleteAll(r, store.Selection{Cluster: "prod-us", Group: "apps", Kind: "Deployment", Namespace: "payments"})
			check(r, params("resources", "deployments.apps"))
		}},
		{"PURGE deletes a selection in every namespace", func(r *R) {
			deleteAll(r, store.Selection{Cluster: "staging", Kind: "Pod"})
			check(r, params("resources", "pods", "limit", "1000", "facets", "cluster"))
		}},
		{"PURGE of nothing deletes nothing", func(r *R) {
			deleteAll(r, store.Selection{Cluster: "nowhere", Kind: "Pod"})
		}},
		{SameUIDCase, func(r *R) {
			// One member registered under two names, or members cloned from one etcd snapshot:
			// the same uid in two clusters, and since the clone, different objects (issue 23
			// item 5). Neither's write, delete or SYNC touches the other's document.
			eu := r.c.configMap("prod-eu", "twins", "settings", map[string]string{"example.com/twin": "eu"}, map[string]any{"region": "eu"})
			st := r.c.configMap("staging", "twins", "settings", map[string]string{"example.com/twin": "staging"}, map[string]any{"region": "staging"})
			st.UID = eu.UID
			eu.Epoch, st.Epoch = Epoch, Epoch
			r.write(envelope.Added, eu, st) // one batch
			r.expectStored("prod-eu's", eu, eu)
			r.expectStored("staging's", st, st)
			both := params("fieldSelector", "metadata.uid="+eu.UID)
			check(r, both)

			gone := st.clone()
			gone.ResourceVersion = r.c.rv("staging")
			r.write(envelope.Deleted, gone)
			r.expectStored("prod-eu's after staging's delete", eu, eu)
			r.expectStored("staging's after its delete", st, nil)

			back := st.clone()
			back.Epoch, back.ResourceVersion = Epoch+1, r.c.rv("staging")
			r.write(envelope.Added, back)
			twins := func(cluster string) store.ListScope {
				return store.ListScope{Pair: store.Pair{Cluster: cluster, Resource: "configmaps"}, Kind: "ConfigMap", Namespace: "twins"}
			}
			deleteOlder(r, twins("staging"), Epoch+1)
			r.expectStored("prod-eu's after staging's SYNC", eu, eu)
			deleteOlder(r, twins("prod-eu"), Epoch+1)
			r.expectStored("prod-eu's after its own SYNC", eu, nil)
			r.expectStored("staging's after prod-eu's SYNC", back, back)
			check(r, both)
		}},
		{"counts after garbage collection", func(r *R) { r.counts(nil) }},
		{"everything after garbage collection", func(r *R) {
			check(r, params("limit", "1000", "facets", "cluster,resource"))
		}},
	}
}

// watermarkCases save, load, list, select and delete watermarks.
func watermarkCases() []Case {
	at := Base.Add(39*24*time.Hour + 123456789*time.Nanosecond)
	wm := func(cluster, group, resource, kind string, rv int64, listing bool, scopes ...store.WatermarkScope) store.Watermark {
		return store.Watermark{Cluster: cluster, Group: group, Resource: resource, Kind: kind, ResourceVersion: rv, Epoch: Epoch,
			Listing: listing, UpdatedAt: at, Scopes: scopes}
	}
	saved := []store.Watermark{
		wm("prod-eu", "", "pods", "Pod", 100120, false, store.WatermarkScope{Namespace: "", ResourceVersion: 100120, Epoch: Epoch, Synced: true}),
		wm("prod-eu", "apps", "deployments", "Deployment", 100090, false,
			store.WatermarkScope{Namespace: "payments", ResourceVersion: 100090, Epoch: Epoch, Synced: true},
			store.WatermarkScope{Namespace: "shop", ResourceVersion: 100095, Epoch: Epoch, Synced: true}),
		wm("prod-eu", "", "nodes", "Node", 100003, false),
		wm("prod", "", "pods", "Pod", 7, false),
		wm("prod-us", "", "pods", "Pod", 0, true, store.WatermarkScope{Namespace: "", Listing: true}),
		wm("staging", "coordination.k8s.io", "leases", "Lease", 300500, false),
	}
	never := store.Pair{Cluster: "prod-eu", Resource: "secrets"}
	pairs := func(ws []store.Watermark) []store.Pair {
		var out []store.Pair
		for _, w := range ws {
			out = append(out, w.Pair())
		}
		return out
	}
	byPair := func(ws []store.Watermark) map[store.Pair]*store.Watermark {
		out := map[store.Pair]*store.Watermark{}
		for i := range ws {
			out[ws[i].Pair()] = &ws[i]
		}
		return out
	}
	load := func(r *R, ps []store.Pair, want map[store.Pair]*store.Watermark) {
		r.t.Helper()
		got, err := r.b.LoadWatermarks(r.ctx, ps)
		r.record("LoadWatermarks", wmString(got), err)
		r.noError("LoadWatermarks", err)
		r.expect(wmString(got) == wmString(want), "loaded:\n got  %s\n want %s", wmString(got), wmString(want))
	}
	// Watermarks reads them with a search, which may trail what was just saved (OpenSearch shows
	// the state index's writes after its refresh): the listing is read until it agrees, or for
	// a few seconds.
	list := func(r *R, want []store.Watermark) {
		r.t.Helper()
		// In pair ID order ("cluster/group/resource" as one string), as both backends list them.
		slices.SortFunc(want, func(a, b store.Watermark) int { return strings.Compare(a.Pair().ID(), b.Pair().ID()) })
		var (
			got []store.Watermark
			err error
		)
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			got, err = r.b.Watermarks(r.ctx)
			if err == nil && fmt.Sprint(got) == fmt.Sprint(want) || time.Now().After(deadline) {
				break
			}
			// The same pairs in another order is an answer, not a lag.
			if err == nil && len(got) == len(want) && sameSet(got, want) {
				break
			}
		}
		r.record("Watermarks", got, err)
		r.noError("Watermarks", err)
		r.expect(fmt.Sprint(got) == fmt.Sprint(want), "listed, in pair ID order:\n got  %v\n want %v", got, want)
	}
	current := slices.Clone(saved)
	return []Case{
		{"no watermarks before any is saved", func(r *R) {
			load(r, append(pairs(saved), never), map[store.Pair]*store.Watermark{})
			list(r, nil)
		}},
		{"saved watermarks load as saved", func(r *R) {
			err := r.b.SaveWatermarks(r.ctx, saved)
			r.record("SaveWatermarks", nil, err)
			r.noError("SaveWatermarks", err)
			load(r, append(pairs(saved), never), byPair(slices.Clone(saved)))
		}},
		{"watermarks list in pair ID order", func(r *R) { list(r, slices.Clone(saved)) }},
		{"saving again replaces", func(r *R) {
			w := saved[4]
			w.ResourceVersion, w.Listing, w.Epoch, w.Scopes = 200321, false, Epoch+1,
				[]store.WatermarkScope{{ResourceVersion: 200321, Epoch: Epoch + 1, Synced: true}}
			current[4] = w
			err := r.b.SaveWatermarks(r.ctx, []store.Watermark{w})
			r.record("SaveWatermarks", nil, err)
			r.noError("SaveWatermarks", err)
			load(r, []store.Pair{w.Pair()}, byPair([]store.Watermark{w}))
		}},
		{"a watermark of an earlier stream position does not replace a later one", func(r *R) {
			// An indexer that lost the pair's partition in a rebalance stores what it had read after
			// the partition's new owner stored a later position: the later stays.
			w := current[4]
			w.Position = 4000
			current[4] = w
			err := r.b.SaveWatermarks(r.ctx, []store.Watermark{w})
			r.record("SaveWatermarks", nil, err)
			r.noError("SaveWatermarks", err)
			stale := w
			stale.Position, stale.ResourceVersion, stale.Listing, stale.Scopes = 3999, 0, true,
				[]store.WatermarkScope{{Epoch: Epoch + 1, Listing: true}}
			err = r.b.SaveWatermarks(r.ctx, []store.Watermark{stale})
			r.record("SaveWatermarks (earlier position)", nil, err)
			r.noError("SaveWatermarks of an earlier position", err)
			load(r, []store.Pair{w.Pair()}, byPair([]store.Watermark{w}))
			// The same position again replaces (a replay by the new owner, as far as it had read).
			w.ResourceVersion++
			w.Scopes = []store.WatermarkScope{{ResourceVersion: w.ResourceVersion, Epoch: Epoch + 1, Synced: true}}
			current[4] = w
			err = r.b.SaveWatermarks(r.ctx, []store.Watermark{w})
			r.record("SaveWatermarks (same position)", nil, err)
			r.noError("SaveWatermarks of the same position", err)
			load(r, []store.Pair{w.Pair()}, byPair([]store.Watermark{w}))
		}},
		{"the watermarks of a selection", func(r *R) {
			for _, sel := range []store.Selection{{Cluster: "prod-eu", Kind: "Pod"}, {Cluster: "prod-eu", Group: "apps", Kind: "Deployment", Namespace: "shop"},
				{Cluster: "prod", Kind: "Deployment"}} {
				got, err := r.b.SelectionWatermarks(r.ctx, sel)
				slices.SortFunc(got, func(a, b store.Watermark) int { return comparePairs(a.Pair(), b.Pair()) })
				r.record(fmt.Sprintf("SelectionWatermarks(%+v)", sel), got, err)
				r.noError("SelectionWatermarks", err)
				var want []store.Watermark
				for _, w := range current {
					if w.Cluster == sel.Cluster && w.Group == sel.Group && w.Kind == sel.Kind {
						want = append(want, w)
					}
				}
				r.expect(fmt.Sprint(got) == fmt.Sprint(want), "selection %+v:\n got  %v\n want %v", sel, got, want)
			}
		}},
		{"deleted watermarks are gone", func(r *R) {
			gone := []store.Pair{saved[0].Pair(), saved[3].Pair(), never}
			err := r.b.DeleteWatermarks(r.ctx, gone)
			r.record("DeleteWatermarks", nil, err)
			r.noError("DeleteWatermarks", err)
			left := slices.DeleteFunc(slices.Clone(current), func(w store.Watermark) bool { return slices.Contains(gone, w.Pair()) })
			load(r, append(pairs(saved), never), byPair(slices.Clone(left)))
			list(r, left)
		}},
	}
}

func comparePairs(a, b store.Pair) int {
	return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.Group, b.Group), cmp.Compare(a.Resource, b.Resource))
}

func sameSet(a, b []store.Watermark) bool {
	key := func(ws []store.Watermark) []string {
		out := make([]string, len(ws))
		for i, w := range ws {
			out[i] = fmt.Sprint(w)
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(key(a), key(b))
}

// wmString shows loaded watermarks in pair order, comparable across backends.
func wmString(m map[store.Pair]*store.Watermark) string {
	var ps []store.Pair
	for p := range m {
		ps = append(ps, p)
	}
	slices.SortFunc(ps, comparePairs)
	s := ""
	for _, p := range ps {
		w := *m[p]
		w.UpdatedAt = w.UpdatedAt.UTC()
		s += fmt.Sprintf("%+v; ", w)
	}
	return s
}

// LargeTotal is how many Events the large-total case writes: past OpenSearch's default cap of
// 10,000 counted hits.
const LargeTotal = 10050

// largeTotal writes LargeTotal Events, counts them exactly (and a fifth of them by a field), and
// purges them.
func largeTotal(r *R) {
	evs := make([]*Object, LargeTotal)
	for i := range evs {
		name := fmt.Sprintf("web.%016x", i)
		reason := []string{"Scheduled", "Pulled", "Created", "Started", "BackOff"}[i%5]
		evs[i] = &Object{Cluster: "prod-us", Version: "v1", Resource: "events", Kind: "Event", Namespace: "shop", Name: name,
			UID: uid("prod-us", "Event", "shop", name), ResourceVersion: r.c.rv("prod-us"), Epoch: Epoch,
			Created: Base.Add(time.Duration(i) * time.Second), Changed: Base.Add(time.Duration(i) * time.Second),
			Body: map[string]any{"type": "Normal", "reason": reason, "message": "event " + fmt.Sprint(i),
				"involvedObject": map[string]any{"kind": "Pod", "namespace": "shop", "name": "web"}}}
	}
	start := time.Now()
	r.write(envelope.Added, evs...)
	r.t.Logf("%d events written in %s", len(evs), time.Since(start).Round(time.Millisecond))
	for _, v := range []url.Values{
		params("resources", "events", "limit", "1", "facets", "cluster,namespace"),
		params("resources", "events", "limit", "2", "fieldSelector", "reason=BackOff", "sort", "creationTimestamp:desc"),
	} {
		q := r.parse(v)
		want := r.want(q)
		res, items, err := r.search(v.Encode(), q)
		if !r.noError("search", err) {
			continue
		}
		if res.Continue != "" {
			r.b.Release(r.ctx, res.Continue)
		}
		r.expect(res.Total == int64(len(want)) && !res.TotalIsLowerBound, "total %d (lower bound %v), want exactly %d", res.Total, res.TotalIsLowerBound, len(want))
		r.expectItems(items, want[:q.Limit], false, false)
		for i, f := range q.Facets {
			if i < len(res.Facets) {
				r.expect(fmt.Sprint(res.Facets[i]) == fmt.Sprint(expectedFacet(want, f)), "facet %s: %+v", f.Name(), res.Facets[i])
			}
		}
	}
	n, err := r.b.DeleteAll(r.ctx, store.Selection{Cluster: "prod-us", Kind: "Event"}, nil)
	r.record("DeleteAll(events)", n, err)
	r.noError("DeleteAll", err)
	r.expect(n == LargeTotal, "purged %d events, want %d", n, LargeTotal)
	r.c.remove(func(o *Object) bool { return o.Kind == "Event" })
	q := r.parse(params("resources", "events"))
	res, _, err := r.search("after the purge", q)
	if r.noError("search", err) {
		r.expect(res.Total == 0, "%d events after the purge", res.Total)
	}
}
