package queryapi

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/registry"
	"github.com/kubesearch/kubesearch/internal/secrets"
	"github.com/kubesearch/kubesearch/internal/store"
)

// PairStatus is the state of one resource of one member cluster: how collection goes (from the
// collectors' /status) and how far the index is (from the indexers' watermarks).
type PairStatus struct {
	Cluster  string `json:"cluster"`
	Group    string `json:"group"`
	Resource string `json:"resource"`
	Kind     string `json:"kind,omitempty"`
	// State is the collection state: Running, Failed, or Unknown when no collector reports the pair.
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	// LastList is when the last completed list started (the epoch of the watermark).
	LastList *time.Time `json:"lastList,omitempty"`
	// Listing is true while a list is being indexed, or before the first one completed: the index
	// misses objects meanwhile.
	Listing bool `json:"listing"`
	// IndexedResourceVersion is the watermark: every event up to it is searchable.
	IndexedResourceVersion int64 `json:"indexedResourceVersion"`
	// CollectedResourceVersion is the newest the collectors published (lowest over scopes).
	CollectedResourceVersion int64 `json:"collectedResourceVersion,omitempty"`
	// LagSeconds is how long the index has been behind the collectors for this pair: 0 when caught
	// up, absent when no collector reports it. Measured to within the poll interval.
	LagSeconds *float64 `json:"lagSeconds,omitempty"`
	// Documents is the number of indexed objects (fleet status only).
	Documents *int64 `json:"documents,omitempty"`
}

// ClusterFreshness summarises, for one cluster a search covered, the pairs it covered.
type ClusterFreshness struct {
	Name       string   `json:"name"`
	State      string   `json:"state"`
	Reason     string   `json:"reason,omitempty"`
	Listing    bool     `json:"listing"`
	LagSeconds *float64 `json:"lagSeconds,omitempty"`
}

type scopeKey struct {
	store.Pair
	namespace string
}

// fleet polls the watermarks and the collectors' /status, and answers freshness from the last poll.
type fleet struct {
	readWatermarks func(context.Context) ([]store.Watermark, error)
	collectors     []string
	client         *http.Client
	tokenFile      string // the bearer token for the collectors' /status; "" sends none
	// lookup resolves the name of a dns+ URL (net.DefaultResolver's when nil); clients are the
	// status clients per name of such a URL (clientFor).
	lookup     func(ctx context.Context, host string) ([]string, error)
	clientsMu  sync.Mutex
	clients    map[string]*http.Client
	interval   time.Duration
	staleAfter time.Duration
	log        *slog.Logger
	now        func() time.Time

	mu           sync.Mutex
	polled       bool
	watermarks   map[store.Pair]store.Watermark
	wmErr        error
	rows         map[scopeKey][]registry.ResourceStatus
	scopesOf     map[store.Pair][]scopeKey // the keys of rows, by pair
	collErrs     map[string]error
	behindSince  map[scopeKey]time.Time
	collectorRVs map[scopeKey]int64
}

