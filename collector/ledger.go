package collector

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubesearch/kubesearch/internal/lifecycle"
	"github.com/kubesearch/kubesearch/internal/registry"
	"github.com/kubesearch/kubesearch/internal/stream"
)

// ledger is the collector's durable memory, kept in a compacted Kafka topic (LedgerTopic):
//   - one record per selection it started collecting and has not purged since (key
//     "selection/<cluster>/<group>/<kind>/<namespace>", with the resource it resolved to, which names
//     its partition), so a restarted collector PURGEs what it no longer selects — a configuration
//     edited while it was down, a PURGE still buffered when SIGTERM came, or written but not
//     acknowledged before kill -9. A purged selection's record becomes a tombstone;
//   - one record per member cluster saying how far epochs were reserved (key "epochs/<cluster>",
//     never deleted), so a restarted collector hands out epochs above every epoch an earlier run
//     used, whatever the clock did meanwhile;
//   - one record per group-version collected of a member with the member's OpenAPI v3 document of it
//     (key "openapi/<cluster>/<path>", see openapi.go), relayed to the query API. Only its hash is
//     kept in memory, so a restarted collector does not write an unchanged document again.
//
// A selection's record is written before its collection publishes anything, and deleted only once
// its PURGE was acknowledged by Kafka. Selection and epochs records are small (a few hundred bytes)
// and written rarely: when a collection starts, a selection is removed, or every reserveAhead of
// epochs. OpenAPI records are large (up to a few MiB of JSON, compressed to a fifth), which the
// topic's max.message.bytes allows, and written when a member's document changes.
type ledger struct {
	client stream.Broker
	writer stream.Writer
	topic  string
	// owner names this collector in its records (Options.Name); "" when unnamed.
	owner string
	log   *slog.Logger

	// writing serialises writes (each waits for Kafka) without blocking readers of the maps; taken
	// with a select on ctx, so a caller being stopped never waits behind a write to an absent Kafka.
	writing chan struct{}

	mu      sync.Mutex                                                    // guards the fields below; never held while waiting for Kafka
	entries map[string]map[registry.SelectionKey]registry.SelectionRecord // by cluster: what may have documents
	ours    []string                                                      // the clusters this collector serves now, sorted
	openapi map[string]map[string]openAPIEntry                            // by cluster and path: the OpenAPI records
}

// openAPIEntry is what the collector keeps of an OpenAPI record: not its document.
type openAPIEntry struct {
	hash, owner string
}

// sameRecord says two records record the same selection resolved and described alike: a record
// written by an older build, or before the member's discovery changed, is written again.
func sameRecord(a, b registry.SelectionRecord) bool {
	return a.Cluster == b.Cluster && a.Owner == b.Owner && a.Group == b.Group && a.Version == b.Version &&
		a.Resource == b.Resource && a.Kind == b.Kind && a.Namespace == b.Namespace &&
		a.Namespaced == b.Namespaced && a.Singular == b.Singular &&
		slices.Equal(a.ShortNames, b.ShortNames) && slices.Equal(a.Categories, b.Categories)
}

func newLedger(client stream.Broker, topic, owner string, log *slog.Logger) *ledger {
	return &ledger{
		client: client, topic: registry.LedgerTopic(topic), owner: owner, log: log,
		// Compressed and allowed large messages for the OpenAPI records; the broker measures the
		// compressed batch against the topic's max.message.bytes, the writer the uncompressed one.
		writer: client.NewWriter(stream.WriterOptions{Topic: registry.LedgerTopic(topic), Compress: true,
			BatchBytes: registry.LedgerMaxMessageBytes}),
		writing: make(chan struct{}, 1),
		entries: map[string]map[registry.SelectionKey]registry.SelectionRecord{},
		openapi: map[string]map[string]openAPIEntry{},
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
		if err := lifecycle.Sleep(ctx, delay); err != nil {
			return 0, fmt.Errorf("read the collector ledger %s: %w", l.topic, err)
		}
	}
}

