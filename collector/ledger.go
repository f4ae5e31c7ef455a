package collector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubesearch/kubesearch/internal/registry"
)

// ledger is the collector's durable memory, kept in a compacted Kafka topic (LedgerTopic: one
// record per member cluster, the cluster's name as key):
//   - the selections of the cluster it started collecting and has not purged since (with the
//     resource they resolved to, which names their partition), so a restarted collector PURGEs what
//     it no longer selects — a configuration edited while it was down, a PURGE still buffered when
//     SIGTERM came, or written but not acknowledged before kill -9;
//   - how far epochs were reserved, so a restarted collector hands out epochs above every epoch an
//     earlier run used, whatever the clock did meanwhile.
//
// An entry is added before its collection publishes anything, and removed only once its PURGE was
// acknowledged by Kafka. Records are small (a few hundred bytes per selection) and written rarely:
// when a collection starts, a selection is removed, or every reserveAhead of epochs.
type ledger struct {
	client *kafka.Client
	writer *kafka.Writer
	topic  string
	// owner names this collector in its records (Options.Name); "" when unnamed.
	owner string
	log   *slog.Logger

	mu       sync.Mutex
	records  map[string]*ledgerRecord // by cluster; loaded ones of every collector, and ours
	reserved int64                    // the highest epoch reserved, written into every record of ours
	ours     map[string]bool          // the clusters this collector serves now
}

// LedgerVersion is the version of the ledger records this build writes and reads.
const LedgerVersion = 1

// ledgerRecord is the value of one cluster's record.
type ledgerRecord struct {
	V       int    `json:"v"`
	Cluster string `json:"cluster"`
	Owner   string `json:"owner,omitempty"`
	// EpochsReserved: no epoch above it was handed out by the collector that wrote the record.
	EpochsReserved int64         `json:"epochsReserved"`
	Selections     []ledgerEntry `json:"selections"`
	UpdatedAt      time.Time     `json:"updatedAt"`
}

