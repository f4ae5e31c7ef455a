package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kubesearch/kubesearch/internal/document"
	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/mappings"
)

// Step is one call of a case and its answer, normalized so that two backends' answers compare:
// items by identity, epoch and a hash of their canonical JSON; errors by store error class;
// continue tokens by presence (they are each backend's own).
type Step struct {
	Call       string              `json:"call"`
	Err        string              `json:"err,omitempty"`
	Items      []string            `json:"items,omitempty"`
	Total      *int64              `json:"total,omitempty"`
	LowerBound bool                `json:"lowerBound,omitempty"`
	Continue   bool                `json:"continue,omitempty"`
	Facets     []store.FacetResult `json:"facets,omitempty"`
	Versions   map[string]int64    `json:"versions,omitempty"`
	Value      any                 `json:"value,omitempty"`
}

// Item is one item of a search answer, read back.
type Item struct {
	Key   string // cluster/kind/namespace/name
	UID   string
	Epoch int64
	Hash  string // of the canonical JSON
	Raw   json.RawMessage
}

func (it Item) String() string {
	return fmt.Sprintf("%s uid=%.8s epoch=%d #%s", it.Key, it.UID, it.Epoch, it.Hash)
}

// Case is one case of the suite: it calls the backend through R, which records each call's answer
// for the comparison and checks the expectations.
type Case struct {
	Name string
	Run  func(r *R)
}

// R runs one case on one backend.
type R struct {
	t     *testing.T
	ctx   context.Context
	b     Backend
	c     *Corpus
	steps []Step
	// unordered records search items as a set (relevance order).
	unordered bool
}

// Run loads the corpus into b and runs every case on it, each as a subtest, checking each against
// its expectation; it returns every case's steps, for Compare.
func Run(t *testing.T, b Backend) map[string][]Step {
	t.Helper()
	return run(t, b, Cases())
}

// RunCase loads the corpus into b and runs the case of that name on it alone: for a backend's own
// unit tests of one rule of the contract.
func RunCase(t *testing.T, b Backend, name string) {
	t.Helper()
	i := slices.IndexFunc(Cases(), func(c Case) bool { return c.Name == name })
	if i < 0 {
		t.Fatalf("no case %q", name)
	}
	run(t, b, Cases()[i:i+1])
}

func run(t *testing.T, b Backend, cases []Case) map[string][]Step {
	t.Helper()
	c := NewCorpus()
	start := time.Now()
	r := &R{t: t, ctx: t.Context(), b: b, c: c}
	r.write(envelope.Added, c.Live()...)
	t.Logf("corpus of %d objects loaded in %s", len(c.Live()), time.Since(start).Round(time.Millisecond))
	out := map[string][]Step{}
	for _, cs := range cases {
		t.Run(cs.Name, func(t *testing.T) {
			r := &R{t: t, ctx: t.Context(), b: b, c: c}
			defer func() { out[cs.Name] = r.steps }()
			cs.Run(r)
		})
	}
	return out
}

// Compare runs the suite on every backend (Run), then fails every case whose answers differ
// between backends, showing both. One backend alone is held to the expectations only.
func Compare(t *testing.T, backends map[string]Backend) {
	t.Helper()
	names := make([]string, 0, len(backends))
	for n := range backends {
		names = append(names, n)
	}
	sort.Strings(names)
	// One after the other: side by side, the embedded store and the OpenSearch node compete for
	// the same few cores, and the whole takes longer.
	answers := map[string]map[string][]Step{}
	for _, n := range names {
		t.Run(n, func(t *testing.T) {
			start := time.Now()
			answers[n] = Run(t, backends[n])
			t.Logf("%d cases in %s", len(answers[n]), time.Since(start).Round(time.Millisecond))
		})
	}
	if len(names) < 2 {
		t.Logf("one backend (%s): held to the expectations only, nothing to compare", strings.Join(names, ""))
		return
	}
	t.Run("same answers", func(t *testing.T) {
		ref := names[0]
		for _, cs := range Cases() {
			for _, other := range names[1:] {
				if d := diffSteps(answers[ref][cs.Name], answers[other][cs.Name], ref, other); d != "" {
					t.Errorf("case %q: %s and %s differ:\n%s", cs.Name, ref, other, d)
				}
			}
		}
	})
}