func (l *ledger) read(ctx context.Context) (int64, error) {
	if err := l.client.CreateTopic(ctx, stream.Topic{Name: l.topic, Partitions: 1, Config: registry.LedgerTopicConfig()}); err != nil {
		return 0, err
	}
	msgs, err := l.client.ReadPartition(ctx, l.topic, 0)
	if err != nil {
		return 0, err
	}
	entries := map[string]map[registry.SelectionKey]registry.SelectionRecord{}
	openapi := map[string]map[string]openAPIEntry{}
	var floor int64
	for _, m := range msgs {
		if _, _, ok := registry.ParseOpenAPIRecordKey(string(m.Key)); ok {
			l.applyOpenAPI(openapi, string(m.Key), m.Value, m.Offset)
			continue
		}
		floor = max(floor, l.apply(entries, string(m.Key), m.Value, m.Offset))
	}
	l.checkLimit(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries, l.openapi = entries, openapi
	return floor, nil
}

// checkLimit warns when the topic was made with a smaller max.message.bytes than this build asks
// for (by an older build, or by hand): the OpenAPI documents that do not fit are not relayed.
func (l *ledger) checkLimit(ctx context.Context) {
	limit, err := l.client.TopicMaxMessageBytes(ctx, l.topic)
	if err == nil && limit > 0 && limit < registry.LedgerMaxMessageBytes {
		l.log.Warn("the collector ledger's topic accepts smaller messages than OpenAPI documents may need; raise its max.message.bytes",
			"topic", l.topic, "topicLimit", limit, "want", registry.LedgerMaxMessageBytes)
	}
}

// applyOpenAPI adds one OpenAPI record to entries, remembering only its hash and owner.
func (l *ledger) applyOpenAPI(entries map[string]map[string]openAPIEntry, key string, value []byte, offset int64) {
	cluster, path, _ := registry.ParseOpenAPIRecordKey(key)
	if value == nil {
		delete(entries[cluster], path)
		if len(entries[cluster]) == 0 {
			delete(entries, cluster)
		}
		return
	}
	// The document is not decoded: json skips a field the struct lacks.
	var r struct {
		V     int    `json:"v"`
		Owner string `json:"owner"`
		Hash  string `json:"hash"`
	}
	if err := json.Unmarshal(value, &r); err != nil || r.V != registry.LedgerVersion {
		l.log.Warn("collector ledger record not understood, ignored", "topic", l.topic, "offset", offset, "key", key, "err", err, "v", r.V)
		return
	}
	if entries[cluster] == nil {
		entries[cluster] = map[string]openAPIEntry{}
	}
	entries[cluster][path] = openAPIEntry{hash: r.Hash, owner: r.Owner}
}

// apply adds one record to entries and returns the epoch it reserves, if it is an epochs record.
func (l *ledger) apply(entries map[string]map[registry.SelectionKey]registry.SelectionRecord, key string, value []byte, offset int64) int64 {
	switch {
	case strings.HasPrefix(key, registry.SelectionRecordPrefix):
		if value == nil {
			// A tombstone: the selection was purged. Its key names it.
			parts := strings.SplitN(strings.TrimPrefix(key, registry.SelectionRecordPrefix), "/", 4)
			if len(parts) == 4 {
				delete(entries[parts[0]], registry.SelectionKey{Group: parts[1], Kind: parts[2], Namespace: parts[3]})
			}
			return 0
		}
		var e registry.SelectionRecord
		if err := json.Unmarshal(value, &e); err != nil || e.V != registry.LedgerVersion {
			// Not ours to read (a newer version's, or damaged): left alone, its selection is then
			// only purged by that version.
			l.log.Warn("collector ledger record not understood, ignored", "topic", l.topic, "offset", offset, "key", key, "err", err, "v", e.V)
			return 0
		}
		if entries[e.Cluster] == nil {
			entries[e.Cluster] = map[registry.SelectionKey]registry.SelectionRecord{}
		}
		entries[e.Cluster][e.Key()] = e
	case strings.HasPrefix(key, registry.EpochsRecordPrefix):
		var r registry.EpochsRecord
		if err := json.Unmarshal(value, &r); err == nil {
			return r.EpochsReserved
		}
	}
	return 0
}

// forgotten returns, per cluster, the entries of the ledger the plan no longer selects: those of the
// plan's clusters it dropped, and those of a cluster it dropped that this collector wrote (only with
// a name: an unnamed collector cannot tell its records from another's).
func (l *ledger) forgotten(plan registry.Plan) map[string][]registry.SelectionRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]registry.SelectionRecord{}
	for cluster, es := range l.entries {
		cp, inPlan := plan.Cluster(cluster)
		selected := map[registry.SelectionKey]bool{}
		for _, s := range cp.Selections {
			selected[s.SelectionKey] = true
		}
		for k, e := range es {
			if inPlan && !selected[k] || !inPlan && l.owner != "" && e.Owner == l.owner {
				out[cluster] = append(out[cluster], e)
			}
		}
		slices.SortFunc(out[cluster], func(a, b registry.SelectionRecord) int { return strings.Compare(a.Key().String(), b.Key().String()) })
	}
	return out
}

