// Package simulate is a fleet simulator: it writes to the event stream exactly what N collectors
// would write for N member clusters of M objects each — the ledger's selection, epochs and OpenAPI
// records, then per (cluster, resource) a list in a new epoch (ADDED events and a SYNC marker),
// PURGE markers for what the ledger holds and the simulation no longer selects, then a steady churn
// of creates, updates and deletes at a given rate with per-cluster resourceVersions that only
// increase — so the indexer, OpenSearch and the query API can be measured at a fleet's scale without
// a fleet (issue 25). It serves the collectors' /status for what it simulates, so the query API's
// fleet status covers the simulated clusters as it covers real ones.
//
// The fleet is deterministic from a seed: which clusters serve which versions of the custom
// resources, every object's name, uid, labels, shape and size, and the sequence of churn operations
// of each cluster. What depends on the clock is what does in a real fleet: epochs,
// resourceVersions (which follow the clock, so a restarted simulation continues above its earlier
// run), timestamps, and which churn operation lands in which second. The objects are those of
// internal/fixtures (App): names repeat across clusters as one rollout leaves them everywhere.
//
// Clusters are named <prefix><number> ("sim-0001"), so simulated clusters can share a stream and
// an index with real members. It leaves out what collectors do with members: nothing here talks to
// a kube-apiserver.
package simulate