// diffSteps describes the first difference between two backends' steps of one case, or "".
func diffSteps(a, b []Step, an, bn string) string {
	var diffs []string
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) {
			return strings.Join(diffs, "\n") + fmt.Sprintf("step %d: %s made %d calls, %s %d (a case that stopped early failed on one of them)", i, an, len(a), bn, len(b))
		}
		x, y := a[i], b[i]
		var out []string
		show := func(field string, p, q any) {
			pj, _ := json.Marshal(p)
			qj, _ := json.Marshal(q)
			if !bytes.Equal(pj, qj) {
				out = append(out, fmt.Sprintf("  %s:\n    %s: %s\n    %s: %s", field, an, clip(pj), bn, clip(qj)))
			}
		}
		show("error class", x.Err, y.Err)
		show("total", x.Total, y.Total)
		show("total is a lower bound", x.LowerBound, y.LowerBound)
		show("continue token issued", x.Continue, y.Continue)
		if !slices.Equal(x.Items, y.Items) {
			j := 0
			for j < len(x.Items) && j < len(y.Items) && x.Items[j] == y.Items[j] {
				j++
			}
			out = append(out, fmt.Sprintf("  items (%d and %d), first difference at %d:\n    %s: %s\n    %s: %s", len(x.Items), len(y.Items), j,
				an, clip([]byte(strings.Join(x.Items[min(j, len(x.Items)):min(j+3, len(x.Items))], " | "))),
				bn, clip([]byte(strings.Join(y.Items[min(j, len(y.Items)):min(j+3, len(y.Items))], " | ")))))
		}
		show("facets", x.Facets, y.Facets)
		show("versions", x.Versions, y.Versions)
		show("value", x.Value, y.Value)
		if len(out) > 0 {
			diffs = append(diffs, fmt.Sprintf("step %d (%s):\n%s", i, x.Call, strings.Join(out, "\n")))
			if len(diffs) == 4 {
				diffs = append(diffs, "(further steps not compared)")
				break
			}
		}
	}
	return strings.Join(diffs, "\n")
}

func clip(b []byte) string {
	if len(b) > 1200 {
		return string(b[:1200]) + "..."
	}
	return string(b)
}

// expect records an expectation failure.
func (r *R) expect(ok bool, format string, args ...any) bool {
	r.t.Helper()
	if !ok {
		r.t.Errorf("expectation: "+format, args...)
	}
	return ok
}

// record adds a step that is not a search.
func (r *R) record(call string, value any, err error) {
	// An empty list is no list: backends may answer either.
	if v := reflect.ValueOf(value); value != nil && (v.Kind() == reflect.Slice || v.Kind() == reflect.Map) && v.Len() == 0 {
		value = nil
	}
	r.steps = append(r.steps, Step{Call: call, Err: errClass(err), Value: value})
}

// noError fails the case when a call that must succeed did not.
func (r *R) noError(call string, err error) bool {
	r.t.Helper()
	return r.expect(err == nil, "%s: %v", call, err)
}

// write applies events of objs as the indexer would (Ops), refreshes, and makes them the corpus'
// state: ADDED and MODIFIED replace the object, DELETED removes it.
func (r *R) write(typ envelope.Type, objs ...*Object) {
	r.t.Helper()
	evs := make([]*envelope.Event, len(objs))
	for i, o := range objs {
		evs[i] = o.Event(typ)
	}
	ops, err := Ops(evs...)
	if err != nil {
		r.t.Fatalf("build ops: %v", err)
	}
	r.writeOps(ops)
	for i, o := range objs {
		if typ == envelope.Deleted {
			r.c.remove(func(x *Object) bool { return x.id() == o.id() })
			continue
		}
		o.setDoc(ops[i].Doc)
		r.c.put(o)
	}
}