// serve sets the clusters this collector serves: those whose epochs records reserve writes.
func (l *ledger) serve(plan registry.Plan) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ours = l.ours[:0]
	for _, c := range plan.Clusters {
		l.ours = append(l.ours, c.Cluster.Name)
	}
}

// entry is the ledger's entry of a selection of cluster.
func (l *ledger) entry(cluster string, k registry.SelectionKey) (registry.SelectionRecord, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[cluster][k]
	return e, ok
}

// add records that e's collection is about to publish. It writes only when e is new or resolved
// otherwise (another resource or version: the older one's documents are covered by the PURGE of the
// key, which names the kind).
func (l *ledger) add(ctx context.Context, cluster string, e registry.SelectionRecord) error {
	e.V, e.Cluster, e.Owner = registry.LedgerVersion, cluster, l.owner
	if cur, ok := l.entry(cluster, e.Key()); ok && sameRecord(cur, e) {
		return nil
	}
	e.UpdatedAt = time.Now().UTC()
	value, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode ledger record of %s %s: %w", cluster, e.Key(), err)
	}
	return l.write(ctx, []stream.Message{{Key: []byte(registry.SelectionRecordKey(cluster, e.Key())), Value: value}}, func() {
		if l.entries[cluster] == nil {
			l.entries[cluster] = map[registry.SelectionKey]registry.SelectionRecord{}
		}
		l.entries[cluster][e.Key()] = e
	})
}