func (f *fleet) run(ctx context.Context) {
	t := time.NewTicker(f.interval)
	defer t.Stop()
	for {
		f.poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// poll reads both sources once. A source that fails keeps its last good data, and the failure is
// reported with every answer until it succeeds again.
func (f *fleet) poll(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, max(f.interval, 5*time.Second))
	defer cancel()
	wms, wmErr := f.readWatermarks(ctx)
	rows := map[scopeKey][]registry.ResourceStatus{}
	collErrs := map[string]error{}
	answered := 0
	for _, t := range f.statusTargets(ctx, collErrs) {
		rs, err := f.collectorStatus(ctx, t)
		if err != nil {
			if collErrs[t.configured] == nil { // the first failure of a configured URL says it
				collErrs[t.configured] = err
			}
			continue
		}
		answered++
		for _, r := range rs {
			k := scopeKey{r.Pair(), r.Namespace}
			rows[k] = append(rows[k], r)
		}
	}
	now := f.now()

	f.mu.Lock()
	defer f.mu.Unlock()
	f.polled = true
	f.wmErr = wmErr
	if wmErr == nil {
		f.watermarks = map[store.Pair]store.Watermark{}
		for _, w := range wms {
			f.watermarks[w.Pair()] = w
		}
	} else {
		f.log.Warn("read watermarks", "err", wmErr)
	}
	for u, err := range collErrs {
		f.log.Warn("read collector status", "url", u, "err", err)
	}
	f.collErrs = collErrs
	if answered > 0 || len(f.collectors) == 0 {
		f.rows = rows
		f.scopesOf = map[store.Pair][]scopeKey{}
		for k := range rows {
			f.scopesOf[k.Pair] = append(f.scopesOf[k.Pair], k)
		}
	}
	// behindSince remembers when a scope was first seen behind: the index then misses an event
	// published at or before the collector's publish time of that poll.
	behind := map[scopeKey]time.Time{}
	rvs := map[scopeKey]int64{}
	for k, rs := range f.rows {
		collected := lowestRV(rs)
		rvs[k] = collected
		if collected <= f.indexedRV(k) {
			continue
		}
		since, ok := f.behindSince[k]
		if !ok {
			since = now
			for _, r := range rs {
				if r.PublishedAt != nil && r.PublishedAt.Before(since) {
					since = *r.PublishedAt
				}
			}
		}
		behind[k] = since
	}
	f.behindSince, f.collectorRVs = behind, rvs
}

func lowestRV(rs []registry.ResourceStatus) int64 {
	var low int64
	for i, r := range rs {
		rv, _ := strconv.ParseInt(r.ResourceVersion, 10, 64)
		if i == 0 || rv < low {
			low = rv
		}
	}
	return low
}

// indexedRV is the watermark of a scope: its own, or the cluster-wide scope's.
func (f *fleet) indexedRV(k scopeKey) int64 {
	w, ok := f.watermarks[k.Pair]
	if !ok {
		return 0
	}
	for _, s := range w.Scopes {
		if s.Namespace == k.namespace || s.Namespace == "" {
			return s.ResourceVersion
		}
	}
	return 0
}

// statusTarget is one /status to read at a poll: a configured URL, or one address of a dns+ URL.
type statusTarget struct {
	configured string // as --collector-status-urls names it
	url        string // what is requested
	host       string // for an address of a dns+ URL, the name (host:port) sent as Host and checked by TLS
}

// dnsPrefix marks a /status URL whose host names every replica of a collector (a headless
// Service): each replica reports only the members it holds (collector --lease), so the query API
// reads every address the name resolves to, at each poll, where a plain URL would reach one
// replica at random and show half the members.
const dnsPrefix = "dns+"

// statusTargets expands the configured URLs for this poll; a dns+ URL whose name does not resolve
// is an error in errs.
func (f *fleet) statusTargets(ctx context.Context, errs map[string]error) []statusTarget {
	var out []statusTarget
	for _, c := range f.collectors {
		raw, isDNS := strings.CutPrefix(c, dnsPrefix)
		if !isDNS {
			out = append(out, statusTarget{configured: c, url: c})
			continue
		}
		u, err := url.Parse(raw)
		if err != nil {
			errs[c] = fmt.Errorf("not a URL: %w", err)
			continue
		}
		lookup := f.lookup
		if lookup == nil {
			lookup = net.DefaultResolver.LookupHost
		}
		addrs, err := lookup(ctx, u.Hostname())
		if err != nil {
			errs[c] = fmt.Errorf("resolve the collector replicas: %w", err)
			continue
		}
		slices.Sort(addrs)
		for _, a := range addrs {
			each := *u
			each.Host = net.JoinHostPort(a, u.Port())
			if u.Port() == "" {
				each.Host = a
				if strings.Contains(a, ":") {
					each.Host = "[" + a + "]"
				}
			}
			out = append(out, statusTarget{configured: c, url: each.String(), host: u.Host})
		}
	}
	return out
}

func (f *fleet) collectorStatus(ctx context.Context, t statusTarget) ([]registry.ResourceStatus, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.url, nil)
	if err != nil {
		return nil, err
	}
	client := f.client
	if t.host != "" {
		req.Host = t.host
		client = f.clientFor(t.host)
	}
	if f.tokenFile != "" {
		// Read at every poll: a rotated token (a Secret's update) needs no restart.
		token, err := secrets.ReadValue(f.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--collector-status-token-file: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", t.url, resp.Status)
	}
	var status struct {
		Items []registry.ResourceStatus `json:"items"`
	}
	if err := json.Unmarshal(body, &status); err != nil {
		return nil, fmt.Errorf("GET %s: %w", t.url, err)
	}
	return status.Items, nil
}

// clientFor is the status client for an address of a dns+ URL: HTTPS checks the certificate against
// the name, not the address dialled.
func (f *fleet) clientFor(hostport string) *http.Client {
	t, ok := f.client.Transport.(*http.Transport)
	if !ok {
		t = http.DefaultTransport.(*http.Transport)
	}
	f.clientsMu.Lock()
	defer f.clientsMu.Unlock()
	if c := f.clients[hostport]; c != nil {
		return c
	}
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	t = t.Clone()
	if t.TLSClientConfig == nil {
		t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	t.TLSClientConfig.ServerName = host
	c := &http.Client{Timeout: f.client.Timeout, Transport: t}
	if f.clients == nil {
		f.clients = map[string]*http.Client{}
	}
	f.clients[hostport] = c
	return c
}

// newStatusClient is the client of the collectors' /status: it trusts the CAs of caFile for
// collectors serving HTTPS, and checks that the token file can be read now, rather than at the
// first poll.
func newStatusClient(tokenFile, caFile string) (*http.Client, error) {
	var errs []error
	if tokenFile != "" {
		if _, err := secrets.ReadValue(tokenFile); err != nil {
			errs = append(errs, fmt.Errorf("--collector-status-token-file: %w", err))
		}
	}
	client := &http.Client{Timeout: 5 * time.Second}
	if caFile != "" {
		data, err := secrets.ReadPEM(caFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("--collector-status-ca-file: %w", err))
		} else {
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(data) // ReadPEM checked it holds a certificate
			t := http.DefaultTransport.(*http.Transport).Clone()
			t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
			client.Transport = t
		}
	}
	return client, errors.Join(errs...)
}

// watermark is the resourceVersion up to which every event of a pair is searchable, from the last
// poll; false when the index holds nothing of the pair.
func (f *fleet) watermark(p store.Pair) (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w, ok := f.watermarks[p]
	return w.ResourceVersion, ok
}

// listing says whether a pair is being (re-)listed, by its watermark; a pair without one is.
func (f *fleet) listing(p store.Pair) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	w, ok := f.watermarks[p]
	return !ok || w.Listing
}