// writeOps writes ops in batches as the indexer's (at most 500 ops or 8 MiB), expects every one to
// be accepted, and refreshes the kinds written.
func (r *R) writeOps(ops []store.Op) {
	r.t.Helper()
	kinds := map[string]bool{}
	for len(ops) > 0 {
		n, size := 0, 0
		for n < len(ops) && n < 500 && (n == 0 || size+len(ops[n].Doc) < 8<<20) {
			size += len(ops[n].Doc)
			kinds[ops[n].Kind] = true
			n++
		}
		failed, err := r.b.Write(r.ctx, ops[:n])
		if err != nil {
			r.t.Fatalf("write %d ops: %v", n, err)
		}
		if len(failed) > 0 {
			r.t.Fatalf("write %d ops: %d refused, first: %+v", n, len(failed), failed[0])
		}
		ops = ops[n:]
	}
	r.refresh(kinds)
}

func (r *R) refresh(kinds map[string]bool) {
	r.t.Helper()
	ks := make([]string, 0, len(kinds))
	for k := range kinds {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	if err := r.b.Refresh(r.ctx, ks...); err != nil {
		r.t.Fatalf("refresh %v: %v", ks, err)
	}
}

// params builds URL parameters from name, value pairs.
func params(kv ...string) url.Values {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Add(kv[i], kv[i+1])
	}
	return v
}

// parse builds the query as the REST search does.
func (r *R) parse(v url.Values) *query.Query {
	r.t.Helper()
	q, err := query.Parse(v, Now)
	if err != nil {
		r.t.Fatalf("query.Parse(%s): %v", v.Encode(), err)
	}
	return q
}

// search asks for one page and records the answer.
func (r *R) search(call string, q *query.Query) (*store.Result, []Item, error) {
	r.t.Helper()
	qc := *q
	res, err := r.b.Search(r.ctx, &qc)
	st := Step{Call: call, Err: errClass(err)}
	var items []Item
	if err == nil {
		items = r.items(res)
		for _, it := range items {
			st.Items = append(st.Items, it.String())
		}
		if r.unordered {
			// Relevance order is each engine's own scoring: the answers compare as sets.
			slices.Sort(st.Items)
		}
		total := res.Total
		st.Total, st.LowerBound, st.Continue = &total, res.TotalIsLowerBound, res.Continue != ""
		st.Facets, st.Versions = res.Facets, res.Versions
	}
	r.steps = append(r.steps, st)
	return res, items, err
}

func (r *R) items(res *store.Result) []Item {
	r.t.Helper()
	r.expect(len(res.Epochs) == len(res.Items), "%d epochs for %d items", len(res.Epochs), len(res.Items))
	out := make([]Item, len(res.Items))
	for i, raw := range res.Items {
		m := gjson.GetManyBytes(raw, "kind", "metadata.namespace", "metadata.name", "metadata.uid")
		cluster := gjson.GetBytes(raw, "metadata.annotations."+gjsonEscape(document.CachedFromClusterAnnotation)).Str
		out[i] = Item{Key: cluster + "/" + m[0].Str + "/" + m[1].Str + "/" + m[2].Str, UID: m[3].Str, Hash: canonicalHash(raw), Raw: raw}
		if i < len(res.Epochs) {
			out[i].Epoch = res.Epochs[i]
		}
	}
	return out
}

func gjsonEscape(s string) string {
	return strings.NewReplacer(".", `\.`, "*", `\*`, "?", `\?`).Replace(s)
}

// canonicalHash is a short hash of the JSON value with object keys sorted, so that two backends
// returning the same object in another key order compare equal.
func canonicalHash(raw []byte) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "invalid-json"
	}
	b, _ := json.Marshal(v) // decoded JSON: cannot fail
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:4])
}