// ledgerEntry is one selection that may have documents in the index.
type ledgerEntry struct {
	Group     string `json:"group"`
	Version   string `json:"version"`
	Resource  string `json:"resource"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
}

func (e ledgerEntry) key() registry.SelectionKey {
	return registry.SelectionKey{Group: e.Group, Kind: e.Kind, Namespace: e.Namespace}
}

// LedgerTopic is the ledger's topic for an event topic.
func LedgerTopic(topic string) string { return topic + ".collectors" }

func newLedger(client *kafka.Client, brokers []string, topic, owner string, transport kafka.RoundTripper, log *slog.Logger) *ledger {
	return &ledger{
		client: client, topic: LedgerTopic(topic), owner: owner, log: log,
		writer: &kafka.Writer{
			Addr: kafka.TCP(brokers...), Topic: LedgerTopic(topic), Balancer: &kafka.Hash{},
			RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond, MaxAttempts: 3,
			WriteTimeout: 30 * time.Second, Transport: transport,
		},
		records: map[string]*ledgerRecord{}, ours: map[string]bool{},
	}
}

func (l *ledger) close() error { return l.writer.Close() }

// load creates the topic when missing and reads every record, retrying until Kafka answers or ctx
// ends. It returns the highest epoch any record reserved.
func (l *ledger) load(ctx context.Context) (int64, error) {
	bo := ledgerBackoff()
	for {
		floor, err := l.read(ctx)
		if err == nil {
			return floor, nil
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("read the collector ledger %s: %w", l.topic, ctx.Err())
		}
		delay := bo.Step()
		l.log.Warn("cannot read the collector ledger, retrying", "topic", l.topic, "retryIn", delay.Round(time.Millisecond), "err", err)
		if err := pause(ctx, delay); err != nil {
			return 0, fmt.Errorf("read the collector ledger %s: %w", l.topic, err)
		}
	}
}

func (l *ledger) read(ctx context.Context) (int64, error) {
	resp, err := l.client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
		Topic: l.topic, NumPartitions: 1, ReplicationFactor: -1,
		ConfigEntries: []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}},
	}}})
	if err == nil {
		if err = resp.Errors[l.topic]; errors.Is(err, kafka.TopicAlreadyExists) {
			err = nil
		}
	}
	if err != nil {
		return 0, fmt.Errorf("create topic: %w", err)
	}
	offs, err := l.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{
		l.topic: {kafka.FirstOffsetOf(0), kafka.LastOffsetOf(0)},
	}})
	if err != nil {
		return 0, fmt.Errorf("list offsets: %w", err)
	}
	var first, end int64
	for _, p := range offs.Topics[l.topic] {
		if p.Error != nil {
			return 0, fmt.Errorf("list offsets: %w", p.Error)
		}
		first, end = p.FirstOffset, p.LastOffset
	}
	records := map[string]*ledgerRecord{}
	for offset := first; offset < end; {
		f, err := l.client.Fetch(ctx, &kafka.FetchRequest{Topic: l.topic, Partition: 0, Offset: offset, MaxBytes: 4 << 20})
		if err != nil {
			return 0, fmt.Errorf("fetch at offset %d: %w", offset, err)
		}
		if f.Error != nil {
			return 0, fmt.Errorf("fetch at offset %d: %w", offset, f.Error)
		}
		n := 0
		for {
			r, err := f.Records.ReadRecord()
			if err != nil {
				break // io.EOF at the end of the fetched batch
			}
			n++
			offset = r.Offset + 1
			key, err := kafka.ReadAll(r.Key)
			if err != nil {
				return 0, fmt.Errorf("record at offset %d: %w", r.Offset, err)
			}
			value, err := kafka.ReadAll(r.Value)
			if err != nil {
				return 0, fmt.Errorf("record at offset %d: %w", r.Offset, err)
			}
			if value == nil {
				delete(records, string(key)) // a tombstone: the cluster was purged
				continue
			}
			var rec ledgerRecord
			if err := json.Unmarshal(value, &rec); err != nil || rec.V != LedgerVersion {
				// Not ours to read (a newer version's, or damaged): keeping it unread is safe, its
				// selections are then only purged by that version.
				l.log.Warn("collector ledger record not understood, ignored", "topic", l.topic, "offset", r.Offset, "err", err, "v", rec.V)
				continue
			}
			records[string(key)] = &rec
		}
		if n == 0 {
			// Nothing readable below the end (compaction or aborted transactions left a gap).
			offset = max(offset, f.HighWatermark)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = records
	var floor int64
	for _, r := range records {
		floor = max(floor, r.EpochsReserved)
	}
	l.reserved = max(l.reserved, floor)
	return floor, nil
}

// forgotten returns, per cluster, the entries of the ledger the plan no longer selects: those of the
// plan's clusters it dropped, and every entry of a cluster it dropped whose record this collector
// owns (only with a name: an unnamed collector cannot tell its records from another's).
func (l *ledger) forgotten(plan registry.Plan) map[string][]ledgerEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]ledgerEntry{}
	for cluster, rec := range l.records {
		cp, inPlan := plan.Cluster(cluster)
		if !inPlan && (l.owner == "" || rec.Owner != l.owner) {
			continue
		}
		selected := map[registry.SelectionKey]bool{}
		for _, s := range cp.Selections {
			selected[s.SelectionKey] = true
		}
		for _, e := range rec.Selections {
			if !selected[e.key()] {
				out[cluster] = append(out[cluster], e)
			}
		}
	}
	return out
}

// serve sets the clusters this collector serves: the records reserve writes to.
func (l *ledger) serve(plan registry.Plan) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ours = map[string]bool{}
	for _, c := range plan.Clusters {
		l.ours[c.Cluster.Name] = true
	}
}

// add records that e's collection is about to publish. It writes only when e is new or resolved to
// another resource.
func (l *ledger) add(ctx context.Context, cluster string, e ledgerEntry) error {
	return l.update(ctx, cluster, func(rec *ledgerRecord) bool {
		i := slices.IndexFunc(rec.Selections, func(o ledgerEntry) bool { return o.key() == e.key() })
		switch {
		case i < 0:
			rec.Selections = append(rec.Selections, e)
		case rec.Selections[i] == e:
			return false
		default:
			// Resolved to another resource (or version) since: the older one's documents are
			// covered by the PURGE of the key, which names the kind.
			rec.Selections[i] = e
		}
		return true
	})
}

// drop records that the PURGEs of keys were acknowledged.
func (l *ledger) drop(ctx context.Context, cluster string, keys []registry.SelectionKey) error {
	return l.update(ctx, cluster, func(rec *ledgerRecord) bool {
		n := len(rec.Selections)
		rec.Selections = slices.DeleteFunc(rec.Selections, func(e ledgerEntry) bool { return slices.Contains(keys, e.key()) })
		return len(rec.Selections) != n
	})
}

// reserve records that epochs up to upTo may be handed out, in every record of ours.
func (l *ledger) reserve(ctx context.Context, upTo int64) error {
	l.mu.Lock()
	l.reserved = max(l.reserved, upTo)
	clusters := make([]string, 0, len(l.ours))
	for c := range l.ours {
		clusters = append(clusters, c)
	}
	l.mu.Unlock()
	slices.Sort(clusters)
	for _, c := range clusters {
		if err := l.update(ctx, c, func(*ledgerRecord) bool { return true }); err != nil {
			return err
		}
	}
	return nil
}

// update applies change to a copy of the cluster's record and writes it when change says so,
// retrying until Kafka acknowledged it or ctx ends. A record left without selections by a cluster
// this collector no longer serves is written as a tombstone, so compaction forgets the cluster.
func (l *ledger) update(ctx context.Context, cluster string, change func(*ledgerRecord) bool) error {
	l.mu.Lock()
	defer l.mu.Unlock() // held while writing: updates of one collector are few and must not interleave
	rec := &ledgerRecord{V: LedgerVersion, Cluster: cluster}
	if cur := l.records[cluster]; cur != nil {
		*rec = *cur
		rec.Selections = slices.Clone(cur.Selections)
	}
	if !change(rec) && rec.EpochsReserved >= l.reserved {
		return nil
	}
	rec.Owner, rec.EpochsReserved, rec.UpdatedAt = l.owner, max(rec.EpochsReserved, l.reserved), time.Now().UTC()
	msg := kafka.Message{Key: []byte(cluster)}
	if len(rec.Selections) > 0 || l.ours[cluster] {
		v, err := json.Marshal(rec)
		if err != nil {
			return fmt.Errorf("encode ledger record of %s: %w", cluster, err)
		}
		msg.Value = v
	}
	bo := ledgerBackoff()
	for {
		err := l.writer.WriteMessages(ctx, msg)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("write ledger record of %s: %w", cluster, ctx.Err())
		}
		delay := bo.Step()
		l.log.Warn("cannot write the collector ledger, retrying", "topic", l.topic, "cluster", cluster, "retryIn", delay.Round(time.Millisecond), "err", err)
		if err := pause(ctx, delay); err != nil {
			return fmt.Errorf("write ledger record of %s: %w", cluster, err)
		}
	}
	if msg.Value == nil {
		delete(l.records, cluster)
	} else {
		l.records[cluster] = rec
	}
	return nil
}

func ledgerBackoff() wait.Backoff {
	return wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1, Cap: 10 * time.Second, Steps: 1 << 30}
}

// pause waits d, or until ctx is done, and then returns ctx's error.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// entry is the ledger's entry of a selection of cluster.
func (l *ledger) entry(cluster string, k registry.SelectionKey) (ledgerEntry, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if rec := l.records[cluster]; rec != nil {
		for _, e := range rec.Selections {
			if e.key() == k {
				return e, true
			}
		}
	}
	return ledgerEntry{}, false
}