// ready says whether the watermarks were read once: OpenSearch answers and the state is known.
func (f *fleet) ready() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case !f.polled:
		return fmt.Errorf("index progress not read yet")
	case f.watermarks == nil:
		// /readyz answers without credentials: the reason (an OpenSearch error, its address) is
		// in the log of each poll, not in the answer.
		return errors.New("index progress unreadable (the query API's log says why)")
	}
	return nil
}

// pairs returns the status of every pair known from either source, ordered, as a subject of scope
// (nil: everything) may see it (see pair).
func (f *fleet) pairs(scope *query.Scope) []PairStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	keys := map[store.Pair]bool{}
	for k := range f.watermarks {
		keys[k] = true
	}
	for k := range f.rows {
		keys[k.Pair] = true
	}
	now := f.now()
	var out []PairStatus
	for _, k := range slices.SortedFunc(maps.Keys(keys), comparePairs) {
		out = append(out, f.pair(k, now, scope))
	}
	return out
}

func comparePairs(a, b store.Pair) int {
	return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.Group, b.Group), cmp.Compare(a.Resource, b.Resource))
}

// pair is called with f.mu held. A pair's collection is one cluster-wide selection or several of
// one namespace each: a subject sees the state, reason and lag of the namespaces scope lets it
// see; of a cluster-wide one, the state and lag (its objects are stale or not), and the reason
// only when scope lets it see the pair in every namespace — a member's error text may name
// namespaces and objects it may not see.
func (f *fleet) pair(k store.Pair, now time.Time, scope *query.Scope) PairStatus {
	p := PairStatus{Cluster: k.Cluster, Group: k.Group, Resource: k.Resource, State: registry.StateUnknown}
	if w, ok := f.watermarks[k]; ok {
		p.Kind, p.Listing, p.IndexedResourceVersion = w.Kind, w.Listing, w.ResourceVersion
		if w.Epoch > 0 {
			t := time.UnixMicro(w.Epoch).UTC()
			p.LastList = &t
		}
	} else {
		p.Listing = true // collected, nothing indexed yet
	}
	reported := false
	for _, sk := range f.scopesOf[k] {
		if sk.namespace != "" && !scope.Allows(k.Cluster, sk.namespace, k.Group, k.Resource) {
			continue
		}
		rs := f.rows[sk]
		if !reported || f.collectorRVs[sk] < p.CollectedResourceVersion {
			p.CollectedResourceVersion = f.collectorRVs[sk]
		}
		for _, r := range rs {
			if p.Kind == "" {
				p.Kind = r.Kind
			}
			if !reported || stateRank(r.State) > stateRank(p.State) {
				p.State, p.Reason = r.State, r.Reason
				if sk.namespace == "" && r.Reason != "" && !scope.AllowsWholePair(k.Cluster, k.Group, k.Resource) {
					p.Reason = "(withheld: the collection covers namespaces you may not see)"
				}
			}
			reported = true
		}
		lag := 0.0
		if since, ok := f.behindSince[sk]; ok {
			lag = now.Sub(since).Seconds()
		}
		if p.LagSeconds == nil || lag > *p.LagSeconds {
			p.LagSeconds = &lag
		}
	}
	return p
}

