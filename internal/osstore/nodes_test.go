package osstore

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeNode is an OpenSearch node for the guard's tests. Hung, it accepts connections and reads
// requests but never answers (what a SIGSTOPped node's kernel, or a partition proxy, does); slow,
// it answers every request but GET / after slow.
type fakeNode struct {
	srv     *httptest.Server
	name    string
	hung    atomic.Bool
	slow    time.Duration
	release chan struct{} // ends the hung handlers at cleanup
	served  atomic.Int64  // requests answered, probes aside
}

func newFakeNode(t *testing.T, name string) *fakeNode {
	t.Helper()
	n := &fakeNode{name: name, release: make(chan struct{})}
	n.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.hung.Load() {
			select {
			case <-r.Context().Done():
			case <-n.release:
			}
			return
		}
		if r.URL.Path != "/" {
			select {
			case <-time.After(n.slow):
			case <-r.Context().Done():
				return
			}
			n.served.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"node":"`+n.name+`","_shards":{"total":1,"successful":1,"failed":0}}`)
	}))
	t.Cleanup(func() {
		close(n.release)
		n.srv.Close()
	})
	return n
}

// silentListener accepts connections and never reads from them or answers: a node cut off behind
// a partition proxy.
func silentListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + l.Addr().String()
}

// guardedStore is a Store over addresses with the guard's bounds shortened.
func guardedStore(t *testing.T, addresses ...string) *Store {
	t.Helper()
	s, err := New(Options{Addresses: addresses, RequestTimeout: time.Minute, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s.guard.firstAnswer, s.guard.probeEvery, s.guard.probe.Timeout = 100*time.Millisecond, 50*time.Millisecond, 200*time.Millisecond
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func (g *nodeGuard) isSilent(address string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.nodes[strings.TrimPrefix(address, "http://")].silent
}

// Every kind of request (a _bulk, a _refresh, a search, ...) goes through Store.do: each must be
// answered by a live node while another node accepts connections and never answers, instead of
// waiting out the request timeout (a minute here) on it.
func TestNodeGuardSkipsSilentNode(t *testing.T) {
	for _, tc := range []struct {
		name string
		hung func(t *testing.T) string
	}{
		{"partitioned", silentListener},
		{"hung process", func(t *testing.T) string {
			n := newFakeNode(t, "hung")
			n.hung.Store(true)
			return n.srv.URL
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live := newFakeNode(t, "live")
			hung := tc.hung(t)
			s := guardedStore(t, hung, live.srv.URL)
			for _, r := range []struct{ method, path string }{
				{"POST", "/_bulk"}, {"POST", "/kubernetes-pod/_refresh"}, {"POST", "/kubernetes-*/_search"},
				{"POST", "/_mget"}, {"GET", "/kubesearch-state/_doc/x"}, {"POST", "/_bulk"},
			} {
				// Well below the request timeout: an answer after it would be the live node's
				// answer to a retry after the timeout, not the guard's doing.
				ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
				status, body, err := s.do(ctx, r.method, request{path: r.path, body: []byte("{}\n")})
				cancel()
				if err != nil || status != 200 || !strings.Contains(string(body), `"live"`) {
					t.Fatalf("%s %s: status %d, body %s, err %v; want the live node's answer", r.method, r.path, status, body, err)
				}
			}
			if !s.guard.isSilent(hung) {
				t.Errorf("the node that never answers is not marked silent")
			}
		})
	}
}

// A node that answers its probes is slow, not silent: a request that takes longer than firstAnswer
// (a large _bulk) is answered by it, not cut and sent again elsewhere.
func TestNodeGuardWaitsForSlowNode(t *testing.T) {
	a, b := newFakeNode(t, "a"), newFakeNode(t, "b")
	a.slow, b.slow = 600*time.Millisecond, 600*time.Millisecond // six times firstAnswer
	s := guardedStore(t, a.srv.URL, b.srv.URL)
	for range 4 {
		status, _, err := s.do(t.Context(), "POST", request{path: "/_bulk", body: []byte("{}\n"), ndjson: true})
		if err != nil || status != 200 {
			t.Fatalf("slow _bulk: status %d, err %v", status, err)
		}
	}
	if got := a.served.Load() + b.served.Load(); got != 4 {
		t.Errorf("the nodes answered %d requests for 4 sent: slow requests were sent again", got)
	}
	if s.guard.isSilent(a.srv.URL) || s.guard.isSilent(b.srv.URL) {
		t.Errorf("a slow node was marked silent")
	}
}

// A node that hangs while requests wait on it has them sent to another node; once it answers
// again, a probe takes it back.
func TestNodeGuardTakesNodeBack(t *testing.T) {
	a, b := newFakeNode(t, "a"), newFakeNode(t, "b")
	a.slow = 500 * time.Millisecond
	s := guardedStore(t, a.srv.URL, b.srv.URL)

	// Requests already waiting on a when it hangs (SIGSTOP in the middle of a _refresh).
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, _, err := s.do(t.Context(), "POST", request{path: "/_refresh"})
			if err == nil && status != 200 {
				err = errors.New(http.StatusText(status))
			}
			errs <- err
		}()
	}
	time.Sleep(50 * time.Millisecond) // the requests are on their way; a answers none before it hangs
	a.hung.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a request waiting on the node that hung: %v", err)
		}
	}
	if !s.guard.isSilent(a.srv.URL) {
		t.Fatalf("the hung node is not marked silent")
	}

	a.hung.Store(false)
	deadline := time.Now().Add(10 * time.Second)
	for s.guard.isSilent(a.srv.URL) {
		if time.Now().After(deadline) {
			t.Fatal("the node answers again, but is still marked silent 10 s later")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// With one node there is nowhere else to go: a request waits on it as long as it takes, and is
// never failed by the guard.
func TestNodeGuardOneNode(t *testing.T) {
	a := newFakeNode(t, "a")
	a.slow = 300 * time.Millisecond
	s := guardedStore(t, a.srv.URL)
	a.hung.Store(true)
	go func() {
		time.Sleep(500 * time.Millisecond) // longer than firstAnswer and a probe
		a.hung.Store(false)
	}()
	// The hung handler holds this request until the release or its end: cancel it after the node is
	// back, and send another, which the node answers.
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	_, _, err := s.do(ctx, "GET", request{path: "/_cluster/health"})
	cancel()
	if errors.Is(err, ErrNodeSilent) {
		t.Fatalf("the only node was given up on: %v", err)
	}
	if status, _, err := s.do(t.Context(), "GET", request{path: "/_cluster/health"}); err != nil || status != 200 {
		t.Fatalf("after the node is back: status %d, err %v", status, err)
	}
}
