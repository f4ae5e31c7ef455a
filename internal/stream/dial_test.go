package stream

import (
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeBroker accepts connections and, while it answers, replies to every framed request with a
// framed answer carrying its correlation id; while hung it reads nothing and sends nothing, as a
// SIGSTOPped broker whose kernel still accepts connections.
type fakeBroker struct {
	ln      net.Listener
	answers atomic.Bool
	delay   atomic.Int64 // holds each answer after a connection's first this long (a slow request)
	wg      sync.WaitGroup
}

func newFakeBroker(t *testing.T, answers bool) *fakeBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &fakeBroker{ln: ln}
	b.answers.Store(answers)
	var conns sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			open = append(open, c)
			mu.Unlock()
			conns.Add(1)
			go func() {
				defer conns.Done()
				b.serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		b.answers.Store(true) // what hangs answers, so that its connections see their close
		_ = ln.Close()
		b.wg.Wait()
		mu.Lock()
		for _, c := range open {
			_ = c.Close()
		}
		mu.Unlock()
		conns.Wait()
	})
	return b
}

func (b *fakeBroker) addr() string { return b.ln.Addr().String() }

func (b *fakeBroker) serve(c net.Conn) {
	if !b.answers.Load() {
		_, _ = io.Copy(io.Discard, c) // hung: never a byte back
		return
	}
	for n := 0; ; n++ {
		var size [4]byte
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return
		}
		req := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(c, req); err != nil {
			return
		}
		for !b.answers.Load() {
			// Hung after the connection was made: nothing comes back.
			time.Sleep(5 * time.Millisecond)
		}
		if n > 0 {
			time.Sleep(time.Duration(b.delay.Load()))
		}
		answer := binary.BigEndian.AppendUint32(nil, 4)
		answer = append(answer, req[4:8]...) // the correlation id
		if _, err := c.Write(answer); err != nil {
			return
		}
	}
}

func testDialer(brokers ...string) *brokerDialer {
	d := newBrokerDialer(brokers, nil, slog.New(slog.DiscardHandler))
	d.firstAnswer, d.probeEvery = 200*time.Millisecond, 50*time.Millisecond
	return d
}

// roundTrip sends one ApiVersions request on conn and reads the answer's head.
func roundTrip(conn net.Conn) error {
	if _, err := conn.Write(apiVersionsRequest(7)); err != nil {
		return err
	}
	var head [8]byte
	_, err := io.ReadFull(conn, head[:])
	return err
}

func TestBrokerDialerSkipsAHungBrokerUntilItAnswers(t *testing.T) {
	hung, healthy := newFakeBroker(t, false), newFakeBroker(t, true)
	d := testDialer(hung.addr(), healthy.addr())
	defer d.Close()
	ctx := t.Context()

	// The kernel accepts the connection; the first request gets nothing back, and the connection
	// is closed within firstAnswer instead of the caller's own timeout.
	conn, err := d.DialContext(ctx, "tcp", hung.addr())
	if err != nil {
		t.Fatalf("dial the hung broker: %v", err)
	}
	began := time.Now()
	err = roundTrip(conn)
	_ = conn.Close()
	if !errors.Is(err, ErrBrokerSilent) {
		t.Fatalf("request to the hung broker: got %v, want ErrBrokerSilent", err)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("request to the hung broker: %v is not a timeout", err)
	}
	if waited := time.Since(began); waited > 5*d.firstAnswer {
		t.Errorf("waited %s for the hung broker, want about %s", waited, d.firstAnswer)
	}

	// While it stays hung, a dial to it fails at once, so kafka-go's loop over the brokers moves on.
	began = time.Now()
	if _, err := d.DialContext(ctx, "tcp", hung.addr()); !errors.Is(err, ErrBrokerSilent) {
		t.Fatalf("second dial of the hung broker: got %v, want ErrBrokerSilent at once", err)
	}
	if waited := time.Since(began); waited > d.firstAnswer/2 {
		t.Errorf("second dial of the hung broker took %s, want at once", waited)
	}
	conn, err = d.DialContext(ctx, "tcp", healthy.addr())
	if err != nil {
		t.Fatalf("dial the healthy broker: %v", err)
	}
	if err := roundTrip(conn); err != nil {
		t.Fatalf("request to the healthy broker: %v", err)
	}
	// Past firstAnswer an answered connection stays open.
	time.Sleep(2 * d.firstAnswer)
	if err := roundTrip(conn); err != nil {
		t.Fatalf("second request to the healthy broker: %v", err)
	}
	_ = conn.Close()

	// Continued: the probe finds it answering, and it is dialled again.
	hung.answers.Store(true)
	deadline := time.Now().Add(20 * d.probeEvery)
	for d.isSilent(hung.addr()) {
		if time.Now().After(deadline) {
			t.Fatal("the broker answers again, but the dialer still skips it")
		}
		time.Sleep(d.probeEvery / 2)
	}
	conn, err = d.DialContext(ctx, "tcp", hung.addr())
	if err != nil {
		t.Fatalf("dial the continued broker: %v", err)
	}
	defer func() { _ = conn.Close() }()
	if err := roundTrip(conn); err != nil {
		t.Fatalf("request to the continued broker: %v", err)
	}
}

