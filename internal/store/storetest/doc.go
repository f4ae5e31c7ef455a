// Package storetest is the storage contract suite (DESIGN sections 1 and 5): one fleet-like corpus,
// written through the document builder exactly as the indexer writes events, and one list of cases
// — queries built by query.Parse from URL parameters as the REST search builds them, paging with
// snapshots, garbage collection, the version and epoch rules, watermarks — run against every store
// backend. Compare loads the corpus into each backend, runs every case on each, checks each answer
// against what the corpus generator knows independently, and fails on any difference between the
// backends' answers.
//
// It is a non-test package so that the end-to-end tests (tests/e2e, which reach the test bed's
// OpenSearch) can import it. It leaves out how backends are made and torn down: the caller passes
// them in, made with KeepAlive as their snapshot keep-alive and set up (Setup) for writes.
package storetest
