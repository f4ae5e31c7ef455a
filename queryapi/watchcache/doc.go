// Package watchcache turns the indexers' change feed (package changes; feed.go) into Kubernetes
// watch events for the query API's facade (DESIGN section 5, which the feed changes: issue 25).
// Every query API replica reads every partition of the feed itself, no consumer group, into a
// bounded window of events. The feed holds only changes, deletions by SYNC and PURGE included, so
// the cache keeps nothing per object beyond its window.
//
// Without a feed (indexers that publish none), it reads the event stream instead and keeps the
// identity of every cached object (uid → namespace, name, resourceVersion, epoch, labels), which
// turns the stream into watch events: a collector's re-list repeats unchanged objects (dropped
// here), and its SYNC marker says which objects vanished (sent as DELETED here).
//
// A watch resumes from any resourceVersion the window still covers; from an older one it gets
// ErrTooOld (410 Gone) and re-lists.
//
// Start: the window must hold every event a LIST served from the index may not show yet, so
// reading starts a little before the indexers' bookmark on the feed (the event stream: their
// committed offsets, with object identities seeded from the index). A watch may resume from a
// pair's resourceVersion only at or above its watermark at that start (the pair's floor, raised as
// events leave the window): older positions may need events from before the window.
//
// A member whose resourceVersions go backwards starts its pairs over in a new numbering, and
// clients holding positions of the old one get 410 (wentback.go).
//
// The package works in positions per pair (store.Pair → resourceVersion). It leaves out what is
// HTTP: selectors and authorization scopes (a watch filters the events it reads), rendering, and
// how a view encodes a position (a member's resourceVersion, or the fleet's vector) — all in
// package queryapi, which talks to the cache through interfaces of its own.
package watchcache
