//go:build e2e && chaos

package e2e

import "testing"

// The node losses of TestHANodeLoss with the node hung (SIGSTOP) instead: harsher, since clients
// wait on open connections until their timeouts and the cluster takes its fault detection's time to
// drop the node. On demand (make e2e-ha HA_TESTS=^TestHA, which builds with the chaos tag), with
// the whole fault run to come (issue 26).
func TestHANodeHang(t *testing.T) {
	haFaults(t, haFault{"kafka-3", "SIGSTOP"}, haFault{"opensearch-3", "SIGSTOP"})
}
