package queryapi

import (
	"slices"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/query"
)

// The qualified view names every object "<name>_<cluster>". A name inside an object that refers
// to another object of its member is renamed the same way, or a client following it finds nothing:
// kubectl describe lists a Pod's Events by involvedObject.name and a Node's Pods by spec.nodeName,
// k9s jumps to an owner by its ownerReferences name. A field selector on such a reference is
// translated back (the stored name, within the cluster of the suffix).
//
// Only references kubectl describe and k9s follow are renamed, to objects the view itself renames.
// Namespaces are left alone: the view keeps objects in their namespaces (/qualified/api/v1/
// namespaces/shop/pods), so metadata.namespace and the namespace of a reference stay as stored.
// Left alone too: a Pod's serviceAccountName (also an identity, system:serviceaccount:<ns>:<name>,
// in RBAC subjects and tokens that are not renamed), and its ConfigMap and Secret references,
// which nothing those tools do looks up by name.

// reference is one name inside objects of a resource that names another object of the member.
type reference struct {
	// path reads the name, or the names of every element of a list with "#" (gjson).
	path string
	// field is the field selector key of the same values: lists read through, as matches and the
	// stores' compilers read them.
	field string
	// uid is the path of the referred object's uid beside the name, which kubelet sets to a Node's
	// name in its Events (kubectl describe node asks for both the Node's uid and its name there):
	// such a uid is the name as the view has it. "" when the reference has none.
	uid string
}

// ownerNames are the names of an object's owners, in every resource.
var ownerNames = reference{path: "metadata.ownerReferences.#.name", field: "metadata.ownerReferences.name"}

// references are the renamed references of each resource besides its owners, by group and
// resource.
var references = map[query.Resource][]reference{
	{Resource: "pods"}: {
		{path: "spec.nodeName", field: "spec.nodeName"},
		{path: "status.nominatedNodeName", field: "status.nominatedNodeName"},
		// kubectl describe pvc lists the Pods whose volumes claim it ("Used By").
		{path: "spec.volumes.#.persistentVolumeClaim.claimName", field: "spec.volumes.persistentVolumeClaim.claimName"},
	},
	{Resource: "events"}: {
		{path: "involvedObject.name", field: "involvedObject.name", uid: "involvedObject.uid"},
		{path: "related.name", field: "related.name"},
	},
	{Resource: "events", Group: "events.k8s.io"}: {
		{path: "regarding.name", field: "regarding.name", uid: "regarding.uid"},
		{path: "related.name", field: "related.name"},
	},
	{Resource: "persistentvolumeclaims"}: {{path: "spec.volumeName", field: "spec.volumeName"}},
	{Resource: "persistentvolumes"}:      {{path: "spec.claimRef.name", field: "spec.claimRef.name"}},
}

// referencesOf are the renamed references of a resource's objects, owners first.
func referencesOf(group, resource string) []reference {
	return append([]reference{ownerNames}, references[query.Resource{Resource: resource, Group: group}]...)
}

// qualifyReferences appends the edits that rename the references of a stored object of cluster.
func qualifyReferences(stored []byte, cluster string, refs []reference, edits []edit) []edit {
	for _, ref := range refs {
		v := gjson.GetBytes(stored, ref.path)
		switch {
		case len(v.Indexes) > 0:
			for i, e := range v.Array() {
				if i < len(v.Indexes) && e.Type == gjson.String && e.Str != "" {
					edits = append(edits, edit{v.Indexes[i], len(e.Raw), strconv.Quote(e.Str + qualifiedSeparator + cluster)})
				}
			}
		case v.Type == gjson.String && v.Str != "" && v.Index > 0:
			edits = append(edits, edit{v.Index, len(v.Raw), strconv.Quote(v.Str + qualifiedSeparator + cluster)})
			if ref.uid != "" {
				// A uid that is the name (kubelet's Node events) is the name as the view has it.
				if uid := gjson.GetBytes(stored, ref.uid); uid.Str == v.Str && uid.Index > 0 {
					edits = append(edits, edit{uid.Index, len(uid.Raw), strconv.Quote(uid.Str + qualifiedSeparator + cluster)})
				}
			}
		}
	}
	return edits
}

// unqualifyFields translates the field selectors of a qualified view's query that name an object
// (metadata.name) or a reference (refs) as the view names them into stored names, and narrows the
// query to the cluster of the suffix: what kubectl get NAME --watch, rollout status, wait and
// describe send (involvedObject.name=web-1_member1, spec.nodeName=node-1_member2).
//   - name=<name>_<cluster>, for a cluster of the query: name=<name> in that cluster only. Two
//     such selectors naming different clusters match nothing.
//   - name=<name> without a cluster, or of another cluster: nothing, as no name of the view
//     lacks one. An empty value is kept: a missing reference (an unscheduled Pod's node) is missing
//     in both.
//   - name!=<name> without a cluster: dropped, as every name of the view differs from it.
//     name!=<name>_<cluster> cannot be said without an "or" the query model lacks
//     (cluster≠c or name≠n): it is kept as is, so no object is left out, and the one it names is
//     not left out either.
//   - involvedObject.uid (regarding.uid): a uid with a cluster suffix is a Node's name (kubelet's
//     events), and is translated; any other is a real uid, the same in every view, and is kept.
func unqualifyFields(q *query.Query, refs []reference) {
	kept := q.Fields[:0]
	for _, f := range q.Fields {
		isUID := slices.ContainsFunc(refs, func(r reference) bool { return r.uid != "" && r.uid == f.Key })
		named := isUID || f.Key == "metadata.name" || slices.ContainsFunc(refs, func(r reference) bool { return r.field == f.Key })
		if !named || len(f.Values) != 1 || f.Values[0] == "" {
			kept = append(kept, f)
			continue
		}
		base, cluster, ok := splitQualified(f.Values[0])
		ok = ok && slices.Contains(q.Clusters, cluster)
		switch {
		case isUID && !ok:
			kept = append(kept, f)
		case f.Op == query.Equals && ok:
			q.Clusters = []string{cluster}
			kept = append(kept, query.Requirement{Key: f.Key, Op: f.Op, Values: []string{base}})
		case f.Op == query.Equals:
			matchNothing(q)
			kept = append(kept, f)
		case f.Op == query.NotEquals && !ok:
			// every name of the view differs from it
		default:
			kept = append(kept, f)
		}
	}
	q.Fields = kept
}

// matchNothing makes a query valid and empty: no cluster, and a name no object has ("_" is not a
// Kubernetes name).
func matchNothing(q *query.Query) {
	q.Clusters = []string{}
	q.Names = []string{qualifiedSeparator}
}
