// Package testproxy is a forward proxy for tests: it opens CONNECT tunnels on loopback, as a
// corporate proxy in front of a member's API server does, and refuses a CONNECT that lacks the
// headers it requires with 407, as such proxies do. Only tests import it.
package testproxy

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
)

// Proxy is a running forward proxy.
type Proxy struct {
	// URL is the proxy's address, http://127.0.0.1:PORT.
	URL string

	required http.Header

	mu       sync.Mutex
	connects []http.Header // the headers of every CONNECT, admitted or not
	refused  int
	open     map[net.Conn]struct{} // both ends of every tunnel, closed when the test ends
	closed   bool
	tunnels  sync.WaitGroup
}

// New starts a proxy that admits a CONNECT only when it carries every header of required with the
// same values; it stops when the test ends, with every tunnel it opened.
func New(t testing.TB, required http.Header) *Proxy {
	t.Helper()
	p := &Proxy{required: required, open: map[net.Conn]struct{}{}}
	srv := httptest.NewServer(http.HandlerFunc(p.serve))
	p.URL = srv.URL
	t.Cleanup(func() {
		srv.Close() // hijacked connections are the proxy's, not the server's: closed below
		p.mu.Lock()
		p.closed = true
		for c := range p.open {
			c.Close()
		}
		p.mu.Unlock()
		p.tunnels.Wait()
	})
	return p
}

// Connects returns the headers of every CONNECT received so far, and how many were refused.
func (p *Proxy) Connects() (headers []http.Header, refused int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.connects), p.refused
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		http.Error(w, "this proxy only tunnels (CONNECT)", http.StatusMethodNotAllowed)
		return
	}
	ok := true
	for name, want := range p.required {
		if !slices.Equal(r.Header.Values(name), want) {
			ok = false
		}
	}
	p.mu.Lock()
	p.connects = append(p.connects, r.Header.Clone())
	if !ok {
		p.refused++
	}
	p.mu.Unlock()
	if !ok {
		w.Header().Set("Proxy-Authenticate", `Basic realm="testproxy"`)
		http.Error(w, "the proxy's required headers are missing", http.StatusProxyAuthRequired)
		return
	}
	upstream, err := net.DialTimeout("tcp", r.Host, 10*time.Second)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	client, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		upstream.Close()
		return
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		client.Close()
		upstream.Close()
		return
	}
	p.open[client], p.open[upstream] = struct{}{}, struct{}{}
	// The tunnel's two copies belong to the proxy: New's cleanup waits for them, and each side's
	// end closes both connections, so neither copy outlives the other.
	p.tunnels.Add(2)
	p.mu.Unlock()
	if _, err := client.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		client.Close() // the copies below end at once
	}
	go func() {
		defer p.tunnels.Done()
		_, _ = io.Copy(upstream, buf) // what the client sent after its CONNECT, then the rest
		upstream.Close()
		client.Close()
	}()
	go func() {
		defer p.tunnels.Done()
		_, _ = io.Copy(client, upstream)
		client.Close()
		upstream.Close()
		p.mu.Lock()
		delete(p.open, client)
		delete(p.open, upstream)
		p.mu.Unlock()
	}()
}
