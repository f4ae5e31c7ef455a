// Package search is `kubectl search`, the kubectl plugin built as cmd/kubectl-search: the client end
// of the data flow (members → collector → indexer → queryapi → here). It reads the kubeconfig as
// kubectl does, finds the query API behind the current context's facade URL, asks the REST search
// (/v1alpha1/search) with the context's credentials, and prints the answer as kubectl get would: a
// table per kind with a CLUSTER column, -o wide, json, yaml or name, or facet counts (--count-by).
//
// It is a folder of its own beside queryapi, not under it, because it is a client: it speaks to the
// query API only over HTTP, as any REST client does, so the plugin binary carries neither gin nor
// OpenSearch's and Kafka's clients. The wire shapes it reads (SearchResult, Status, the facade's view
// paths) are written here again from queryapi/openapi.json; a test holds them against queryapi's.
// It imports internal/table for kube-apiserver's columns, so its STATUS, READY and AGE cells are the
// facade's and kubectl's. It leaves out what the REST search does not serve: watching (kubectl get
// --watch through the facade does that) and anything written.
package search
