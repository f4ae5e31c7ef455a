package osstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/lifecycle"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/mappings"
)

// A roll moves an alias to a new index when this build's mapping version is newer than the one its
// index was created with (DESIGN section 4). Readers search the pattern "<base>*", which reaches a
// concrete index both by its own name and through its alias, so a roll must never leave the old and
// the new index visible side by side, nor show a half-filled new index. Patterns skip hidden
// indices; aliases do not. A roll goes:
//
//  1. create the new index "<alias>-v<Version>" hidden;
//  2. block writes to the old indices, so nothing changes under the copy (an older indexer still
//     running retries its blocked writes; see classify), and refresh them;
//  3. copy every document, rebuilt by this build from the object it stores, with its _version,
//     under its id (store.DocID: a document of an older version's index may have another id);
//  4. hide the old indices too (still reached through the alias);
//  5. in one atomic _aliases request, move the alias from the old indices to the new one;
//  6. unhide the new index;
//  7. after every roll, wait retireGrace, then delete the old indices. Searches resolved to them
//     before the swap, and point-in-time pages, still find them meanwhile.
//
// A concrete index with the alias's own name (auto-created by an early write) cannot sit beside the
// alias: step 5 deletes it in the same atomic request, and a search in flight at that moment may see
// a shard failure.
//
// Rolls run before the indexer consumes, so its own writes wait in Kafka. A roll interrupted by a
// crash leaves the old index complete and blocked and the new one hidden; the next start copies
// again (a write of an equal version is idempotent) and finishes, and deletes old indices a crash
// left hidden and detached. A document the new mapping refuses aborts the roll: the new index is
// deleted, the old one unblocked and kept, and the error logged, as losing a document is worse than
// an unsearchable new field.

// retireGrace is how long old indices outlive their roll: longer than a search takes.
const retireGrace = 15 * time.Second

// rollPlan is one alias to move to this build's index.
type rollPlan struct {
	alias   string   // the name written to and searched
	target  string   // VersionedIndexName(alias)
	sources []string // the indices behind the alias, or the concrete index of the alias's name
	// legacy: sources is a concrete index named alias, which the swap replaces by the alias.
	legacy bool
}

// resolved is what GET _resolve/index says of the names under an installation's base.
type resolved struct {
	indices map[string]resolvedIndex
	aliases map[string][]string // alias → indices
}

type resolvedIndex struct {
	aliases []string
	hidden  bool
}

// rollWork is what planRolls finds to do.
type rollWork struct {
	rolls []rollPlan
	// unhide: current indices still hidden (a roll stopped between its swap and its unhide).
	unhide []string
	// retire: old indices a roll detached and a crash kept from deleting.
	retire []string
}

// planRolls decides from the indices and aliases under base what to roll, unhide and delete.
func planRolls(r resolved) rollWork {
	var w rollWork
	for alias, behind := range r.aliases {
		target := VersionedIndexName(alias)
		if slices.Contains(behind, target) {
			if r.indices[target].hidden {
				w.unhide = append(w.unhide, target)
			}
			continue
		}
		if slices.ContainsFunc(behind, func(ix string) bool { return versionOf(ix, alias) > mappings.Version }) {
			continue // a newer indexer's index: never rolled back
		}
		w.rolls = append(w.rolls, rollPlan{alias: alias, target: target, sources: slices.Sorted(slices.Values(behind))})
	}
	for name, ix := range r.indices {
		switch {
		case len(ix.aliases) > 0:
			// Handled above.
		case versioned(name):
			// An interrupted roll's target (rolled with its alias); an old index of a finished roll,
			// hidden and detached, to delete; or an index someone detached, left alone.
			alias := name[:strings.LastIndex(name, "-v")]
			if ix.hidden && versionOf(name, alias) < mappings.Version && slices.Contains(r.aliases[alias], VersionedIndexName(alias)) {
				w.retire = append(w.retire, name)
			}
		default:
			// A concrete index with an alias's name, auto-created by a write before the indexer
			// managed the name or made by hand.
			w.rolls = append(w.rolls, rollPlan{alias: name, target: VersionedIndexName(name), sources: []string{name}, legacy: true})
		}
	}
	slices.SortFunc(w.rolls, func(a, b rollPlan) int { return strings.Compare(a.alias, b.alias) })
	slices.Sort(w.unhide)
	slices.Sort(w.retire)
	return w
}

