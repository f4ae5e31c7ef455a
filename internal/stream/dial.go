package stream

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/kubesearch/kubesearch/internal/lifecycle"
)

// ErrBrokerSilent is the dial error for a broker that accepted a connection but sent nothing back
// within firstAnswer, and for a dial to it while it stays so.
var ErrBrokerSilent = errors.New("stream: broker does not answer")

// firstAnswer bounds the wait for a broker's first bytes on a new connection. A broker's first
// answer on a connection is to ApiVersions, a TLS handshake or a coordinator lookup, which it
// serves in milliseconds; a process that is hung (SIGSTOP, a stalled JVM) or cut off behind a
// network partition that drops packets still has its kernel accept the connection, and then sends
// nothing, so without this every request waited its own timeout (10 to 30 s) on it.
const firstAnswer = 3 * time.Second

// probeEvery is how often a silent broker is asked again whether it answers.
const probeEvery = time.Second

// brokerDialer opens the connections every Kafka client of a Client uses (the Transport of its
// admin requests, writers and followers; the Dialer of kafka-go's group readers and consumer
// groups), and remembers which brokers do not answer.
//
// kafka-go tries the configured brokers in order for a bootstrap request (a consumer group's
// coordinator lookup, a reader's partition lookup) and moves on to the next only when a dial fails:
// a hung first broker, whose kernel accepts the connection, held every coordinator lookup for the
// length of its timeout, again after each backoff, for as long as it hung (issue 26, make chaos:
// kafka-1 SIGSTOP did not converge in 4 minutes). Here a connection whose broker sends nothing
// within firstAnswer of the first request is closed and its broker marked silent; a dial to a
// silent broker fails at once, so kafka-go's loop goes on to the next broker, until a probe every
// probeEvery finds it answering again. When every configured broker is silent, dials go through
// as kafka-go would make them (no first-answer bound): the machine, not one broker, is slow then.
type brokerDialer struct {
	brokers []string // the configured ones
	tls     *tls.Config
	net     net.Dialer
	log     *slog.Logger
	// firstAnswer and probeEvery are the constants of the same name, shorter in tests.
	firstAnswer, probeEvery time.Duration

	mu      sync.Mutex
	silent  map[string]bool
	probing map[string]bool                      // a stalled request's broker being probed
	conns   map[string]map[*watchedConn]struct{} // open, by broker: closed when it turns silent
	ctx     context.Context                      // ends the probes
	stop    context.CancelFunc
	probes  sync.WaitGroup
	closed  bool
}

func newBrokerDialer(brokers []string, tlsConfig *tls.Config, log *slog.Logger) *brokerDialer {
	ctx, stop := context.WithCancel(context.Background())
	return &brokerDialer{
		brokers: slices.Clone(brokers), tls: tlsConfig, log: log,
		net:         net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second},
		firstAnswer: firstAnswer, probeEvery: probeEvery,
		silent: map[string]bool{}, probing: map[string]bool{}, conns: map[string]map[*watchedConn]struct{}{},
		ctx: ctx, stop: stop,
	}
}

// DialContext connects to a broker: TCP, then TLS when configured, the handshake bounded by
// firstAnswer. The connection it returns closes itself when nothing comes back within firstAnswer of
// its first write. It has kafka.Transport's Dial and kafka.Dialer's DialFunc signature; both are
// given no TLS configuration of their own, since the handshake is done here.
func (d *brokerDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	watch := true
	d.mu.Lock()
	switch {
	case !d.silent[address]:
	case d.everyBrokerSilent():
		watch = false
	default:
		d.mu.Unlock()
		return nil, fmt.Errorf("dial %s: %w (skipped until it does)", address, ErrBrokerSilent)
	}
	d.mu.Unlock()

	conn, err := d.net.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	if d.tls != nil {
		tc, err := d.handshake(ctx, conn, address, watch)
		if err != nil {
			return nil, err
		}
		conn = tc
	}
	if !watch {
		return conn, nil
	}
	// Above TLS, so that it sees the Kafka protocol's frames. A completed handshake was the
	// broker's first answer.
	return d.watch(conn, address, d.tls != nil), nil
}

// watch returns conn watched, and tracks it until it is closed.
func (d *brokerDialer) watch(conn net.Conn, address string, answered bool) *watchedConn {
	c := &watchedConn{Conn: conn, address: address, dialer: d, answered: answered}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.conns[address] == nil {
		d.conns[address] = map[*watchedConn]struct{}{}
	}
	d.conns[address][c] = struct{}{}
	return c
}

func (d *brokerDialer) forget(c *watchedConn) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.conns[c.address], c)
	if len(d.conns[c.address]) == 0 {
		delete(d.conns, c.address)
	}
}