func stateRank(s string) int {
	switch s {
	case registry.StateRunning:
		return 0
	case registry.StateUnknown:
		return 1
	}
	return 2 // Failed
}

// covers says whether a query reads a pair.
func covers(q *query.Query, k PairStatus) bool {
	if len(q.Clusters) > 0 && !slices.Contains(q.Clusters, k.Cluster) || !q.Scope.AllowsPair(k.Cluster, k.Group, k.Resource) {
		return false
	}
	if len(q.Resources) == 0 {
		return true
	}
	return slices.ContainsFunc(q.Resources, func(r query.Resource) bool {
		return r.Resource == k.Resource && (r.AnyGroup || r.Group == k.Group)
	})
}

// freshness answers, for the clusters a query covers, their state, and the warnings a partial or
// stale answer carries.
func (f *fleet) freshness(q *query.Query) ([]ClusterFreshness, []string) {
	pairs := f.pairs(q.Scope)
	f.mu.Lock()
	wmErr, collErrs := f.wmErr, maps.Clone(f.collErrs)
	hasCollectors := len(f.collectors) > 0
	f.mu.Unlock()

	var warnings []string
	if wmErr != nil {
		// The error may name a pair (a watermark document): only a subject that sees every pair
		// gets it.
		if q.Scope == nil {
			warnings = append(warnings, fmt.Sprintf("index progress unknown (watermarks unreadable: %v)", wmErr))
		} else {
			warnings = append(warnings, "index progress unknown (watermarks unreadable)")
		}
	}
	// A collector's address and error may name members: only a subject that sees every pair is
	// told. Another sees the pairs that collector reported turn Unknown, its own ones only.
	if q.Scope == nil {
		for _, u := range slices.Sorted(maps.Keys(collErrs)) {
			warnings = append(warnings, fmt.Sprintf("collection state unknown: collector status %s: %v", u, collErrs[u]))
		}
	}
	byCluster := map[string]*ClusterFreshness{}
	var order []string
	for _, p := range pairs {
		if !covers(q, p) {
			continue
		}
		c := byCluster[p.Cluster]
		if c == nil {
			c = &ClusterFreshness{Name: p.Cluster, State: p.State, Reason: p.Reason}
			byCluster[p.Cluster] = c
			order = append(order, p.Cluster)
		}
		if stateRank(p.State) > stateRank(c.State) {
			c.State, c.Reason = p.State, p.Reason
		}
		c.Listing = c.Listing || p.Listing
		if p.LagSeconds != nil && (c.LagSeconds == nil || *p.LagSeconds > *c.LagSeconds) {
			lag := *p.LagSeconds
			c.LagSeconds = &lag
		}
		gr := p.Resource
		if p.Group != "" {
			gr += "." + p.Group
		}
		switch {
		case p.State == registry.StateFailed:
			warnings = append(warnings, fmt.Sprintf("cluster %s: %s: collection Failed: %s", p.Cluster, gr, p.Reason))
		case p.Listing:
			warnings = append(warnings, fmt.Sprintf("cluster %s: %s: list in progress, results may be incomplete", p.Cluster, gr))
		case p.LagSeconds != nil && *p.LagSeconds > f.staleAfter.Seconds():
			warnings = append(warnings, fmt.Sprintf("cluster %s: %s: index %.0fs behind collection", p.Cluster, gr, *p.LagSeconds))
		case p.State == registry.StateUnknown && hasCollectors:
			warnings = append(warnings, fmt.Sprintf("cluster %s: %s: no collector reports it", p.Cluster, gr))
		}
	}
	for _, c := range q.Clusters {
		if byCluster[c] == nil {
			warnings = append(warnings, fmt.Sprintf("cluster %s: unknown to the index and the collectors", c))
		}
	}
	out := make([]ClusterFreshness, 0, len(order))
	for _, n := range order {
		out = append(out, *byCluster[n])
	}
	const maxWarnings = 10
	if len(warnings) > maxWarnings {
		warnings = append(warnings[:maxWarnings-1], fmt.Sprintf("and %d more warnings; see /v1alpha1/fleet", len(warnings)-maxWarnings+1))
	}
	return out, warnings
}
