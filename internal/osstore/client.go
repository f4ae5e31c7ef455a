package osstore

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/opensearch-project/opensearch-go/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidwall/gjson"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubesearch/kubesearch/internal/pagetoken"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/mappings"
)

// Options configure a Store.
type Options struct {
	// Addresses are OpenSearch node URLs; Security the credentials and TLS toward them, read from
	// their files by New. The query API and the indexer reach OpenSearch with the same options.
	Addresses []string
	Security  Security
	// RequestTimeout bounds one attempt of one request (0: only the caller's context does).
	RequestTimeout time.Duration
	// Index is the installation's index prefix ("" for kubernetes-<kind>) and the settings of the
	// indices Setup and Write create; a reader needs only the prefix.
	Index mappings.Options
	// TokenKey signs continue tokens. Replicas behind one load balancer need the same key. Empty
	// makes a random one: tokens then die with the process (the indexer issues none).
	TokenKey []byte
	// KeepAlive is how long a paged query's snapshot lives between two pages (0 means 5 minutes,
	// Kubernetes' usual continue-token lifetime under etcd's default compaction).
	KeepAlive time.Duration
	// Limits bound what one subject's searches hold: point-in-times between pages, searches by
	// fuzzy name running (store.Limits; zero fields are defaults).
	Limits store.Limits
	// Compression asks OpenSearch to gzip its answers: far fewer bytes on a slow link (a page of 100
	// Pods is about 730 KB, 35 KB gzipped), for OpenSearch's CPU compressing and this side's
	// inflating it. Off, answers come as they are, which is faster on loopback and in-cluster
	// networks.
	Compression bool
	// Registerer takes the metrics of the write path (the kubesearch_indexer_bulk_*, documents_* and
	// roll metrics); nil registers them nowhere.
	Registerer prometheus.Registerer
	// Reachable, when set, hears after every ping of Setup and every _bulk request of Write whether
	// OpenSearch answered; an error of its own (5xx) counts as no answer. It serves a readiness
	// probe.
	Reachable func(bool)
	Logger    *slog.Logger
}

// Store is one kubesearch installation's indices in OpenSearch: queries on them (the query API),
// and the writes, garbage collection, watermarks and setup of the indexer. It is safe for
// concurrent use; writes are applied one Write at a time.
type Store struct {
	client     *opensearch.Client
	guard      *nodeGuard
	index      mappings.Options
	pattern    string
	stateIndex string
	tokens     tokenCodec
	keepAlive  time.Duration
	compress   bool
	now        func() time.Time
	log        *slog.Logger
	metrics    *metrics

	// owner names this process in roll leases: host, pid and a random part.
	owner string

	writeMu sync.Mutex // one Write at a time: the writer's index cache and retry order are its own
	writer  *writer

	closing sync.WaitGroup // PITs closed after the answers that no longer need them

	// pits are the point-in-times this process opened for continue tokens, by subject; fuzzy
	// counts the searches by fuzzy name running (store.Limits).
	pits  *store.Snapshots[string]
	fuzzy *store.InFlight
}

