package osstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubesearch/kubesearch/internal/lifecycle"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/mappings"
)

// Write applies ops in order — index and delete operations in _bulk requests, with _id =
// store.DocID(cluster, uid),
// version = resourceVersion and version_type external_gte, to the index of each op's kind — and
// returns those OpenSearch will never accept, by their position in ops. What OpenSearch cannot take
// now (429, 5xx, 401, 403, a write block) is retried with backoff, those items only; a version
// conflict goes to the epoch rule (resolve); a request refused as a whole for its content (400,
// 413) is split down to the op at fault. Write returns an error only when ctx ends first, with some
// ops possibly unwritten.
func (s *Store) Write(ctx context.Context, ops []store.Op) ([]store.Failure, error) {
	batch := make([]*op, 0, len(ops))
	var refused []store.Failure
	for i, o := range ops {
		if o.UID == "" {
			// The _id would not be empty (DocID prefixes the cluster), so OpenSearch would take it.
			refused = append(refused, store.Failure{Pos: i, Err: "action_request_validation_exception: if _id is specified it must not be empty"})
			continue
		}
		b := &op{pos: i, action: actionIndex, index: mappings.IndexName(s.index.Prefix, o.Kind), id: o.ID(), doc: o.Doc,
			epoch: o.Epoch, versioned: o.Versioned, version: o.Version}
		if o.Delete {
			b.action, b.doc = actionDelete, nil
		}
		batch = append(batch, b)
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	failed, err := s.writer.write(ctx, batch)
	out := refused
	for _, f := range failed {
		out = append(out, store.Failure{Pos: f.op.pos, Err: f.err})
	}
	slices.SortFunc(out, func(a, b store.Failure) int { return a.Pos - b.Pos })
	return out, err
}

// docStore is what the writer needs from OpenSearch.
type docStore interface {
	// bulk sends ops in one _bulk request and returns one result per op, in order. An error means
	// the request as a whole failed; a *requestError tells how.
	bulk(ctx context.Context, ops []*op) ([]itemResult, error)
	// storedVersions reads the epoch, resourceVersion, _seq_no and _primary_term of documents.
	storedVersions(ctx context.Context, keys []docKey) (map[docKey]storedDoc, error)
	// ensureIndex makes alias exist, creating its versioned index when it does not.
	ensureIndex(ctx context.Context, alias string) (indexState, error)
}

// indexState is what a name written to is.
type indexState struct {
	// alias is false when a concrete index has the name (it predates the indexer).
	alias bool
	// behind are the indices an alias points to.
	behind []string
}

// storedDoc is what the epoch rule reads of a stored document.
type storedDoc struct {
	found              bool
	epoch, rv          int64
	seqNo, primaryTerm int64
	hasSeqNo           bool
	labels             json.RawMessage
}

// Priors reads what the index holds of each op's document before the op (store.Prior), realtime,
// in one _mget: the change feed's view of what an op changes. The ops are not written.
func (s *Store) Priors(ctx context.Context, ops []store.Op) ([]store.Prior, error) {
	keys := make([]docKey, 0, len(ops))
	seen := map[docKey]bool{}
	for _, o := range ops {
		k := docKey{mappings.IndexName(s.index.Prefix, o.Kind), o.ID()}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	out := make([]store.Prior, len(ops))
	if len(keys) == 0 {
		return out, nil
	}
	stored, err := s.storedVersions(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("read %d stored documents: %w", len(keys), err)
	}
	for i, o := range ops {
		d := stored[docKey{mappings.IndexName(s.index.Prefix, o.Kind), o.ID()}]
		out[i] = store.Prior{Found: d.found, Epoch: d.epoch, ResourceVersion: d.rv, Labels: d.labels}
	}
	return out, nil
}

// failure is an op OpenSearch will never accept.
type failure struct {
	op  *op
	err string
}

// writer applies ops to OpenSearch: retries what OpenSearch could not take now, applies the epoch
// rule to version conflicts, and hands back what it will never accept. It is used by one goroutine
// at a time (Store.Write holds writeMu).
type writer struct {
	docs    docStore
	metrics *metrics
	log     *slog.Logger
	backoff func() wait.Backoff
	healthy func(bool) // told whether OpenSearch answers

	aliases map[string]bool // index names ensured in this process → is an alias
	tombs   *tombstones     // the deletes written lately, for the epoch rule (tombstone.go)
}

func newWriter(docs docStore, m *metrics, log *slog.Logger) *writer {
	return &writer{
		docs: docs, metrics: m, log: log, healthy: func(bool) {}, backoff: defaultBackoff,
		aliases: map[string]bool{}, tombs: newTombstones(time.Now),
	}
}

// write applies ops in order and returns those OpenSearch will never accept. It returns an error only
// when ctx ends first, with some ops possibly unwritten.
func (w *writer) write(ctx context.Context, ops []*op) ([]failure, error) {
	w.tombs.expire()
	var failed []failure
	pending := ops
	bo := w.backoff()
	for len(pending) > 0 {
		if err := w.ensureIndices(ctx, pending, &bo); err != nil {
			return failed, err
		}
		start := time.Now()
		results, err := w.docs.bulk(ctx, pending)
		w.metrics.bulkLatency.Observe(time.Since(start).Seconds())
		if err != nil {
			if ctx.Err() != nil {
				return failed, fmt.Errorf("bulk of %d operations: %w", len(pending), ctx.Err())
			}
			if splittable(err) {
				w.healthy(true)
				f, err := w.split(ctx, pending, err)
				return append(failed, f...), err
			}
			var re *requestError
			w.healthy(errors.As(err, &re) && re.status != 0 && re.status < 500)
			w.metrics.bulkErrors.Inc()
			if err := w.wait(ctx, &bo, "bulk request failed", len(pending), err); err != nil {
				return failed, err
			}
			continue
		}
		w.healthy(true)
		retry, f, err := w.apply(ctx, pending, results)
		failed = append(failed, f...)
		if err != nil {
			return failed, err
		}
		if len(retry) < len(pending) {
			bo = w.backoff() // progress: the next wait starts short again
		}
		pending = retry
		if len(pending) > 0 {
			w.metrics.retriedItems.Add(float64(len(pending)))
			if err := w.wait(ctx, &bo, "OpenSearch could not take every operation", len(pending), nil); err != nil {
				return failed, err
			}
		}
	}
	return failed, nil
}

// apply sorts the results of one _bulk request: done, retried, resolved by the epoch rule, failed.
func (w *writer) apply(ctx context.Context, ops []*op, results []itemResult) (retry []*op, failed []failure, err error) {
	// The position of the last op per document that reached a final state: an earlier op of the same
	// document that must be retried is superseded by it (retrying it would apply an older event after
	// a newer one, which an unversioned write would not refuse).
	settled := map[docKey]int{}
	var conflicts []*op
	for i, r := range results {
		o := ops[i]
		switch classify(o.action, r) {
		case outcomeDone:
			settled[o.key()] = max(settled[o.key()], o.pos)
			w.counted(o, r)
			w.remember(o, r)
		case outcomeConflict:
			conflicts = append(conflicts, o)
		case outcomeRetry:
			retry = append(retry, o)
		case outcomeMissingAlias:
			delete(w.aliases, o.index)
			retry = append(retry, o)
		case outcomePermanent:
			settled[o.key()] = max(settled[o.key()], o.pos)
			failed = append(failed, failure{op: o, err: r.errType + ": " + r.reason})
		}
	}
	if len(conflicts) > 0 {
		r, f, err := w.resolve(ctx, conflicts, settled)
		if err != nil {
			return nil, failed, err
		}
		retry = append(retry, r...)
		failed = append(failed, f...)
	}
	kept := retry[:0]
	for _, o := range retry {
		if s, ok := settled[o.key()]; ok && s > o.pos {
			w.metrics.superseded.Inc()
			continue
		}
		kept = append(kept, o)
	}
	slices.SortFunc(kept, func(a, b *op) int { return a.pos - b.pos })
	return slices.Clip(kept), failed, nil
}

// remember keeps the epoch of a delete written (o is the event's op, r what OpenSearch answered),
// for as long as its tombstone may refuse later ops; an index written forgets it.
func (w *writer) remember(o *op, r itemResult) {
	if o.action != actionDelete {
		w.tombs.forget(o.key())
		return
	}
	if r.errType != "" {
		return // the index is not there, so neither is a tombstone
	}
	v := r.version
	if v == 0 && o.versioned {
		v = o.version // not answered (never seen from OpenSearch 2.x): external_gte wrote this one
	}
	if v == 0 {
		return
	}
	w.tombs.add(o.key(), tombstone{epoch: o.epoch, rv: o.version, version: v})
}

func (w *writer) counted(o *op, r itemResult) {
	if o.action == actionDelete {
		w.metrics.deleted.WithLabelValues(o.index).Inc()
		return
	}
	w.metrics.written.WithLabelValues(o.index).Inc()
}

// resolve applies the epoch rule (DESIGN section 4) to ops refused with a version conflict. The
// stored document's epoch and resourceVersion are read: if the op's event is newer — a newer epoch
// whatever the resourceVersions say, or within the same epoch a higher resourceVersion than the
// stored document holds — the op replaces the document with a compare-and-set on its _seq_no;
// otherwise it is a replayed or late event, counted and dropped. A document not found was refused
// by a delete's tombstone: it is judged by the epoch and resourceVersion of that delete when the
// writer remembers it (tombstone.go), and a newer op is written at the tombstone's version, which
// external_gte lets pass it and nothing written since; a tombstone not remembered is taken for a
// newer delete, and the op for a replay.
//
// Why not "delete, then index with the event's version": the delete leaves a tombstone with the old,
// higher version for index.gc_deletes (60 s), and external_gte compares against it, so the index
// would be refused again. The compare-and-set write uses internal versioning instead; the document's
// _version then no longer follows its resourceVersion, so later events of the same object are refused
// too and come through here, until the member's resourceVersions pass the old ones.
//
// It returns the ops to retry (as they were, so a retry meets the version check again) and the ops
// OpenSearch refused for good.
func (w *writer) resolve(ctx context.Context, conflicts []*op, settled map[docKey]int) (retry []*op, failed []failure, err error) {
	// Per document only the newest refused op matters: it is the state to reach. Older ones, and ops
	// whose object has a later event written already, are replays.
	newest := map[docKey]*op{}
	var keys []docKey
	for _, o := range conflicts {
		k := o.key()
		if s, ok := settled[k]; ok && s > o.pos {
			w.metrics.conflicts.WithLabelValues(o.index, "replay").Inc()
			continue
		}
		cur, ok := newest[k]
		switch {
		case !ok:
			keys = append(keys, k)
			newest[k] = o
		case o.pos > cur.pos:
			w.metrics.conflicts.WithLabelValues(cur.index, "replay").Inc()
			newest[k] = o
		default:
			w.metrics.conflicts.WithLabelValues(o.index, "replay").Inc()
		}
	}
	if len(keys) == 0 {
		return nil, nil, nil
	}
	stored, err := w.docs.storedVersions(ctx, keys)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("read stored versions: %w", ctx.Err())
		}
		w.log.Warn("cannot read stored versions for version conflicts, retrying", "documents", len(keys), "err", err)
		for _, k := range keys {
			retry = append(retry, newest[k])
		}
		return retry, nil, nil
	}
	var cas []*op
	overTombstone := map[docKey]bool{}
	for _, k := range keys {
		o := newest[k]
		s := stored[k]
		ts, remembered := w.tombs.get(k)
		switch {
		case !s.found && remembered && o.newerThan(ts.epoch, ts.rv):
			// A delete of an older epoch, or older within the epoch (a compare-and-set delete leaves
			// a tombstone above its resourceVersion): the object came back, e.g. in the list of a
			// member restored from an etcd snapshot.
			c := *o
			c.versioned, c.version = true, max(ts.version, o.version)
			overTombstone[k] = true
			cas = append(cas, &c)
		case !s.found:
			// Refused by the tombstone of a newer delete: the object is gone, and stays gone.
			w.metrics.conflicts.WithLabelValues(o.index, "replay").Inc()
			settled[k] = max(settled[k], o.pos)
		case o.newerThan(s.epoch, s.rv) && s.hasSeqNo:
			cas = append(cas, o.casOf(s.seqNo, s.primaryTerm))
		case o.newerThan(s.epoch, s.rv):
			// No _seq_no in the answer (not seen from OpenSearch 2.x): overwrite unconditionally.
			c := *o
			c.versioned = false
			cas = append(cas, &c)
		default:
			w.metrics.conflicts.WithLabelValues(o.index, "replay").Inc()
			settled[k] = max(settled[k], o.pos)
		}
	}
	if len(cas) == 0 {
		return nil, nil, nil
	}
	results, err := w.docs.bulk(ctx, cas)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("overwrite %d older-epoch documents: %w", len(cas), ctx.Err())
		}
		w.log.Warn("cannot overwrite older documents, retrying", "documents", len(cas), "err", err)
		for _, c := range cas {
			retry = append(retry, newest[c.key()])
		}
		return retry, nil, nil
	}
	for i, r := range results {
		c := cas[i]
		orig := newest[c.key()]
		switch classify(c.action, r) {
		case outcomeDone:
			w.metrics.conflicts.WithLabelValues(c.index, "overwritten").Inc()
			w.counted(c, r)
			w.remember(orig, r)
			settled[c.key()] = max(settled[c.key()], c.pos)
			w.log.Debug("document or tombstone of an older epoch or resourceVersion overwritten", "index", c.index, "uid", c.id,
				"epoch", orig.epoch, "resourceVersion", orig.version, "tombstone", overTombstone[c.key()])
		case outcomePermanent:
			settled[c.key()] = max(settled[c.key()], c.pos)
			failed = append(failed, failure{op: orig, err: r.errType + ": " + r.reason})
		case outcomeConflict:
			// Changed meanwhile: the original op meets the version check again. Over a tombstone that
			// is not the one remembered (another writer deleted again, higher), whose epoch is
			// unknown, the retry judges the op a replay rather than trying again for ever.
			if overTombstone[c.key()] {
				w.tombs.forget(c.key())
			}
			retry = append(retry, orig)
		default:
			// Not taken now: the original op meets the version check again.
			retry = append(retry, orig)
		}
	}
	return retry, failed, nil
}

