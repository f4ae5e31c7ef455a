// Package table renders stored Kubernetes objects as the rows of a metav1.Table, the answer
// kube-apiserver gives to `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`, so that `kubectl get`
// against the query API prints what it prints against a member cluster.
//
// It covers the built-in printers of the kinds people list most (pods, workloads, services, ingresses,
// configmaps, secrets, namespaces, nodes, events, persistentvolumeclaims, serviceaccounts), the
// additionalPrinterColumns of a CustomResourceDefinition, and kube-apiserver's default columns (Name,
// Created At) for anything else. Columns always include the -o wide ones (priority 1), as kube-apiserver
// serves them; kubectl hides them itself.
//
// A printer also renders its Status cell alone (Printer.Status, status.go), decoding only what that
// cell reads: the document builder indexes it when an object is written, so the search page's STATUS
// sorts on the server by the very text the Table prints. Likewise it computes one sort key per
// column of its kind (Printer.SortKeys, keys.go) from the same cell functions, keys that never
// depend on the time, so the kind's own columns sort on the server too. A CRD's printer has none.
//
// It leaves out what belongs to the response rather than to one object: the fleet's CLUSTER column,
// row objects (includeObject) and list metadata are the query API's to add.
package table