// New reads the files the options name and returns a Store; every bad option or file is reported,
// each naming its flag. Nothing is sent to OpenSearch before the first call.
func New(o Options) (*Store, error) {
	var errs []error
	if len(o.Addresses) == 0 {
		errs = append(errs, errors.New("osstore: no OpenSearch addresses"))
	}
	cfg, err := o.Security.clientConfig(o.Addresses)
	errs = append(errs, err, o.Limits.Validate())
	key := o.TokenKey
	switch {
	case len(key) == 0:
		key = make([]byte, 32)
		_, _ = crand.Read(key) // crypto/rand.Read never fails (Go 1.24+)
	case len(key) < 16:
		errs = append(errs, errors.New("osstore: token key shorter than 16 bytes"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	// Callers retry with backoff themselves (the indexer) or leave it to their clients (the query
	// API); the transport only fails over between nodes.
	// A request to a node that does not answer fails over the same way (nodes.go).
	cfg.RetryOnStatus = []int{502, 503, 504}
	cfg.MaxRetries = 2
	cfg.RequestTimeout = o.RequestTimeout
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	tc, err := tlsConfig(cfg.CACert, cfg.InsecureSkipVerify)
	if err != nil {
		return nil, err
	}
	guard, err := newNodeGuard(o.Addresses, tc, log)
	if err != nil {
		return nil, err
	}
	cfg.Transport, cfg.CACert, cfg.InsecureSkipVerify = guard, nil, false
	client, err := opensearch.NewClient(cfg)
	if err != nil {
		guard.Close()
		return nil, fmt.Errorf("opensearch client: %w", err)
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		guard.Close()
		return nil, errors.Join(err, client.Close())
	}
	ka := o.KeepAlive
	if ka <= 0 {
		ka = 5 * time.Minute
	}
	host, _ := os.Hostname() // only a label: an empty one still leaves pid and random part
	s := &Store{
		client: client, guard: guard, index: o.Index, pattern: mappings.IndexBase(o.Index.Prefix) + "*",
		stateIndex: mappings.StateIndex(o.Index.Prefix), tokens: tokenCodec{pagetoken.New(key)}, keepAlive: ka, compress: o.Compression,
		now: time.Now, log: log, metrics: m, owner: fmt.Sprintf("%s/%d/%08x", host, os.Getpid(), rand.Uint32()),
		pits: store.NewSnapshots[string](o.Limits), fuzzy: store.NewInFlight(o.Limits.WithDefaults().FuzzySearchesPerSubject, "searches by fuzzyName"),
	}
	s.writer = newWriter(s, m, log)
	if o.Reachable != nil {
		s.writer.healthy = o.Reachable
	}
	return s, nil
}

// Close waits for the PITs being closed (each bounded by closePITTimeout), then releases the
// client's connections and ends the probes of silent nodes.
func (s *Store) Close() error {
	s.closing.Wait()
	err := s.client.Close()
	s.guard.Close()
	return err
}

// reachable tells Options.Reachable whether OpenSearch answered.
func (s *Store) reachable(ok bool) { s.writer.healthy(ok) }

// request is an opensearch.Request with a prepared path, query and body.
type request struct {
	path   string
	query  url.Values
	body   []byte
	ndjson bool // the body is _bulk's NDJSON, not one JSON value
}

func (r request) GetRequest(method string) (*http.Request, error) {
	u := r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		return nil, err
	}
	if r.body != nil {
		ct := "application/json"
		if r.ndjson {
			ct = "application/x-ndjson"
		}
		req.Header.Set("Content-Type", ct)
	}
	return req, nil
}

// do sends one request over the opensearch-go transport (node pool, TLS, basic auth) and returns
// the status and body of whatever answer came: what the callers do depends on them (a 404 on a
// delete is success, a 429 is retried, a 409 goes to the epoch rule). err is set only when no answer
// came: then it is ctx's error once ctx is done, else a *requestError of status 0 wrapping
// store.ErrUnavailable.
func (s *Store) do(ctx context.Context, method string, r request) (int, []byte, error) {
	req, err := r.GetRequest(method)
	var resp *http.Response
	if err == nil {
		if !s.compress {
			// Set, the header also keeps net/http from asking for gzip on its own.
			req.Header.Set("Accept-Encoding", "identity")
		}
		// Stream, not opensearch.Do: Do buffers the body with io.ReadAll before handing it over,
		// one more copy of every page of hits.
		resp, err = s.client.Stream(req.WithContext(ctx))
	}
	if resp == nil {
		if ctx.Err() != nil {
			return 0, nil, fmt.Errorf("%s %s: %w", method, r.path, ctx.Err())
		}
		if err == nil {
			err = errors.New("no response")
		}
		return 0, nil, &requestError{err: fmt.Errorf("%w: %s %s: %v", store.ErrUnavailable, method, r.path, err)}
	}
	defer resp.Body.Close()
	body, err := readBody(resp)
	if err != nil {
		return 0, nil, &requestError{err: fmt.Errorf("%w: %s %s: read response: %v", store.ErrUnavailable, method, r.path, err)}
	}
	return resp.StatusCode, body, nil
}

// readBody reads a response body into one buffer of its announced length: a page of 100 Pods is
// about 730 KB, which io.ReadAll would reach by a dozen copies. net/http holds the body to that
// length.
func readBody(resp *http.Response) ([]byte, error) {
	n := resp.ContentLength
	if n < 0 || n > maxPresize {
		return io.ReadAll(resp.Body)
	}
	buf := make([]byte, n)
	_, err := io.ReadFull(resp.Body, buf)
	return buf, err
}

// maxPresize bounds the buffer readBody allocates on a response's word.
const maxPresize = 64 << 20

// requestError is a request OpenSearch did not answer (status 0) or answered with an error. It wraps
// the store sentinel the answer is, if any: callers outside this package switch on those, this
// package's own retry rules on status and type.
type requestError struct {
	status int    // 0 when no answer came
	typ    string // error.type of the answer, its root cause's when it names one
	err    error
}

func (e *requestError) Error() string { return e.err.Error() }
func (e *requestError) Unwrap() error { return e.err }

// errTooManyPITs: OpenSearch refused another point-in-time; paging goes on without one.
var errTooManyPITs = errors.New("too many open point-in-time contexts")

// refusals are the error types of a request OpenSearch will not run as written. They are the
// request's fault whatever the HTTP status (too_many_nested_clauses comes with a 500 when the limit
// is met while rewriting, as a fuzzy word expands), so they are store.ErrRejected: a retry fails alike.
var refusals = map[string]bool{
	"too_many_clauses":           true, // one bool query, or the whole query, over indices.query.bool.max_clause_count
	"too_many_nested_clauses":    true, // the same, counted over the whole query (Lucene 9)
	"query_shard_exception":      true, // the query cannot be built for a shard ("failed to create query")
	"parsing_exception":          true,
	"x_content_parse_exception":  true,
	"illegal_argument_exception": true,
	"search_parse_exception":     true,
	"number_format_exception":    true,
	"too_many_buckets_exception": true, // aggregations over search.max_buckets
}

// responseError classifies an error answer by its error types, then by its status. It is the one
// place that turns OpenSearch's answers into store errors.
func responseError(method, path string, status int, body []byte) error {
	e := gjson.GetBytes(body, "error")
	cause := e
	if rc := e.Get("root_cause.0"); rc.Exists() {
		cause = rc
	}
	typ, reason := errorCause(cause)
	if typ == "" && reason == "" {
		reason = strings.TrimSpace(string(truncate(body, 512)))
	}
	msg := fmt.Sprintf("%s %s: %d %s: %s", method, path, status, typ, reason)
	var err error
	switch {
	case typ == "rejected_execution_exception" && strings.Contains(reason, "Point In Time"):
		err = fmt.Errorf("%w: %s", errTooManyPITs, msg)
	case typ == "search_context_missing_exception",
		// Only a point-in-time search names no index in its path: its snapshot's index was deleted
		// since (an index roll to a new mapping version deletes the old one).
		typ == "index_not_found_exception" && path == "/_search":
		err = fmt.Errorf("%w: the snapshot of this query is gone (%s); start again without continue", store.ErrExpired, reason)
	case refused(e):
		err = fmt.Errorf("%w: %s", store.ErrRejected, msg)
	case status == http.StatusTooManyRequests || status >= 500:
		err = fmt.Errorf("%w: %s", store.ErrUnavailable, msg)
	case status == http.StatusBadRequest:
		err = fmt.Errorf("%w: %s", store.ErrRejected, msg)
	default:
		err = errors.New(msg)
	}
	return &requestError{status: status, typ: typ, err: err}
}

// refused says whether an error cause (OpenSearch's ErrorCause) is a refusal of the request: its own
// type, a root cause's, or one in its chain of causes. A search_phase_execution_exception ("all
// shards failed") is one exactly when what failed the shards is.
func refused(cause gjson.Result) bool {
	for c := cause; c.Exists(); c = c.Get("caused_by") {
		if refusals[c.Get("type").Str] {
			return true
		}
	}
	for _, rc := range cause.Get("root_cause").Array() {
		if refused(rc) {
			return true
		}
	}
	return false
}

// shardFailure reports a search answered by some shards only: an incomplete list presented as whole
// (a shard relocating, an index deleted between resolving the pattern and searching it) is better
// refused and retried. Shards that refused the query (some do when others hold no documents to
// rewrite it on) would refuse it on every retry: that is store.ErrRejected.
func shardFailure(path string, resp []byte) error {
	sh := gjson.GetBytes(resp, "_shards")
	if sh.Get("failed").Int() == 0 {
		return nil
	}
	kind, status := store.ErrUnavailable, http.StatusServiceUnavailable
	for _, f := range sh.Get("failures").Array() {
		if refused(f.Get("reason")) {
			kind, status = store.ErrRejected, http.StatusBadRequest
		}
	}
	first := sh.Get("failures.0.reason")
	return &requestError{status: status, typ: first.Get("type").Str, err: fmt.Errorf("%w: POST %s: %d of %d shards failed: %s: %s", kind, path,
		sh.Get("failed").Int(), sh.Get("total").Int(), first.Get("type").Str, first.Get("reason").Str)}
}

// errorCause reads an OpenSearch error object (or string), with its first caused_by.
func errorCause(e gjson.Result) (typ, reason string) {
	if e.Type == gjson.String {
		return "", e.Str
	}
	typ, reason = e.Get("type").Str, e.Get("reason").Str
	if cb := e.Get("caused_by"); cb.Exists() {
		reason += " (caused by " + cb.Get("type").Str + ": " + cb.Get("reason").Str + ")"
	}
	return typ, reason
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// errorType is the error.type of an answer, for the answers a caller expects (a missing index).
func errorType(body []byte) string { return gjson.GetBytes(body, "error.type").Str }

// transient is the write path's rule: an answer (a whole request's or one item's) may succeed
// later, so it is retried with backoff instead of the event being dead-lettered. OpenSearch cannot
// take it now (429, 5xx), the credentials or permissions are wrong (401, 403: an operator fixes
// them, and a permissions slip must not discard events), or the index refuses writes for now
// (cluster_block_exception: a roll copies it, see roll.go, or the disk passed the flood stage).
func transient(status int, errType string) bool {
	return status == 429 || status >= 500 || status == 401 || status == 403 || errType == "cluster_block_exception"
}

// final marks err store.ErrRejected when OpenSearch answered it and, by the write path's rule, no
// retry can change the answer: the indexer then dead-letters the marker rather than stalling its
// partition. Other errors are left as they are, to be retried.
func final(err error) error {
	var re *requestError
	if err == nil || errors.Is(err, store.ErrRejected) || !errors.As(err, &re) || re.status < 400 || transient(re.status, re.typ) {
		return err
	}
	return fmt.Errorf("%w: %w", store.ErrRejected, err)
}

// splittable says a request was refused for its content (a body OpenSearch cannot parse, or one too
// large): sending its halves separately isolates the operation at fault.
func splittable(err error) bool {
	var re *requestError
	return errors.As(err, &re) && (re.status == 400 || re.status == 413)
}

// defaultBackoff is how long the store waits before retrying what OpenSearch could not take: from
// 200 ms up to 5 s, which is also how long a write may wait after OpenSearch is back (a node
// returned, a replica promoted).
func defaultBackoff() wait.Backoff {
	return wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.2, Cap: 5 * time.Second, Steps: 1 << 30}
}
