//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/tests/testbed"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// kubesearchBinary builds bin/kubesearch once per test run: components run as real processes, so
// tests can SIGSTOP and kill -9 them.
func kubesearchBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kubesearch-e2e-bin")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "kubesearch")
		cmd := exec.Command("go", "build", "-race", "-o", binPath, "./cmd/kubesearch")
		cmd.Dir = testbed.Root()
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// process is a kubesearch component started by a test.
type process struct {
	t    *testing.T
	cmd  *exec.Cmd
	log  *bytes.Buffer
	mu   *sync.Mutex
	done chan struct{}
	err  error
	addr string
}

// startProcess runs `kubesearch ARGS...`; it is stopped (SIGTERM, then SIGKILL) when the test ends.
// Its log is printed if the test fails.
func startProcess(t *testing.T, name string, args ...string) *process {
	t.Helper()
	bin := kubesearchBinary(t)
	p := &process{t: t, log: &bytes.Buffer{}, mu: &sync.Mutex{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	w := &lockedWriter{mu: p.mu, w: p.log}
	p.cmd.Stdout, p.cmd.Stderr = w, w
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop(10 * time.Second)
		if t.Failed() {
			t.Logf("---- log of %s ----\n%s", name, p.output())
		}
	})
	return p
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (p *process) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

func (p *process) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.t.Fatalf("signal %v: %v", sig, err)
	}
}

// stop sends SIGTERM and waits; after the timeout it kills. It returns the exit error.
func (p *process) stop(timeout time.Duration) error {
	_ = p.cmd.Process.Signal(syscall.SIGCONT) // a paused process cannot handle SIGTERM
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	return p.err
}

func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// waitHTTP polls url until it answers 200.
func waitHTTP(t *testing.T, url string, timeout time.Duration) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		last = fmt.Sprintf("%s: %s", resp.Status, body)
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("GET %s never answered 200 within %s; last: %s", url, timeout, last)
	}
}

// eventLog reads a topic from its start into memory, in partition order.
type eventLog struct {
	mu     sync.Mutex
	events []*envelope.Event
}

// tailTopic starts reading a topic with a fresh consumer group until the test ends.
func tailTopic(t *testing.T, brokers []string, topic string) *eventLog {
	t.Helper()
	l := &eventLog{}
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: brokers, Topic: topic, GroupID: uniqueName("e2e-tail"), MaxBytes: 8 << 20,
		StartOffset: kafka.FirstOffset, MaxWait: 100 * time.Millisecond,
		// The topic may not exist yet (the collector creates it): pick up its partitions once it does.
		WatchPartitionChanges: true, PartitionWatchInterval: 500 * time.Millisecond,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			m, err := r.FetchMessage(ctx)
			if err != nil {
				return
			}
			ev, err := envelope.Unmarshal(m.Value)
			if err != nil {
				t.Errorf("topic %s offset %d: %v", topic, m.Offset, err)
				continue
			}
			l.mu.Lock()
			l.events = append(l.events, ev)
			l.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = r.Close()
	})
	return l
}

func (l *eventLog) snapshot() []*envelope.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*envelope.Event(nil), l.events...)
}

// waitFor polls the log until cond holds.
func (l *eventLog) waitFor(t *testing.T, what string, timeout time.Duration, cond func([]*envelope.Event) bool) []*envelope.Event {
	t.Helper()
	var evs []*envelope.Event
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		evs = l.snapshot()
		return cond(evs), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (have %d events)", what, err, len(evs))
	}
	return evs
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
