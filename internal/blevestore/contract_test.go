package blevestore

import (
	"testing"

	"github.com/kubesearch/kubesearch/internal/store/storetest"
)

// TestContract runs the whole storage contract suite on the embedded store, which needs no
// services: every query case, continue token rule, write, garbage collection and watermark case
// checked against the corpus's expectations. (tests/e2e compares its answers with OpenSearch's.)
func TestContract(t *testing.T) {
	s, err := New(Options{Dir: t.TempDir(), TokenKey: testKey, KeepAlive: storetest.KeepAlive, Limits: storetest.Limits})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	storetest.Run(t, s)
}
