package osstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// ErrNodeSilent is the error of a request to an OpenSearch node that accepted a connection but
// did not answer within firstAnswer, nor a probe of its own, and of a request to it while it stays
// so. The transport takes it as a failed node and sends the request to the next one.
var ErrNodeSilent = errors.New("osstore: OpenSearch node does not answer")

// firstAnswer bounds the wait for an answer's headers before the node is probed. OpenSearch
// answers most requests in milliseconds; a node that is hung (SIGSTOP, a stalled JVM) or cut off
// behind a network partition that drops packets still has its kernel accept the connection, and
// then sends nothing, so without this a request waited its whole --request-timeout (2 minutes for
// the indexer) on it, again at each retry (issue 26, make chaos: an indexer blocked for minutes in
// a _refresh sent to a partitioned node). A _bulk of thousands of documents or a heavy search may
// take longer than firstAnswer: the probe, not this bound, decides.
const firstAnswer = 3 * time.Second

// probeTimeout bounds a probe: GET / on a connection of its own, which a node serves from its
// HTTP threads whatever its search and write queues hold.
const probeTimeout = 2 * time.Second

// probeEvery is how often a silent node is asked again whether it answers.
const probeEvery = time.Second

// nodeGuard is the http.RoundTripper of the opensearch-go transport: it remembers which nodes do
// not answer. A request whose node has sent no answer within firstAnswer has the node probed
// (one probe shared by every request waiting on it), then again every firstAnswer for as long as
// it waits: while a probe answers, the request waits on, as slow requests do; when one does not,
// the node is marked silent and every request waiting on it is cancelled with ErrNodeSilent, which
// the transport's retry sends to another node (MaxRetries), as it does after a refused
// connection. A request to a silent node fails at once, until a probe every probeEvery finds it
// answering again.
//
// It guards nothing when there is one configured node, or when every configured node is silent:
// there is no other node to go to then, and an error would only replace a wait (the machine, not
// one node, is slow).
type nodeGuard struct {
	base  *http.Transport
	probe *http.Client // a connection per probe: an idle one could be the one that hangs
	log   *slog.Logger
	// firstAnswer and probeEvery are the constants of the same name (and probe.Timeout
	// probeTimeout), shorter in tests.
	firstAnswer, probeEvery time.Duration

	ctx   context.Context // ends the probes
	stop  context.CancelFunc
	wg    sync.WaitGroup
	mu    sync.Mutex
	nodes map[string]*node // by host:port, the configured ones
}

// node is one configured OpenSearch node's view.
type node struct {
	base   *url.URL // scheme and host of its address
	silent bool
	// turned is closed when the node turns silent, which cancels the requests waiting on it; a new
	// one is made when it answers again.
	turned chan struct{}
	check  *probeRun // the probe for waiting requests under way, nil when none
}

// probeRun is one probe's outcome, known once done is closed.
type probeRun struct {
	done chan struct{}
	ok   bool
}

// newNodeGuard is the transport toward addresses, with tlsConfig (the opensearch-go options
// CACert and InsecureSkipVerify apply to an *http.Transport only, not to a wrapper).
func newNodeGuard(addresses []string, tlsConfig *tls.Config, log *slog.Logger) (*nodeGuard, error) {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.TLSClientConfig = tlsConfig
	probe := base.Clone()
	probe.DisableKeepAlives = true
	ctx, stop := context.WithCancel(context.Background())
	g := &nodeGuard{
		base: base, probe: &http.Client{Transport: probe, Timeout: probeTimeout}, log: log,
		firstAnswer: firstAnswer, probeEvery: probeEvery,
		ctx: ctx, stop: stop, nodes: map[string]*node{},
	}
	for _, a := range addresses {
		u, err := url.Parse(a)
		if err != nil || u.Host == "" {
			stop()
			return nil, fmt.Errorf("osstore: OpenSearch address %q: not a URL", a)
		}
		g.nodes[u.Host] = &node{base: &url.URL{Scheme: u.Scheme, Host: u.Host}, turned: make(chan struct{})}
	}
	return g, nil
}

// tlsConfig is the TLS configuration toward OpenSearch: the CA certificate to verify it with, or
// none at all.
func tlsConfig(ca []byte, insecure bool) (*tls.Config, error) {
	if ca == nil && !insecure {
		return nil, nil
	}
	c := &tls.Config{InsecureSkipVerify: insecure} //nolint:gosec // the operator's --opensearch-insecure-skip-verify, for demos
	if ca != nil {
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(ca) {
			return nil, errors.New("--opensearch-ca-file: no certificate in it")
		}
	}
	return c, nil
}

// Close ends the probes and waits for them, and closes the idle connections.
func (g *nodeGuard) Close() {
	g.stop()
	g.wg.Wait()
	g.base.CloseIdleConnections()
}

