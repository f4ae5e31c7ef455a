// Package progress shows how far a collector's first sync is: per cluster and resource, the objects
// listed so far, the rate, the member's reported total when it gives one, and the state.
//
// On a terminal it redraws a compact table in place; elsewhere (a pipe, a file, a log collector) it
// writes log lines: progress every few seconds and one line per resource once its list completes or
// fails. Either way it stops once every collection has settled (listed once, or failed) and reports
// one summary: "synced N objects of M resources in K clusters in X s".
//
// It reads the collector's status rows through a function and nothing else; it leaves out what
// happens after the first sync (re-lists, watch events), which /status and the metrics report.
package progress