// split sends the halves of a request OpenSearch refused as a whole, down to the single op at fault.
func (w *writer) split(ctx context.Context, ops []*op, cause error) ([]failure, error) {
	if len(ops) == 1 {
		return []failure{{op: ops[0], err: cause.Error()}}, nil
	}
	mid := len(ops) / 2
	f1, err := w.write(ctx, ops[:mid])
	if err != nil {
		return f1, err
	}
	f2, err := w.write(ctx, ops[mid:])
	return append(f1, f2...), err
}

// ensureIndices makes every index the ops write to exist behind its alias, retrying until OpenSearch
// answers.
func (w *writer) ensureIndices(ctx context.Context, ops []*op, bo *wait.Backoff) error {
	for _, o := range ops {
		isAlias, known := w.aliases[o.index]
		for !known {
			st, err := w.docs.ensureIndex(ctx, o.index)
			if err == nil {
				isAlias, known = st.alias, true
				w.aliases[o.index] = isAlias
				switch {
				case !isAlias:
					w.log.Warn("a concrete index has the name of the alias (made since this indexer started, or its roll was aborted); writing to it. The next start rolls it behind an alias",
						"index", o.index)
				case !slices.Contains(st.behind, VersionedIndexName(o.index)):
					w.log.Warn("the alias points to indices of another mapping version (a newer indexer's, or a roll that was aborted at start); writing to its write index. Fields this version added are kept in _source but not searchable there",
						"index", o.index, "behind", st.behind, "want", VersionedIndexName(o.index))
				}
				break
			}
			if err := w.wait(ctx, bo, "cannot create index", 0, fmt.Errorf("%s: %w", o.index, err)); err != nil {
				return err
			}
		}
		o.requireAlias = isAlias
	}
	return nil
}

func (w *writer) wait(ctx context.Context, bo *wait.Backoff, msg string, n int, err error) error {
	delay := bo.Step()
	w.log.Warn(msg+", retrying", "operations", n, "retryIn", delay.Round(time.Millisecond), "err", err)
	if err := lifecycle.Sleep(ctx, delay); err != nil {
		return fmt.Errorf("%s, %d operations unwritten: %w", msg, n, err)
	}
	return nil
}