// drop records that the PURGEs of keys were acknowledged: their records become tombstones.
func (l *ledger) drop(ctx context.Context, cluster string, keys []registry.SelectionKey) error {
	var msgs []stream.Message
	for _, k := range keys {
		if _, ok := l.entry(cluster, k); ok {
			msgs = append(msgs, stream.Message{Key: []byte(registry.SelectionRecordKey(cluster, k))})
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return l.write(ctx, msgs, func() {
		for _, k := range keys {
			delete(l.entries[cluster], k)
		}
		if len(l.entries[cluster]) == 0 {
			delete(l.entries, cluster)
		}
	})
}

// reserve records, in the epochs record of every cluster this collector serves, that epochs up to
// upTo may be handed out. Serving no cluster, it records nothing: then no collection runs, and the
// only epochs handed out are PURGEs', which nothing compares.
func (l *ledger) reserve(ctx context.Context, upTo int64) error {
	l.mu.Lock()
	clusters := slices.Clone(l.ours)
	l.mu.Unlock()
	now := time.Now().UTC()
	msgs := make([]stream.Message, 0, len(clusters))
	for _, c := range clusters {
		v, err := json.Marshal(registry.EpochsRecord{V: registry.LedgerVersion, Cluster: c, Owner: l.owner, EpochsReserved: upTo, UpdatedAt: now})
		if err != nil {
			return fmt.Errorf("encode epochs record of %s: %w", c, err)
		}
		msgs = append(msgs, stream.Message{Key: []byte(registry.EpochsRecordKey(c)), Value: v})
	}
	if len(msgs) == 0 {
		return nil
	}
	return l.write(ctx, msgs, func() {})
}

// write writes msgs, retrying until Kafka acknowledged them or ctx ends, then applies done under
// l.mu. Writes are serialised, so the ledger in memory follows the order of the topic.
func (l *ledger) write(ctx context.Context, msgs []stream.Message, done func()) error {
	select {
	case l.writing <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("write the collector ledger: %w", ctx.Err())
	}
	defer func() { <-l.writing }()
	bo := ledgerBackoff()
	for {
		err := l.writer.Write(ctx, msgs...)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("write the collector ledger: %w", ctx.Err())
		}
		if stream.TooLarge(err) {
			return fmt.Errorf("write the collector ledger: %w", err) // no retry makes it fit
		}
		delay := bo.Step()
		l.log.Warn("cannot write the collector ledger, retrying", "topic", l.topic, "records", len(msgs), "retryIn", delay.Round(time.Millisecond), "err", err)
		if err := lifecycle.Sleep(ctx, delay); err != nil {
			return fmt.Errorf("write the collector ledger: %w", err)
		}
	}
	l.mu.Lock()
	done()
	l.mu.Unlock()
	return nil
}

func ledgerBackoff() wait.Backoff {
	return wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1, Cap: 5 * time.Second, Steps: 1 << 30}
}

// openAPIHashes are the hashes of a cluster's OpenAPI records, by path.
func (l *ledger) openAPIHashes(cluster string) map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]string, len(l.openapi[cluster]))
	for p, e := range l.openapi[cluster] {
		out[p] = e.hash
	}
	return out
}

// putOpenAPI writes a cluster's OpenAPI record, waiting until Kafka acknowledged it.
func (l *ledger) putOpenAPI(ctx context.Context, r registry.OpenAPIRecord) error {
	r.V, r.Owner, r.UpdatedAt = registry.LedgerVersion, l.owner, time.Now().UTC()
	// Not HTML-escaped, so the document keeps the member's bytes, which its hash is of.
	var value bytes.Buffer
	enc := json.NewEncoder(&value)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("encode OpenAPI record of %s %s: %w", r.Cluster, r.Path, err)
	}
	return l.write(ctx, []stream.Message{{Key: []byte(registry.OpenAPIRecordKey(r.Cluster, r.Path)), Value: value.Bytes()}}, func() {
		if l.openapi[r.Cluster] == nil {
			l.openapi[r.Cluster] = map[string]openAPIEntry{}
		}
		l.openapi[r.Cluster][r.Path] = openAPIEntry{hash: r.Hash, owner: r.Owner}
	})
}

// dropOpenAPI makes a cluster's OpenAPI records of paths tombstones.
func (l *ledger) dropOpenAPI(ctx context.Context, cluster string, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	msgs := make([]stream.Message, len(paths))
	for i, p := range paths {
		msgs[i] = stream.Message{Key: []byte(registry.OpenAPIRecordKey(cluster, p))}
	}
	return l.write(ctx, msgs, func() {
		for _, p := range paths {
			delete(l.openapi[cluster], p)
		}
		if len(l.openapi[cluster]) == 0 {
			delete(l.openapi, cluster)
		}
	})
}

// forgottenOpenAPI are, per cluster, the paths of the OpenAPI records of clusters the plan dropped
// that this collector wrote (only with a name, as forgotten). Those of the plan's clusters are its
// members' to settle.
func (l *ledger) forgottenOpenAPI(plan registry.Plan) map[string][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]string{}
	for cluster, es := range l.openapi {
		if _, inPlan := plan.Cluster(cluster); inPlan || l.owner == "" {
			continue
		}
		for p, e := range es {
			if e.owner == l.owner {
				out[cluster] = append(out[cluster], p)
			}
		}
		slices.Sort(out[cluster])
	}
	return out
}
