package queryapi

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubesearch/kubesearch/internal/query"
)

// Field selectors. kube-apiserver accepts a few field labels per kind (metadata.name and
// metadata.namespace for all) and answers any other with 400 "field label not supported: <label>".
// kubesearch matches a selector on any path of the object (spec.containers.image,
// metadata.annotations.<key>), which kube-apiserver cannot — and would match nothing, silently, on a
// misspelt one (spec.nodNames=x). So a path is accepted when it is one of kube-apiserver's labels
// for the kind, or names a field of the kind's schema: the member's OpenAPI v3 document, which
// the collectors relay (schemapaths.go), through arrays and maps, and anything below a field whose
// schema keeps unknown fields (a CRD with x-kubernetes-preserve-unknown-fields). Any other is a 400
// naming it, in the facade as in the REST search. When no member of the view relayed a schema of
// the kind (an aggregated API without OpenAPI, a query API without the ledger), nothing can tell a
// typo and every path is accepted, as before.

// fieldLabels are kube-apiserver's field labels per resource besides metadata.name and
// metadata.namespace (the fields each kind's registry strategy makes selectable; a CRD's are its
// selectableFields, which are in its schema). They are accepted whatever a member's schema says.
var fieldLabels = map[query.Resource][]string{
	{Resource: "pods"}: {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
		"spec.hostNetwork", "status.phase", "status.podIP", "status.podIPs", "status.nominatedNodeName"},
	{Resource: "events"}: {"involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
		"involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
		"reason", "reportingComponent", "source", "type"},
	{Resource: "events", Group: eventsGroup}: {"regarding.kind", "regarding.namespace", "regarding.name", "regarding.uid",
		"regarding.apiVersion", "regarding.resourceVersion", "regarding.fieldPath", "reason", "reportingController", "type"},
	{Resource: "secrets"}:                    {"type"},
	{Resource: "nodes"}:                      {"spec.unschedulable"},
	{Resource: "namespaces"}:                 {"status.phase"},
	{Resource: "replicationcontrollers"}:     {"status.replicas"},
	{Resource: "replicasets", Group: "apps"}: {"status.replicas"},
	{Resource: "jobs", Group: "batch"}:       {"status.successful"},
	{Resource: "certificatesigningrequests", Group: "certificates.k8s.io"}: {"spec.signerName"},
}

// fieldLabelPaths are the labels whose value is not at the path they name: a core Event's
// "source" selects its source.component.
var fieldLabelPaths = map[query.Resource]map[string]string{
	{Resource: "events"}: {"source": "source.component"},
}

// isFieldLabel says whether kube-apiserver selects the resource by the field label.
func isFieldLabel(group, resource, label string) bool {
	if label == "metadata.name" || label == "metadata.namespace" {
		return true
	}
	for _, l := range fieldLabels[query.Resource{Resource: resource, Group: group}] {
		if l == label {
			return true
		}
	}
	return false
}

// fieldLabelPath is the object path a field selector of the resource reads.
func fieldLabelPath(group, resource, label string) string {
	if p, ok := fieldLabelPaths[query.Resource{Resource: resource, Group: group}][label]; ok {
		return p
	}
	return label
}

// unsupportedField is kube-apiserver's answer to a field label it does not know, as a parameter
// error.
func unsupportedField(label string) query.Error {
	return query.Error{Param: query.ParamFieldSelector, Message: "field label not supported: " + label}
}

// checkFields answers the field selectors of a request for a resource of a view ("" the fleet)
// that the resource does not support; nil when all are.
func (s *Server) checkFields(res apiResource, cluster string, vis visibleFunc, fields []query.Requirement) error {
	var errs query.Errors
	var kind *schemaNode
	looked := false
	for _, f := range fields {
		if isFieldLabel(res.Group, res.Resource, f.Key) {
			continue
		}
		if !looked {
			kind, looked = s.catalog.schemaOf(cluster, vis, schema.GroupVersionKind{Group: res.Group, Version: res.Version, Kind: res.Kind}), true
		}
		if kind != nil && !kind.has(f.Key) {
			errs = append(errs, unsupportedField(f.Key))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// checkSearchFields answers the field selectors of a REST search that no resource it covers
// supports: a path is accepted when one of them has it (resources=pods,deployments with
// spec.nodeName), or when one of them has no known schema. Resources are matched as stored: the
// REST search reads documents, in the group they were collected in.
func (s *Server) checkSearchFields(q *query.Query, vis visibleFunc) error {
	if len(q.Fields) == 0 {
		return nil
	}
	var kinds []apiResource
	for _, r := range s.catalog.resources("", vis) {
		if r.from != nil {
			continue
		}
		if len(q.Resources) == 0 || containsResource(q.Resources, r.Group, r.Resource) {
			kinds = append(kinds, r)
		}
	}
	schemas := make([]*schemaNode, len(kinds))
	for i, r := range kinds {
		if schemas[i] = s.catalog.schemaOf("", vis, schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}); schemas[i] == nil {
			return nil // a resource whose fields are unknown: any path may be one of them
		}
	}
	if len(kinds) == 0 {
		return nil // nothing cached of what is asked: nothing to tell a typo by
	}
	var errs query.Errors
	for _, f := range q.Fields {
		ok := false
		for i, r := range kinds {
			if isFieldLabel(r.Group, r.Resource, f.Key) || schemas[i].has(f.Key) {
				ok = true
				break
			}
		}
		if !ok {
			errs = append(errs, unsupportedField(f.Key))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

func containsResource(rs []query.Resource, group, resource string) bool {
	for _, r := range rs {
		if r.Resource == resource && (r.AnyGroup || r.Group == group) {
			return true
		}
	}
	return false
}
