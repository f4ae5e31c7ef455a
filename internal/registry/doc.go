// Package registry is the configuration shared by the collector and the indexer: which resources of
// which member clusters are collected, how each member is reached, and where documents are stored
// (DESIGN section 2).
//
// It covers:
//
//   - ResourceRegistry, a copy of Karmada's search.karmada.io/v1alpha1 type, loaded from files or
//     folders of YAML or JSON (several documents per file, `kind: List` and `ResourceRegistryList`
//     too) with strict decoding, so a typo is an error rather than a silently ignored field;
//   - validation of registries as Karmada does it, with every error at once and each naming its file,
//     registry and field path;
//   - the cluster inventory (a clusters file of our own, or every context of a kubeconfig; the
//     collector makes it from Karmada's Cluster objects too, with credentials held in memory) and the
//     client configuration of each member;
//   - cluster selection with Karmada's ClusterAffinity semantics (Matches), the union of all
//     registries per cluster (NewPlan), and the difference between two plans for a reloader (Diff);
//   - the OpenSearch backend named by the registries (OpenSearchBackend).
//
// It leaves out discovery (the collector resolves each selection's served version and resource name
// against the member), status reporting, watching files for changes, and reading the OpenSearch
// credentials the secretRef points to.
//
// # Identity of a selection
//
// A selection is identified by (cluster, group, kind, namespace); the version is not part of it,
// because members serve different versions of the same objects. The apiVersion of the first selector
// (registries in the order given, selectors in their order) is kept as the preferred version. A
// cluster-wide selection (no namespace) absorbs the namespaced selections of the same group and kind.
//
// # Differences from Karmada
//
// The YAML shape is Karmada's, unchanged; these rules are ours:
//
//   - One OpenSearch per indexer deployment. Registries may name at most one backend between them
//     (naming two is an error); a registry without backendStore is stored in that same OpenSearch,
//     not in an in-memory cache, because kubesearch has none.
//   - The same kind selected in two API groups anywhere (core Event and events.k8s.io Event, which are
//     the same objects; or two CRDs sharing a kind) is an error, because both would be stored in the
//     one index kubernetes-<kind>, under one document key (cluster, uid) for Events. Nothing is lost
//     for Events: the query API serves them in both groups from either (EventsSibling).
//   - Secrets are collected only when a selector names kind Secret of the core group, and are
//     redacted (only an allow-list of harmless fields published, data keys without their values)
//     unless the registry carries the annotation kubesearch.io/secret-data: "include". Karmada's
//     shape has no field for this; an annotation keeps the YAML loadable by Karmada too. Registries
//     that select the same Secrets of one cluster must agree, since the index holds one copy.
//   - Stricter validation where Karmada silently selects nothing or leaks: apiVersion is required and
//     must name a version; a field selector's In and NotIn need values; OpenSearch addresses must not
//     carry credentials (they belong in secretRef, never in a URL that ends up in logs).
//   - The proposal's earlier ClusterCache draft (clustercaches.karmada.io) was never served by Karmada
//     and is rejected with a message saying so.
package registry