// silentError is ErrNodeSilent for one node. It is a net.Error that is not a timeout, which is
// what makes the opensearch-go transport retry the request on the next node.
type silentError struct{ host string }

func (e *silentError) Error() string   { return fmt.Sprintf("%v: %s", ErrNodeSilent, e.host) }
func (e *silentError) Unwrap() error   { return ErrNodeSilent }
func (e *silentError) Timeout() bool   { return false }
func (e *silentError) Temporary() bool { return true }

// RoundTrip sends req to its node, unless the node is silent, and gives up on it when the node
// turns silent while req waits.
func (g *nodeGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	n, turned, guard := g.route(req.URL.Host)
	if n == nil || !guard {
		return g.base.RoundTrip(req)
	}
	select {
	case <-turned:
		return nil, &silentError{host: req.URL.Host}
	default:
	}

	ctx, cancel := context.WithCancel(req.Context())
	type result struct {
		resp *http.Response
		err  error
	}
	done := make(chan result, 1)
	go func() { // waited for below, on every path
		resp, err := g.base.RoundTrip(req.WithContext(ctx))
		done <- result{resp, err}
	}()
	timer := time.NewTimer(g.firstAnswer)
	defer timer.Stop()
	var probe *probeRun
	var probed <-chan struct{} // nil while no probe is under way: that case never fires
	for {
		select {
		case r := <-done:
			if r.err != nil {
				cancel()
				return nil, r.err
			}
			// The body is read after RoundTrip returns: ctx must live until it is closed.
			r.resp.Body = &cancelOnClose{ReadCloser: r.resp.Body, cancel: cancel}
			return r.resp, nil
		case <-timer.C:
			probe = g.checkNode(n, req.Header.Get("Authorization"))
			probed = probe.done
		case <-probed:
			probed = nil
			if probe.ok {
				// Alive and slow (a large _bulk): wait on, and ask again later.
				timer.Reset(g.firstAnswer)
			}
			// Otherwise the node turned silent, which the next case sees.
		case <-turned:
			cancel()
			r := <-done
			if r.err == nil {
				r.resp.Body.Close() // an answer that came as the node was given up on: the retry makes another
			}
			return nil, &silentError{host: req.URL.Host}
		}
	}
}

// route finds host's node, the channel closed when it turns silent, and whether requests to it are
// guarded: they are not when it is the only node, or when every node is silent.
func (g *nodeGuard) route(host string) (n *node, turned <-chan struct{}, guard bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n = g.nodes[host]
	if n == nil || len(g.nodes) < 2 {
		return n, nil, false
	}
	for _, o := range g.nodes {
		if !o.silent {
			return n, n.turned, true
		}
	}
	return n, nil, false
}

// checkNode returns the probe of n under way, or starts one. A probe that gets no answer marks n
// silent and goes on probing it every probeEvery until it answers.
func (g *nodeGuard) checkNode(n *node, auth string) *probeRun {
	g.mu.Lock()
	defer g.mu.Unlock()
	if n.check != nil {
		return n.check
	}
	run := &probeRun{done: make(chan struct{})}
	n.check = run
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		g.watch(n, run, auth)
	}()
	return run
}

// watch probes n for the requests waiting on it; if it does not answer, marks it silent and probes
// it every probeEvery until it does.
func (g *nodeGuard) watch(n *node, run *probeRun, auth string) {
	ok := g.answers(n, auth)
	g.mu.Lock()
	run.ok = ok
	n.check = nil
	close(run.done)
	if ok || g.ctx.Err() != nil {
		g.mu.Unlock()
		return
	}
	n.silent = true
	close(n.turned)
	g.mu.Unlock()
	g.log.Warn("OpenSearch node does not answer: requests go to the other nodes until it does", "node", n.base.Host)
	// Idle connections to it would be handed to the next requests after it is back; a partition or
	// a hang may have left them broken.
	g.base.CloseIdleConnections()

	t := time.NewTicker(g.probeEvery)
	defer t.Stop()
	since := time.Now()
	for {
		select {
		case <-g.ctx.Done():
			return
		case <-t.C:
		}
		if !g.answers(n, auth) {
			continue
		}
		g.mu.Lock()
		n.silent = false
		n.turned = make(chan struct{})
		g.mu.Unlock()
		g.log.Info("OpenSearch node answers again", "node", n.base.Host, "silent", time.Since(since).Round(time.Millisecond))
		return
	}
}

// answers probes n: any HTTP answer to GET / is one, a 401 included — the node is alive.
func (g *nodeGuard) answers(n *node, auth string) bool {
	// The probe client's Timeout bounds it; g.ctx ends it at Close.
	req, err := http.NewRequestWithContext(g.ctx, http.MethodGet, n.base.String()+"/", nil)
	if err != nil {
		return false
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := g.probe.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // nothing to read in it; the connection is not reused
	resp.Body.Close()
	return true
}

// cancelOnClose ends a request's context once its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
