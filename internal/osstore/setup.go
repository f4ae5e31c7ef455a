package osstore

import (
	"context"
	"fmt"

	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/mappings"
)

// setupDefaults fills the zero fields of o.
func setupDefaults(o *store.SetupOptions) {
	if o.BatchSize <= 0 {
		o.BatchSize = 1000
	}
	if o.BatchBytes <= 0 {
		o.BatchBytes = 8 << 20
	}
	if o.Step == nil {
		o.Step = func(string) {}
	}
}

// Setup prepares OpenSearch for writes, in one attempt: it checks that OpenSearch answers (telling
// Options.Reachable), puts the index template of package mappings when none is installed or the
// installed one is older (never over a newer one), creates the state index, and rolls every alias
// whose index is of an older mappings.Version to a new index (roll.go). Concrete indices are created
// later, by the first Write of their kind. An error means setup is not done: OpenSearch is away, or
// refused a step; calling Setup again resumes it.
func (s *Store) Setup(ctx context.Context, o store.SetupOptions) error {
	setupDefaults(&o)
	if err := s.ping(ctx); err != nil {
		s.reachable(false)
		return err
	}
	s.reachable(true)
	msg, err := s.installTemplate(ctx, s.index)
	if err != nil {
		return fmt.Errorf("index template: %w", err)
	}
	if msg != "" {
		s.log.Info(msg)
	}
	body, err := mappings.StateIndexBody(s.index)
	if err != nil {
		return err
	}
	if err := s.createIndex(ctx, s.stateIndex, body); err != nil {
		return fmt.Errorf("state index: %w", err)
	}
	return s.rollIndices(ctx, o)
}