// handshake runs the TLS handshake on conn; a broker that does not complete it within firstAnswer
// (when watch) is silent.
func (d *brokerDialer) handshake(ctx context.Context, conn net.Conn, address string, watch bool) (*tls.Conn, error) {
	config := d.tls
	if config.ServerName == "" {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("dial %s: %w", address, err)
		}
		config = config.Clone()
		config.ServerName = host
	}
	tc := tls.Client(conn, config)
	hctx := ctx
	if watch {
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeout(ctx, d.firstAnswer)
		defer cancel()
	}
	if err := tc.HandshakeContext(hctx); err != nil {
		_ = conn.Close()
		if watch && ctx.Err() == nil && errors.Is(hctx.Err(), context.DeadlineExceeded) {
			d.markSilent(address)
			return nil, fmt.Errorf("dial %s: no TLS handshake within %s: %w", address, d.firstAnswer, ErrBrokerSilent)
		}
		return nil, fmt.Errorf("dial %s: TLS handshake: %w", address, err)
	}
	return tc, nil
}

// everyBrokerSilent is true when no configured broker answers; d.mu is held.
func (d *brokerDialer) everyBrokerSilent() bool {
	for _, b := range d.brokers {
		if !d.silent[b] {
			return false
		}
	}
	return len(d.brokers) > 0
}

// markSilent records that the broker at address did not answer and probes it until it does.
func (d *brokerDialer) markSilent(address string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.silent[address] || d.closed {
		return
	}
	d.silent[address] = true
	d.log.Warn("Kafka broker accepts connections but does not answer; its connections are closed and other brokers tried first until it does",
		"broker", address, "within", d.firstAnswer, "connections", len(d.conns[address]))
	// Every request on them waits for nothing but its own timeout (30 s for a produce or a
	// follower's fetch): closed, they fail now and are retried where the metadata says, which is
	// another broker once Kafka has fenced this one.
	for c := range d.conns[address] {
		c.abandon()
	}
	d.probes.Add(1)
	go func() {
		defer d.probes.Done()
		d.probeUntilAnswered(address)
	}()
}

// suspect probes the broker of a request that has waited firstAnswer for its answer: a JoinGroup
// or a produce waiting for its followers may take that long on a broker that is well, but a broker
// that does not answer a new connection's ApiVersions either is not. One probe per broker at a time.
func (d *brokerDialer) suspect(address string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.silent[address] || d.probing[address] || d.closed {
		return
	}
	d.probing[address] = true
	d.probes.Add(1)
	go func() {
		defer d.probes.Done()
		err := d.probe(d.ctx, address)
		d.mu.Lock()
		delete(d.probing, address)
		d.mu.Unlock()
		if err != nil && d.ctx.Err() == nil {
			d.markSilent(address)
		}
	}()
}

// answered clears a silent broker once one of its connections brought an answer.
func (d *brokerDialer) answered(address string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.clear(address)
}

// clear forgets that address was silent; d.mu is held.
func (d *brokerDialer) clear(address string) {
	if d.silent[address] {
		delete(d.silent, address)
		d.log.Info("Kafka broker answers again", "broker", address)
	}
}

func (d *brokerDialer) isSilent(address string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.silent[address]
}

// probeUntilAnswered asks the broker every probeEvery whether it answers, until it does, something
// else saw it answer, or the dialer is closed.
func (d *brokerDialer) probeUntilAnswered(address string) {
	for d.isSilent(address) {
		if err := lifecycle.Sleep(d.ctx, d.probeEvery); err != nil {
			return
		}
		if err := d.probe(d.ctx, address); err == nil {
			d.answered(address)
			return
		}
	}
}

// probe opens a connection of its own to the broker and asks it for its API versions (version 0,
// which every broker answers, with an error code if it must), waiting firstAnswer for the answer.
// The connection is closed afterwards: a connection that has sent ApiVersions may not send it again
// before a SASL handshake, so the probe never lends its connection to a client.
func (d *brokerDialer) probe(ctx context.Context, address string) error {
	ctx, cancel := context.WithTimeout(ctx, d.firstAnswer)
	defer cancel()
	conn, err := d.net.DialContext(ctx, "tcp", address)
	if err != nil {
		return fmt.Errorf("probe %s: %w", address, err)
	}
	defer func() { _ = conn.Close() }()
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return fmt.Errorf("probe %s: %w", address, err)
	}
	if d.tls != nil {
		config := d.tls.Clone()
		if config.ServerName == "" {
			config.ServerName, _, _ = net.SplitHostPort(address)
		}
		conn = tls.Client(conn, config)
	}
	const correlation = 0x6b736e64 // any value: it is checked in the answer
	if _, err := conn.Write(apiVersionsRequest(correlation)); err != nil {
		return fmt.Errorf("probe %s: %w", address, err)
	}
	var head [8]byte // the answer's size and correlation id
	if _, err := io.ReadFull(conn, head[:]); err != nil {
		return fmt.Errorf("probe %s: %w", address, err)
	}
	if got := binary.BigEndian.Uint32(head[4:]); got != correlation {
		return fmt.Errorf("probe %s: answer to correlation id %d, want %d", address, got, correlation)
	}
	return nil
}

