// Command cutproxy is the HA test bed's network partition: a TCP proxy on loopback in front of one
// node's ports (a broker's listeners, an OpenSearch node's HTTP and transport ports) that a test cuts
// and heals while the node keeps running.
//
//	cutproxy --control 127.0.0.1:PORT --link 127.0.0.1:A=127.0.0.1:B [--link ...]
//
// Every connection to a link's listening address is forwarded to its target. The control address
// takes POST /cut, POST /heal and GET / (the state, as JSON). A cut
//   - mode=blackhole (the default), what a network that drops packets does: existing connections
//     carry nothing in either direction (what was read is held), new ones are accepted (the kernel
//     would, behind a switch that drops packets the client would see its SYN unanswered; either way
//     nothing comes back) and forwarded nowhere; /heal lets both flow again;
//   - mode=reset, what a network that rejects does: existing connections are closed at once (both
//     sides), new ones closed as soon as they are accepted.
//
// It is a test bed tool: it leaves out everything a production proxy needs (limits, metrics, TLS).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
)

type link struct{ listen, target string }

type links []link

func (l *links) String() string { return fmt.Sprint(*l) }

func (l *links) Set(v string) error {
	listen, target, ok := strings.Cut(v, "=")
	if !ok || listen == "" || target == "" {
		return fmt.Errorf("want LISTEN=TARGET, got %q", v)
	}
	*l = append(*l, link{listen, target})
	return nil
}

func main() {
	var (
		control string
		ls      links
	)
	flag.StringVar(&control, "control", "", "address of the control API (POST /cut, POST /heal, GET /)")
	flag.Var(&ls, "link", "LISTEN=TARGET, repeated: forward connections to LISTEN to TARGET")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if control == "" || len(ls) == 0 {
		log.Error("need --control and at least one --link")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, control, ls, log); err != nil {
		log.Error("cutproxy", "err", err)
		os.Exit(1)
	}
}

// proxy is the state every link shares: cut or not, and the open connections.
type proxy struct {
	log *slog.Logger

	mu     sync.Mutex
	cut    string        // "", "blackhole" or "reset"
	open   chan struct{} // closed while not cut: what a held transfer waits for
	conns  map[*pair]struct{}
	cuts   int
	served int
}

// pair is one proxied connection: the client's and the target's sides.
type pair struct {
	client, target net.Conn
	done           chan struct{} // closed when the pair is closed
	once           sync.Once
}

func (p *pair) close() {
	p.once.Do(func() {
		close(p.done)
		if tc, ok := p.client.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset, not an orderly close
		}
		_ = p.client.Close()
		if p.target != nil {
			_ = p.target.Close()
		}
	})
}

func run(ctx context.Context, control string, ls links, log *slog.Logger) error {
	p := &proxy{log: log, open: make(chan struct{}), conns: map[*pair]struct{}{}}
	close(p.open)
	g, ctx := errgroup.WithContext(ctx)
	var lc net.ListenConfig
	for _, l := range ls {
		ln, err := lc.Listen(ctx, "tcp", l.listen)
		if err != nil {
			return fmt.Errorf("listen %s: %w", l.listen, err)
		}
		g.Go(func() error { return p.serve(ctx, ln, l.target) })
		g.Go(func() error { <-ctx.Done(); return ignoreClosed(ln.Close()) })
	}
	cln, err := lc.Listen(ctx, "tcp", control)
	if err != nil {
		return fmt.Errorf("listen %s: %w", control, err)
	}
	srv := &http.Server{Handler: p.handler(), ReadHeaderTimeout: 5 * time.Second}
	g.Go(func() error {
		if err := srv.Serve(cln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("control API: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
		p.closeAll()
		return nil
	})
	log.Info("cutproxy ready", "control", control, "links", ls.String())
	return g.Wait()
}

func ignoreClosed(err error) error {
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// serve accepts connections to ln until it is closed (when ctx ends), each forwarded to target by a
// goroutine it waits for.
func (p *proxy) serve(ctx context.Context, ln net.Listener, target string) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accept on %s: %w", ln.Addr(), err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.forward(ctx, c, target)
		}()
	}
}

// forward proxies one connection until either side closes it or a reset cut does.
func (p *proxy) forward(ctx context.Context, c net.Conn, target string) {
	pr := &pair{client: c, done: make(chan struct{})}
	p.mu.Lock()
	mode, open := p.cut, p.open
	p.conns[pr] = struct{}{}
	p.served++
	p.mu.Unlock()
	defer func() {
		pr.close()
		p.mu.Lock()
		delete(p.conns, pr)
		p.mu.Unlock()
	}()
	switch mode {
	case "reset":
		return
	case "blackhole":
		// Accepted, then nothing until the heal (or the client gives up).
		select {
		case <-open:
		case <-pr.done:
			return
		case <-ctx.Done():
			return
		}
	}
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	t, err := d.DialContext(dctx, "tcp", target)
	cancel()
	if err != nil {
		return // the client sees its connection closed, as if the node were down
	}
	p.mu.Lock()
	if pr.isClosed() {
		p.mu.Unlock()
		_ = t.Close()
		return
	}
	pr.target = t
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.copy(pr, t, c) }()
	go func() { defer wg.Done(); p.copy(pr, c, t) }()
	wg.Wait()
}

func (pr *pair) isClosed() bool {
	select {
	case <-pr.done:
		return true
	default:
		return false
	}
}

// copy moves bytes from src to dst, each read held while a blackhole cut lasts; it closes the pair
// when either side ends.
func (p *proxy) copy(pr *pair, dst, src net.Conn) {
	defer pr.close()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.wait(pr) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !pr.isClosed() {
				p.log.Debug("copy", "err", err)
			}
			return
		}
	}
}

// wait blocks while the proxy is cut; false when the pair was closed meanwhile.
func (p *proxy) wait(pr *pair) bool {
	p.mu.Lock()
	open := p.open
	p.mu.Unlock()
	select {
	case <-open:
		return !pr.isClosed()
	case <-pr.done:
		return false
	}
}

func (p *proxy) setCut(mode string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut == "" {
		p.open = make(chan struct{})
		p.cuts++
	}
	p.cut = mode
	if mode == "reset" {
		for pr := range p.conns {
			pr.close()
		}
	}
	p.log.Info("cut", "mode", mode, "connections", len(p.conns))
}

func (p *proxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut != "" {
		close(p.open)
		p.cut = ""
	}
	p.log.Info("healed", "connections", len(p.conns))
}

func (p *proxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for pr := range p.conns {
		pr.close()
	}
}

func (p *proxy) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /cut", func(w http.ResponseWriter, r *http.Request) {
		mode := r.URL.Query().Get("mode")
		if mode == "" {
			mode = "blackhole"
		}
		if mode != "blackhole" && mode != "reset" {
			http.Error(w, "mode: blackhole or reset", http.StatusBadRequest)
			return
		}
		p.setCut(mode)
		p.status(w)
	})
	mux.HandleFunc("POST /heal", func(w http.ResponseWriter, _ *http.Request) {
		p.heal()
		p.status(w)
	})
	mux.HandleFunc("GET /", func(w http.ResponseWriter, _ *http.Request) { p.status(w) })
	return mux
}

func (p *proxy) status(w http.ResponseWriter) {
	p.mu.Lock()
	s := struct {
		Cut         string `json:"cut"`
		Connections int    `json:"connections"`
		Served      int    `json:"served"`
		Cuts        int    `json:"cuts"`
	}{p.cut, len(p.conns), p.served, p.cuts}
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(s)
}