// storedHash is the hash of the object as the store must return it (mappings.StoredObject of
// the document the builder made).
func (o *Object) storedHash() string {
	obj, err := mappings.StoredObject(o.doc)
	if err != nil {
		return "no-object"
	}
	return canonicalHash(obj)
}

// walk reads every page of q, recording each, and checks the paging contract: the same total on
// every page, full pages but the last, a token on every page but the last. It returns every item.
func (r *R) walk(call string, q *query.Query, maxPages int) ([]Item, *store.Result, error) {
	r.t.Helper()
	var (
		all   []Item
		first *store.Result
	)
	copied := *q
	q = &copied
	for page := 0; ; page++ {
		res, items, err := r.search(fmt.Sprintf("%s [page %d]", call, page), q)
		if err != nil {
			return all, first, err
		}
		if page == 0 {
			first = res
		} else {
			r.expect(res.Total == first.Total, "page %d: total %d, the first page said %d", page, res.Total, first.Total)
			r.expect(len(res.Facets) == 0 && len(res.Versions) == 0, "page %d: facets %v and versions %v; they come with the first page only",
				page, res.Facets, res.Versions)
		}
		all = append(all, items...)
		if res.Continue == "" {
			return all, first, nil
		}
		r.expect(len(items) == q.Limit, "page %d: %d items and a continue token, limit %d", page, len(items), q.Limit)
		if page+1 >= maxPages {
			r.expect(false, "more than %d pages", maxPages)
			r.b.Release(r.ctx, res.Continue)
			return all, first, nil
		}
		q.Continue = res.Continue
	}
}

// want is the live objects matching q, in q's order.
func (r *R) want(q *query.Query) []*Object {
	var out []*Object
	for _, o := range r.c.Live() {
		if o.Matches(q) {
			out = append(out, o)
		}
	}
	sortObjects(out, q)
	return out
}

// expectItems checks items against objects: the same objects (in order unless unordered), each
// exactly as stored, or only its apiVersion, kind and metadata when metadataOnly.
func (r *R) expectItems(items []Item, want []*Object, unordered, metadataOnly bool) {
	r.t.Helper()
	got := make([]string, len(items))
	for i, it := range items {
		got[i] = it.UID + " " + it.Key
	}
	exp := make([]string, len(want))
	for i, o := range want {
		exp[i] = o.UID + " " + o.Key()
	}
	if unordered {
		got, exp = slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(exp))
	}
	if !slices.Equal(got, exp) {
		j := 0
		for j < len(got) && j < len(exp) && got[j] == exp[j] {
			j++
		}
		r.t.Errorf("expectation: %d items, want %d; first difference at %d:\n got  %v\n want %v", len(got), len(exp), j,
			got[j:min(j+3, len(got))], exp[j:min(j+3, len(exp))])
		return
	}
	byKey := map[string]*Object{}
	for _, o := range want {
		byKey[o.UID+" "+o.Key()] = o
	}
	for _, it := range items {
		o := byKey[it.UID+" "+it.Key]
		if metadataOnly {
			stored, _ := mappings.StoredObject(o.doc)
			var keys []string
			gjson.ParseBytes(it.Raw).ForEach(func(k, _ gjson.Result) bool {
				keys = append(keys, k.Str)
				return true
			})
			slices.Sort(keys)
			r.expect(slices.Equal(keys, []string{"apiVersion", "kind", "metadata"}), "%s: metadataOnly item has members %v", it.Key, keys)
			r.expect(canonicalHash([]byte(gjson.GetBytes(it.Raw, "metadata").Raw)) == canonicalHash([]byte(gjson.GetBytes(stored, "metadata").Raw)),
				"%s: metadata differs from the stored object's", it.Key)
		} else {
			r.expect(it.Hash == o.storedHash(), "%s: the object differs from the stored one (hash %s, want %s)", it.Key, it.Hash, o.storedHash())
		}
		r.expect(it.Epoch == o.Epoch, "%s: epoch %d, want %d", it.Key, it.Epoch, o.Epoch)
	}
}
