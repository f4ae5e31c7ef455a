package queryapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubesearch/kubesearch/internal/lifecycle"
	"github.com/kubesearch/kubesearch/internal/registry"
	"github.com/kubesearch/kubesearch/internal/stream"
)

// followLedger keeps the catalog current from the collectors' ledger: the compacted topic is read
// from its start, which gives every live selection record, then followed. The catalog counts as
// synced once everything the topic held at the start is read. Kafka down or the topic missing is
// waited out with backoff; it returns when ctx is done.
func (s *Server) followLedger(ctx context.Context) error {
	topic := registry.LedgerTopic(s.opts.Topic)
	bo := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.2, Cap: 5 * time.Second, Steps: 1 << 30}
	for {
		err := s.readLedger(ctx, topic)
		if ctx.Err() != nil {
			return nil
		}
		delay := bo.Step()
		s.log.Warn("cannot read the collectors' ledger; the facade serves what it read so far", "topic", topic,
			"retryIn", delay.Round(time.Millisecond), "err", err)
		if err := lifecycle.Sleep(ctx, delay); err != nil {
			return nil
		}
	}
}

func (s *Server) readLedger(ctx context.Context, topic string) error {
	spans, err := s.kafka.Spans(ctx, topic)
	if err != nil {
		return err
	}
	// behind are the partitions not read up to where they ended at the start.
	behind := map[int]int64{}
	for p, sp := range spans {
		if sp.End > sp.First {
			behind[p] = sp.End
		}
	}
	if len(behind) == 0 {
		s.catalog.markSynced()
	}
	f, err := s.kafka.NewFollower(stream.FollowerConfig{Topic: topic, Default: stream.FirstOffset})
	if err != nil {
		return err
	}
	return f.Run(ctx, func(_ context.Context, m stream.Message) error {
		s.applyLedgerRecord(m)
		if end, ok := behind[m.Partition]; ok && m.Offset+1 >= end {
			delete(behind, m.Partition)
			if len(behind) == 0 {
				s.catalog.markSynced()
				s.log.Info("collectors' ledger read", "topic", topic, "clusters", s.catalog.clusters())
			}
		}
		return nil
	})
}

// applyLedgerRecord applies one ledger record to the catalog. Records of other kinds (epochs) are
// the collectors' own; a record that does not decode is logged and skipped, never fatal: it comes
// from another build, and the facade serves the rest.
func (s *Server) applyLedgerRecord(m stream.Message) {
	key := string(m.Key)
	if cluster, path, ok := registry.ParseOpenAPIRecordKey(key); ok {
		s.applyOpenAPIRecord(m, cluster, path)
		return
	}
	if !strings.HasPrefix(key, registry.SelectionRecordPrefix) {
		return
	}
	if m.Value == nil {
		s.catalog.apply(key, nil)
		return
	}
	var rec registry.SelectionRecord
	if err := json.Unmarshal(m.Value, &rec); err != nil {
		s.log.Warn("ledger record does not decode; skipped", "key", key, "partition", m.Partition, "offset", m.Offset,
			"err", fmt.Errorf("selection record: %w", err))
		return
	}
	s.catalog.apply(key, &rec)
}

// applyOpenAPIRecord applies a member's OpenAPI document, or its tombstone, to the catalog. The key
// names the cluster and path, whatever the value says.
func (s *Server) applyOpenAPIRecord(m stream.Message, cluster, path string) {
	if m.Value == nil {
		s.catalog.applyOpenAPI(cluster, path, "", nil)
		return
	}
	var rec registry.OpenAPIRecord
	err := json.Unmarshal(m.Value, &rec)
	switch {
	case err == nil && rec.V != registry.LedgerVersion:
		err = fmt.Errorf("version %d, want %d", rec.V, registry.LedgerVersion)
	case err == nil && (rec.Hash == "" || len(rec.Document) == 0):
		err = errors.New("no hash or no document")
	}
	if err != nil {
		s.log.Warn("ledger record does not decode; skipped", "key", string(m.Key), "partition", m.Partition, "offset", m.Offset,
			"err", fmt.Errorf("OpenAPI record: %w", err))
		return
	}
	s.catalog.applyOpenAPI(cluster, path, rec.Hash, rec.Document)
}