// versioned reports whether name ends in "-v<digits>", as indices behind aliases do. Kinds are
// Go-style identifiers, so no alias "<base><kind>" ends that way.
func versioned(name string) bool {
	i := strings.LastIndex(name, "-v")
	if i < 0 || i+2 == len(name) {
		return false
	}
	for _, c := range name[i+2:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// versionOf is the mapping version of index behind alias ("<alias>-v<N>"), or 0 when its name says
// none.
func versionOf(index, alias string) int {
	s, ok := strings.CutPrefix(index, alias+"-v")
	if !ok || !versioned(index) {
		return 0
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0
	}
	return n
}

// errRollAborted marks a roll given up for good: a document could not be rebuilt or was refused by
// the new mapping. Other errors (OpenSearch away) are retried.
var errRollAborted = errors.New("roll aborted")

// errRolledElsewhere: another indexer of this version, started at the same time (replicas of one
// Deployment are), finished the same roll first.
var errRolledElsewhere = errors.New("rolled by another indexer")

// rollIndices rolls every alias of the installation that needs it, one after the other, then
// deletes the old indices.
func (s *Store) rollIndices(ctx context.Context, o store.SetupOptions) error {
	r, err := s.resolve(ctx, s.pattern)
	if err != nil {
		return err
	}
	w := planRolls(r)
	for _, index := range w.unhide {
		if err := s.putSettings(ctx, []string{index}, `{"index.hidden":false}`); err != nil {
			return err
		}
	}
	retire := w.retire
	for _, p := range w.rolls {
		o.Step(fmt.Sprintf("rolling %s from %s to %s", p.alias, strings.Join(p.sources, ","), p.target))
		start := time.Now()
		n, err := s.roll(ctx, o, p)
		switch {
		case errors.Is(err, errRolledElsewhere):
			s.log.Info("index rolled by another indexer", "alias", p.alias, "to", p.target)
		case errors.Is(err, errRollAborted):
			// Keep indexing into the old index: its documents stay searchable, only what the new
			// mapping adds is not.
			s.log.Error("index roll aborted; still writing to the old index", "alias", p.alias, "from", p.sources, "to", p.target, "err", err)
		case err != nil:
			return fmt.Errorf("roll %s to %s: %w", p.alias, p.target, err)
		default:
			s.log.Info("index rolled to this mapping version", "alias", p.alias, "from", p.sources, "to", p.target,
				"documents", n, "took", time.Since(start).Round(time.Millisecond))
			if !p.legacy {
				retire = append(retire, p.sources...)
			}
		}
	}
	if len(retire) == 0 {
		return nil
	}
	if len(w.rolls) > 0 {
		o.Step(fmt.Sprintf("deleting the old indices %s in %s", strings.Join(retire, ","), retireGrace))
		if err := lifecycle.Sleep(ctx, retireGrace); err != nil {
			return err // deleted at the next start
		}
	}
	for _, index := range retire {
		if err := s.deleteIndex(ctx, index); err != nil {
			return err
		}
	}
	s.log.Info("old indices deleted", "indices", retire)
	return nil
}

// roll carries out one plan, holding its lease, and returns how many documents it copied.
func (s *Store) roll(ctx context.Context, o store.SetupOptions, p rollPlan) (int, error) {
	l, err := s.takeLease(ctx, o, p)
	if err != nil {
		return 0, err
	}
	defer func() {
		if err := l.release(context.WithoutCancel(ctx)); err != nil {
			s.log.Warn("cannot release the roll lease; it expires by itself", "alias", p.alias, "after", leaseTTL, "err", err)
		}
	}()
	// No periodic refresh while the copy runs (nobody searches the hidden index); one at the end.
	if err := s.createIndex(ctx, p.target, []byte(`{"settings":{"index.hidden":true,"index.refresh_interval":"-1"}}`)); err != nil {
		return 0, err
	}
	if err := s.putSettings(ctx, p.sources, `{"index.blocks.write":true}`); err != nil {
		return 0, err
	}
	// Writes acknowledged before the block become visible to the copy.
	if err := s.refresh(ctx, p.sources...); err != nil {
		return 0, err
	}
	n, err := s.copyDocuments(ctx, o, p, l)
	if errors.Is(err, errRollAborted) {
		// Undo, so the old index is written to again. If that fails (OpenSearch away), the error is
		// not an abort: setup retries, rolls again and undoes again, rather than consuming into a
		// blocked index.
		if uerr := errors.Join(s.deleteIndex(ctx, p.target), s.putSettings(ctx, p.sources, `{"index.blocks.write":null}`)); uerr != nil {
			return n, fmt.Errorf("%v; undoing it failed: %w", err, uerr)
		}
		return n, err
	}
	if err != nil {
		return n, err
	}
	refresh, err := json.Marshal(map[string]string{"index.refresh_interval": s.index.RefreshIntervalSetting()})
	if err != nil {
		return n, err
	}
	if err := s.putSettings(ctx, []string{p.target}, string(refresh)); err != nil {
		return n, err
	}
	if err := s.refresh(ctx, p.target); err != nil {
		return n, err
	}
	if !p.legacy {
		// Hidden, the old indices drop out of every pattern the moment the alias leaves them.
		if err := s.putSettings(ctx, p.sources, `{"index.hidden":true}`); err != nil {
			return n, err
		}
	}
	if err := s.swap(ctx, p); err != nil {
		return n, err
	}
	return n, s.putSettings(ctx, []string{p.target}, `{"index.hidden":false}`)
}

// copyDocuments scrolls through the sources and writes every document, rebuilt, to the target with
// its _version (external_gte: a document copied twice is written twice, the same).
func (s *Store) copyDocuments(ctx context.Context, o store.SetupOptions, p rollPlan, l *lease) (int, error) {
	avg, err := s.averageDocBytes(ctx, p.sources)
	if err != nil {
		return 0, err
	}
	body := fmt.Sprintf(`{"size":%d,"sort":["_doc"],"version":true}`, rollPageSize(o.BatchSize, o.BatchBytes, avg))
	page, err := s.scroll(ctx, p.sources, body, "")
	if err != nil {
		return 0, err
	}
	scrollID := page.id
	defer func() {
		if scrollID != "" {
			// Best effort: an abandoned scroll expires by itself.
			s.clearScroll(context.WithoutCancel(ctx), scrollID)
		}
	}()
	copied := 0
	for len(page.hits) > 0 {
		ops := make([]*op, 0, len(page.hits))
		size := 0
		for _, h := range page.hits {
			doc, err := document.Rebuild([]byte(h.Get("_source").Raw))
			if err != nil {
				return copied, fmt.Errorf("%w: %s/%s: %v", errRollAborted, h.Get("_index").Str, h.Get("_id").Str, err)
			}
			ops = append(ops, &op{pos: len(ops), action: actionIndex, index: p.target, id: rolledID(h), doc: doc,
				versioned: true, version: h.Get("_version").Int()})
			size += len(doc)
			if size >= o.BatchBytes {
				if err := s.copyBulk(ctx, p, l, ops); err != nil {
					return copied, err
				}
				copied += len(ops)
				ops, size = ops[:0], 0
			}
		}
		if err := s.copyBulk(ctx, p, l, ops); err != nil {
			return copied, err
		}
		copied += len(ops)
		s.metrics.rollCopied.WithLabelValues(p.alias).Add(float64(len(page.hits)))
		if page, err = s.scroll(ctx, nil, "", scrollID); err != nil {
			return copied, err
		}
		scrollID = cmp.Or(page.id, scrollID)
	}
	return copied, nil
}

// rolledID is the _id of a copied document in the new index: store.DocID of its cluster and uid.
// Indices of mapping version 1 kept documents under the uid alone, so a member registered under two
// names overwrote its own documents (issue 23 item 5); the roll to version 2 re-keys them. A
// document that lacks either field keeps its _id.
func rolledID(h gjson.Result) string {
	src := h.Get("_source")
	cluster, uid := src.Get(document.FieldCluster).Str, src.Get(document.FieldUID).Str
	if cluster == "" || uid == "" {
		return h.Get("_id").Str
	}
	return store.DocID(cluster, uid)
}

// takeLease waits until this indexer holds the roll lease of p, or until the alias has moved to the
// target (another indexer rolled it: errRolledElsewhere).
func (s *Store) takeLease(ctx context.Context, o store.SetupOptions, p rollPlan) (*lease, error) {
	for {
		l, holder, err := s.acquireLease(ctx, s.stateIndex, p.alias, p.target, s.owner, time.Now)
		if err != nil {
			return nil, fmt.Errorf("roll lease: %w", err)
		}
		live, err := s.aliasIncludes(ctx, p.alias, p.target)
		if err != nil {
			return nil, err
		}
		switch {
		case live && l != nil:
			// Rolled while this indexer planned; the lease was free again.
			return nil, errors.Join(errRolledElsewhere, l.release(ctx))
		case live:
			return nil, errRolledElsewhere
		case l != nil:
			return l, nil
		}
		o.Step(fmt.Sprintf("waiting for %s, which rolls %s to %s", holder, p.alias, p.target))
		if err := lifecycle.Sleep(ctx, leaseWait); err != nil {
			return nil, err
		}
	}
}

// rollPageSize is how many documents a scroll page of a roll holds: what fits BatchBytes at the
// index's average document size, so an index of 1 MiB ConfigMaps is not read a thousand at a time;
// between 10 and BatchSize.
func rollPageSize(batchSize, batchBytes int, avgDocBytes int64) int {
	if avgDocBytes <= 0 {
		return batchSize
	}
	return int(max(10, min(int64(batchSize), int64(batchBytes)/avgDocBytes)))
}

// copyBulk writes ops to the roll's target, retrying what OpenSearch cannot take now.
//
// Before each request it renews the lease: a copier that stalled past leaseTTL finds it taken and
// stops (errLeaseLost), so only the holder ever writes to the target, and never after its swap made
// the target live (a copied document deleted there since would come back).
func (s *Store) copyBulk(ctx context.Context, p rollPlan, l *lease, ops []*op) error {
	bo := defaultBackoff()
	for len(ops) > 0 {
		if err := l.renew(ctx, p.target); err != nil {
			return err
		}
		results, err := s.bulk(ctx, ops)
		var retry []*op
		if err != nil {
			if ctx.Err() != nil || splittable(err) {
				return err
			}
			retry = ops
		} else {
			for i, r := range results {
				switch classify(actionIndex, r) {
				case outcomeDone, outcomeConflict:
					// A conflict: the target holds this document at a newer version already.
				case outcomeRetry:
					retry = append(retry, ops[i])
				default:
					return fmt.Errorf("%w: document %s refused by %s: %s: %s", errRollAborted, ops[i].id, ops[i].index, r.errType, r.reason)
				}
			}
		}
		if len(retry) == 0 {
			return nil
		}
		ops = retry
		delay := bo.Step()
		s.log.Warn("OpenSearch could not take every copied document, retrying", "operations", len(ops), "retryIn", delay.Round(time.Millisecond), "err", err)
		if err := lifecycle.Sleep(ctx, delay); err != nil {
			return err
		}
	}
	return nil
}

// resolve lists the indices and aliases matching pattern, hidden ones included.
func (s *Store) resolve(ctx context.Context, pattern string) (resolved, error) {
	path := "/_resolve/index/" + url.PathEscape(pattern)
	status, body, err := s.do(ctx, http.MethodGet, request{path: path, query: url.Values{"expand_wildcards": {"all"}}})
	if err != nil {
		return resolved{}, err
	}
	if status != http.StatusOK {
		return resolved{}, responseError("GET", path, status, body)
	}
	r := resolved{indices: map[string]resolvedIndex{}, aliases: map[string][]string{}}
	res := gjson.ParseBytes(body)
	for _, ix := range res.Get("indices").Array() {
		var ri resolvedIndex
		for _, a := range ix.Get("aliases").Array() {
			ri.aliases = append(ri.aliases, a.Str)
		}
		for _, a := range ix.Get("attributes").Array() {
			ri.hidden = ri.hidden || a.Str == "hidden"
		}
		r.indices[ix.Get("name").Str] = ri
	}
	for _, a := range res.Get("aliases").Array() {
		var behind []string
		for _, ix := range a.Get("indices").Array() {
			behind = append(behind, ix.Str)
		}
		r.aliases[a.Get("name").Str] = behind
	}
	return r, nil
}

// aliasIncludes reports whether alias points to index.
func (s *Store) aliasIncludes(ctx context.Context, alias, index string) (bool, error) {
	path := "/_alias/" + url.PathEscape(alias)
	status, body, err := s.do(ctx, http.MethodGet, request{path: path, query: url.Values{"expand_wildcards": {"all"}}})
	if err != nil {
		return false, err
	}
	switch {
	case status == http.StatusOK:
		return gjson.GetBytes(body, gjson.Escape(index)).Exists(), nil
	case status == http.StatusNotFound:
		return false, nil
	}
	return false, responseError("GET", path, status, body)
}

// averageDocBytes is the primaries' store size per document of indices (0 when they are empty): a
// rough measure of a document's _source, which dominates the store of these indices.
func (s *Store) averageDocBytes(ctx context.Context, indices []string) (int64, error) {
	path := "/" + url.PathEscape(strings.Join(indices, ",")) + "/_stats/docs,store"
	status, body, err := s.do(ctx, http.MethodGet, request{path: path, query: url.Values{"expand_wildcards": {"all"}}})
	if err != nil {
		return 0, err
	}
	if status != http.StatusOK {
		return 0, responseError("GET", path, status, body)
	}
	p := gjson.GetBytes(body, "_all.primaries")
	docs := p.Get("docs.count").Int()
	if docs == 0 {
		return 0, nil
	}
	return p.Get("store.size_in_bytes").Int() / docs, nil
}

// putSettings updates dynamic settings of indices (hidden ones included).
func (s *Store) putSettings(ctx context.Context, indices []string, settings string) error {
	path := "/" + url.PathEscape(strings.Join(indices, ",")) + "/_settings"
	status, body, err := s.do(ctx, http.MethodPut, request{path: path, query: url.Values{"expand_wildcards": {"all"}}, body: []byte(settings)})
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return responseError("PUT", path, status, body)
	}
	return nil
}

// deleteIndex deletes one index; one that is gone already is fine.
func (s *Store) deleteIndex(ctx context.Context, index string) error {
	path := "/" + url.PathEscape(index)
	status, body, err := s.do(ctx, http.MethodDelete, request{path: path})
	if err != nil {
		return err
	}
	if status != http.StatusOK && errorType(body) != "index_not_found_exception" {
		return responseError("DELETE", path, status, body)
	}
	return nil
}

// swap moves the alias from the sources to the target, its write index, atomically. A legacy source
// (a concrete index of the alias's name) is deleted in the same request, to make room for the alias.
func (s *Store) swap(ctx context.Context, p rollPlan) error {
	actions := []map[string]any{{"add": map[string]any{"index": p.target, "alias": p.alias, "is_write_index": true}}}
	for _, s := range p.sources {
		if p.legacy {
			actions = append(actions, map[string]any{"remove_index": map[string]any{"index": s}})
		} else {
			actions = append(actions, map[string]any{"remove": map[string]any{"index": s, "alias": p.alias}})
		}
	}
	return s.aliasActions(ctx, actions...)
}

// scrollPage is one page of a scroll.
type scrollPage struct {
	id   string
	hits []gjson.Result
}

// scroll opens a scroll over indices with body when id is empty, or reads its next page.
func (s *Store) scroll(ctx context.Context, indices []string, body, id string) (scrollPage, error) {
	const keepAlive = "5m"
	req := request{path: "/_search/scroll", body: []byte(`{"scroll":"` + keepAlive + `","scroll_id":` + strconv.Quote(id) + `}`)}
	if id == "" {
		req = request{path: "/" + url.PathEscape(strings.Join(indices, ",")) + "/_search",
			query: url.Values{"scroll": {keepAlive}, "expand_wildcards": {"all"}}, body: []byte(body)}
	}
	status, resp, err := s.do(ctx, http.MethodPost, req)
	if err != nil {
		return scrollPage{}, err
	}
	if status != http.StatusOK {
		return scrollPage{}, responseError("POST", req.path, status, resp)
	}
	r := gjson.ParseBytes(resp)
	if f := r.Get("_shards.failed").Int(); f > 0 {
		return scrollPage{}, &requestError{status: 503, err: fmt.Errorf("%w: POST %s: %d shards failed: %s", store.ErrUnavailable, req.path, f, truncate([]byte(r.Get("_shards.failures").Raw), 512))}
	}
	return scrollPage{id: r.Get("_scroll_id").Str, hits: r.Get("hits.hits").Array()}, nil
}

func (s *Store) clearScroll(ctx context.Context, id string) {
	_, _, _ = s.do(ctx, http.MethodDelete, request{path: "/_search/scroll", body: []byte(`{"scroll_id":` + strconv.Quote(id) + `}`)})
}