// apiVersionsRequest is a Kafka ApiVersions request, version 0, framed: size, API key 18, version 0,
// correlation id, client id; no body.
func apiVersionsRequest(correlation uint32) []byte {
	const clientID = "kubesearch-probe"
	b := make([]byte, 0, 4+2+2+4+2+len(clientID))
	b = binary.BigEndian.AppendUint32(b, uint32(2+2+4+2+len(clientID)))
	b = binary.BigEndian.AppendUint16(b, 18)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint32(b, correlation)
	b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
	return append(b, clientID...)
}

// Close ends the probes and waits for them.
func (d *brokerDialer) Close() {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.stop()
	d.probes.Wait()
}

// watchedConn is a connection to a broker that tells a broker that stopped answering from one that
// is slow. It follows the Kafka protocol's framing (every request and every response is a 4-byte
// size and that many bytes) to know when requests are waiting for their answer. A first request
// left without any answer for firstAnswer closes the connection and marks the broker silent; a
// later one has the broker probed (suspect), which marks it silent if a new connection gets no
// answer either. A broker turned silent has every watched connection to it abandoned.
type watchedConn struct {
	net.Conn
	address string
	dialer  *brokerDialer

	mu           sync.Mutex
	sent, got    frames
	waitingSince time.Time   // zero unless a request waits for its answer: since then, or the last bytes read
	timer        *time.Timer // checks the wait
	answered     bool        // the broker sent something on this connection
	abandoned    bool
}

// frames counts the size-prefixed frames of one direction of a connection.
type frames struct {
	started int     // frames whose size was seen
	head    [4]byte // the size being read
	headN   int
	left    int // bytes of the current frame still to come
}

func (f *frames) feed(p []byte) {
	for len(p) > 0 {
		if f.left > 0 {
			n := min(f.left, len(p))
			f.left -= n
			p = p[n:]
			continue
		}
		n := copy(f.head[f.headN:], p)
		f.headN += n
		p = p[n:]
		if f.headN == 4 {
			f.left, f.headN = int(binary.BigEndian.Uint32(f.head[:])), 0
			f.started++
		}
	}
}

// done counts the frames complete.
func (f *frames) done() int {
	if f.left > 0 || f.headN > 0 {
		return f.started - 1
	}
	return f.started
}

func (c *watchedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.mu.Lock()
	c.sent.feed(p[:n])
	if c.sent.started > c.got.done() && c.waitingSince.IsZero() {
		c.waitingSince = time.Now()
		c.arm(c.dialer.firstAnswer)
	}
	c.mu.Unlock()
	return n, c.explain(err)
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		first := !c.answered
		c.answered = true
		c.got.feed(p[:n])
		if c.sent.started > c.got.done() {
			c.waitingSince = time.Now() // answers are coming: the broker is there
		} else {
			c.waitingSince = time.Time{}
		}
		c.mu.Unlock()
		if first && c.dialer.isSilent(c.address) {
			c.dialer.answered(c.address) // a dial made while every broker was silent
		}
	}
	return n, c.explain(err)
}

// arm (re)starts the timer; c.mu is held.
func (c *watchedConn) arm(after time.Duration) {
	if c.timer == nil {
		c.timer = time.AfterFunc(after, c.check)
		return
	}
	c.timer.Reset(after)
}

// check runs when a request may have waited firstAnswer for its answer.
func (c *watchedConn) check() {
	c.mu.Lock()
	if c.waitingSince.IsZero() || c.abandoned {
		c.mu.Unlock()
		return
	}
	if left := c.dialer.firstAnswer - time.Since(c.waitingSince); left > 0 {
		c.arm(left)
		c.mu.Unlock()
		return
	}
	first := !c.answered
	c.waitingSince = time.Time{} // asked once per wait; the next request or answer starts another
	c.mu.Unlock()
	if first {
		c.dialer.markSilent(c.address) // which abandons c
		c.abandon()
		return
	}
	c.dialer.suspect(c.address)
}

// abandon closes the connection because its broker does not answer.
func (c *watchedConn) abandon() {
	c.mu.Lock()
	c.abandoned = true
	c.mu.Unlock()
	_ = c.Conn.Close()
}

// explain turns the error of an abandoned connection into one that says why.
func (c *watchedConn) explain(err error) error {
	if err == nil {
		return nil
	}
	c.mu.Lock()
	abandoned := c.abandoned
	c.mu.Unlock()
	if abandoned {
		// Also a timeout, which is how kafka-go's callers tell a connection worth retrying elsewhere.
		return fmt.Errorf("broker %s sent nothing within %s: %w: %w", c.address, c.dialer.firstAnswer, ErrBrokerSilent, os.ErrDeadlineExceeded)
	}
	return err
}

func (c *watchedConn) Close() error {
	c.mu.Lock()
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Unlock()
	c.dialer.forget(c)
	return c.Conn.Close()
}