// When every configured broker is silent, the machine rather than a broker is slow: dials go through
// without the first-answer bound, and a late answer clears the broker.
func TestBrokerDialerEveryBrokerSilent(t *testing.T) {
	b := newFakeBroker(t, false)
	d := testDialer(b.addr())
	defer d.Close()
	conn, err := d.DialContext(t.Context(), "tcp", b.addr())
	if err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(conn); !errors.Is(err, ErrBrokerSilent) {
		t.Fatalf("got %v, want ErrBrokerSilent", err)
	}
	_ = conn.Close()
	conn, err = d.DialContext(t.Context(), "tcp", b.addr())
	if err != nil {
		t.Fatalf("dial with every broker silent: got %v, want a connection", err)
	}
	defer func() { _ = conn.Close() }()
	if _, ok := conn.(*watchedConn); ok {
		t.Error("with every broker silent the connection is still watched")
	}
}

// Closing the client's dialer ends its probes.
func TestBrokerDialerCloseEndsProbes(t *testing.T) {
	b := newFakeBroker(t, false)
	other := newFakeBroker(t, true)
	d := testDialer(b.addr(), other.addr())
	d.markSilent(b.addr())
	done := make(chan struct{})
	go func() {
		d.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return while a probe ran")
	}
}

// A broker that hangs after its connections were made: a request left unanswered has the broker
// probed, the probe gets no answer either, and every connection to it is closed at once instead of
// waiting for its request's own timeout.
func TestBrokerDialerAbandonsConnectionsOfABrokerThatHangs(t *testing.T) {
	b, other := newFakeBroker(t, true), newFakeBroker(t, true)
	d := testDialer(b.addr(), other.addr())
	defer d.Close()
	var conns []net.Conn
	for range 2 {
		conn, err := d.DialContext(t.Context(), "tcp", b.addr())
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close() }()
		if err := roundTrip(conn); err != nil {
			t.Fatalf("request while the broker answers: %v", err)
		}
		conns = append(conns, conn)
	}
	b.answers.Store(false)
	began := time.Now()
	if err := roundTrip(conns[0]); !errors.Is(err, ErrBrokerSilent) {
		t.Fatalf("request to the hung broker: got %v, want ErrBrokerSilent", err)
	}
	if waited := time.Since(began); waited > 10*d.firstAnswer {
		t.Errorf("waited %s, want about two firstAnswer (%s)", waited, 2*d.firstAnswer)
	}
	// The other connection, idle meanwhile, was closed too.
	_ = conns[1].SetDeadline(time.Now().Add(time.Second))
	if err := roundTrip(conns[1]); !errors.Is(err, ErrBrokerSilent) {
		t.Errorf("idle connection to the hung broker: got %v, want it closed with ErrBrokerSilent", err)
	}
}

// A request a well broker answers late (a JoinGroup, a produce waiting for its followers) leaves the
// connection open: the probe of the broker is answered.
func TestBrokerDialerKeepsASlowRequest(t *testing.T) {
	b, other := newFakeBroker(t, true), newFakeBroker(t, true)
	d := testDialer(b.addr(), other.addr())
	defer d.Close()
	conn, err := d.DialContext(t.Context(), "tcp", b.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if err := roundTrip(conn); err != nil {
		t.Fatal(err)
	}
	b.delay.Store(int64(4 * d.firstAnswer))
	if err := roundTrip(conn); err != nil {
		t.Fatalf("slow request: %v", err)
	}
	if d.isSilent(b.addr()) {
		t.Error("a broker that answered its probe was marked silent")
	}
}
