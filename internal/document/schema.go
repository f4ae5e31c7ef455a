package document

import "github.com/kubesearch/kubesearch/mappings"

// Names of the top-level fields of a document. The builder writes them, the compilers and the
// garbage collection query them; Fields gives each one's type, and TestFieldsMatchMapping holds the
// table against the mapping JSON in mappings/ (the source of truth for OpenSearch).
const (
	FieldCluster           = "cluster"
	FieldGroup             = "group"
	FieldVersion           = "version"
	FieldResource          = "resource"
	FieldKind              = "kind"
	FieldAPIVersion        = "apiVersion"
	FieldNamespace         = "namespace"
	FieldName              = "name"
	FieldUID               = "uid"
	FieldResourceVersion   = "resourceVersion"
	FieldEpoch             = "epoch"
	FieldCreationTimestamp = "creationTimestamp"
	FieldDeletionTimestamp = "deletionTimestamp"
	FieldLastChangedAt     = "lastChangedAt"
	FieldLabels            = "labels" // "key=value"
	FieldLabelKeys         = "labelKeys"
	FieldAnnotationKeys    = "annotationKeys"
	FieldOwnerUIDs         = "ownerUIDs"
	FieldOwnerKinds        = "ownerKinds"
	FieldOwnerRefs         = "ownerRefs" // "Kind/name"
	FieldConditions        = "conditions"
	FieldPhase             = "phase"
	// FieldStatus is the object's STATUS as its Table prints it (table.Printer.Status), for
	// sort=status; absent for kinds whose Table has no Status column.
	FieldStatus = "status"
	// FieldColumns holds the object's sort keys, one keyword per column of its kind's Table
	// (table.Printer.SortKeys), keyed by table.ColumnID: "columns.restarts" is a sort field.
	FieldColumns           = "columns"
	FieldNodeName          = "nodeName"
	FieldPodIP             = "podIP"
	FieldHostIP            = "hostIP"
	FieldQOSClass          = "qosClass"
	FieldContainerNames    = "containerNames"
	FieldImages            = "images"
	FieldRestarts          = "restarts"
	FieldReady             = "ready"
	FieldReplicas          = "replicas"
	FieldReadyReplicas     = "readyReplicas"
	FieldAvailableReplicas = "availableReplicas"
	FieldUpdatedReplicas   = "updatedReplicas"
	FieldUnschedulable     = "unschedulable"
	FieldKubeletVersion    = "kubeletVersion"
	FieldType              = "type"
	FieldClusterIP         = "clusterIP"
	FieldReason            = "reason"
	FieldText              = "text"
	// FieldNameText is the analysed subfield of name, for fuzzy matches.
	FieldNameText     = FieldName + ".text"
	FieldObject       = mappings.FieldObject
	FieldFullObject   = mappings.FieldFullObject
	FieldTrimmedPaths = mappings.FieldTrimmedPaths
)

// Field is one top-level field and its type, as the mapping names types.
type Field struct {
	Name string
	Type string
}

// Fields are every top-level field of a document, in the mapping's order.
var Fields = []Field{
	{FieldCluster, "keyword"}, {FieldGroup, "keyword"}, {FieldVersion, "keyword"}, {FieldResource, "keyword"},
	{FieldKind, "keyword"}, {FieldAPIVersion, "keyword"}, {FieldNamespace, "keyword"}, {FieldName, "keyword"},
	{FieldUID, "keyword"}, {FieldResourceVersion, "long"}, {FieldEpoch, "long"},
	{FieldCreationTimestamp, "date"}, {FieldDeletionTimestamp, "date"}, {FieldLastChangedAt, "date"},
	{FieldLabels, "keyword"}, {FieldLabelKeys, "keyword"}, {FieldAnnotationKeys, "keyword"},
	{FieldOwnerUIDs, "keyword"}, {FieldOwnerKinds, "keyword"}, {FieldOwnerRefs, "keyword"},
	{FieldConditions, "keyword"}, {FieldPhase, "keyword"}, {FieldStatus, "keyword"}, {FieldColumns, "object"},
	{FieldNodeName, "keyword"},
	{FieldPodIP, "ip"}, {FieldHostIP, "ip"}, {FieldQOSClass, "keyword"},
	{FieldContainerNames, "keyword"}, {FieldImages, "keyword"}, {FieldRestarts, "integer"}, {FieldReady, "boolean"},
	{FieldReplicas, "integer"}, {FieldReadyReplicas, "integer"}, {FieldAvailableReplicas, "integer"},
	{FieldUpdatedReplicas, "integer"}, {FieldUnschedulable, "boolean"}, {FieldKubeletVersion, "keyword"},
	{FieldType, "keyword"}, {FieldClusterIP, "ip"}, {FieldReason, "keyword"}, {FieldText, "text"},
	{FieldObject, "flat_object"}, {FieldFullObject, "object"}, {FieldTrimmedPaths, "keyword"},
}
