//go:build e2e

// Package e2e holds the integration and end-to-end tests. They run only with the e2e build tag
// (`make e2e`) against the real services of the test bed: member clusters, Kafka and OpenSearch.
package e2e

import (
	"os"
	"testing"

	"github.com/kubesearch/kubesearch/tests/testbed"
)

func TestMain(m *testing.M) { os.Exit(testbed.Main(m)) }
