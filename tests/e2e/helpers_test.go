//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/mappings"
	"github.com/kubesearch/kubesearch/tests/testbed"
)

var (
	// buildFlags build the components with the race detector for the tests; benchmarks clear them.
	buildFlags = []string{"-race"}
	binOnce    sync.Once
	binPath    string
	binErr     error
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
		cmd := exec.Command("go", append(append([]string{"build"}, buildFlags...), "-o", binPath, "./cmd/kubesearch")...)
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
// Its log is printed if the test fails, and kept in $KUBESEARCH_E2E_LOGDIR when that is set.
func startProcess(t *testing.T, name string, args ...string) *process {
	t.Helper()
	bin := kubesearchBinary(t)
	p := &process{t: t, log: &bytes.Buffer{}, mu: &sync.Mutex{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	var w io.Writer = &lockedWriter{mu: p.mu, w: p.log}
	if dir := os.Getenv("KUBESEARCH_E2E_LOGDIR"); dir != "" {
		// Keeps every component's log, a passing test's too: how long a fault took is read there.
		f, err := os.Create(filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())+"."+name+"."+strconv.Itoa(int(time.Now().UnixMilli()))+".log"))
		if err != nil {
			t.Fatalf("KUBESEARCH_E2E_LOGDIR: %v", err)
		}
		t.Cleanup(func() { _ = f.Close() })
		w = &lockedWriter{mu: p.mu, w: io.MultiWriter(p.log, f)}
	}
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

// eventLog is what a topic holds, read partition by partition from its start. Each refresh dials the
// partition leaders anew, so it keeps working across broker restarts, and reads every offset once.
type eventLog struct {
	t         *testing.T
	brokers   []string
	topic     string
	mu        sync.Mutex
	next      map[int]int64
	events    []*envelope.Event
	values    [][]byte // values[i] is the message of events[i], as read
	lastError error
}

const topicPartitions = 12 // the collector's default

// tailTopic creates the topic (so it exists before anything reads it) and returns its log.
func tailTopic(t *testing.T, brokers []string, topic string) *eventLog {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 30 * time.Second}
	if _, err := client.CreateTopics(t.Context(), &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
		Topic: topic, NumPartitions: topicPartitions, ReplicationFactor: -1}}}); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	waitTopicReady(t, brokers, topic, topicPartitions)
	return &eventLog{t: t, brokers: brokers, topic: topic, next: map[int]int64{}}
}

// waitTopicReady waits until every partition of a just-created topic has a leader: before that,
// produce requests fail with "Unknown Topic Or Partition".
func waitTopicReady(t *testing.T, brokers []string, topic string, partitions int) {
	t.Helper()
	pollUntil(t, "leaders for every partition of "+topic, time.Minute, func(ctx context.Context) (bool, error) {
		for p := range partitions {
			conn, err := kafka.DialLeader(ctx, "tcp", brokers[0], topic, p)
			if err != nil {
				return false, nil
			}
			_ = conn.Close()
		}
		return true, nil
	})
}

// refresh reads what was appended to each partition since the last refresh. A partition that cannot
// be read now (broker restarting) is tried again next time.
func (l *eventLog) refresh(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for p := range topicPartitions {
		if err := l.readPartition(ctx, p); err != nil {
			l.lastError = err
		}
	}
}

func (l *eventLog) readPartition(ctx context.Context, p int) error {
	conn, err := l.dialLeader(ctx, p)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second)) // a leader hung after the dial
	last, err := conn.ReadLastOffset()
	if err != nil {
		return err
	}
	for l.next[p] < last {
		if _, err := conn.Seek(l.next[p], kafka.SeekAbsolute); err != nil {
			return err
		}
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		batch := conn.ReadBatch(1, 16<<20)
		for {
			m, err := batch.ReadMessage()
			if err != nil {
				break
			}
			if m.Offset < l.next[p] {
				continue
			}
			l.next[p] = m.Offset + 1
			ev, err := envelope.Unmarshal(m.Value)
			if err != nil {
				l.t.Errorf("topic %s partition %d offset %d: %v", l.topic, p, m.Offset, err)
				continue
			}
			l.events = append(l.events, ev)
			l.values = append(l.values, append([]byte(nil), m.Value...))
		}
		if err := batch.Close(); err != nil {
			return err
		}
	}
	return nil
}

// dialLeader asks each broker in turn for the partition's leader, so a log read by a fault test
// keeps working while one broker is killed or hung (each dial bounded: a hung broker accepts
// connections and never answers).
func (l *eventLog) dialLeader(ctx context.Context, p int) (*kafka.Conn, error) {
	var errs []error
	for _, b := range l.brokers {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		conn, err := kafka.DialLeader(dctx, "tcp", b, l.topic, p)
		cancel()
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func (l *eventLog) snapshot() []*envelope.Event {
	l.refresh(l.t.Context())
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*envelope.Event(nil), l.events...)
}

// rawSnapshot is every message read so far, as read.
func (l *eventLog) rawSnapshot() [][]byte {
	l.refresh(l.t.Context())
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([][]byte(nil), l.values...)
}

// waitFor polls the log until cond holds.
func (l *eventLog) waitFor(t *testing.T, what string, timeout time.Duration, cond func([]*envelope.Event) bool) []*envelope.Event {
	t.Helper()
	var evs []*envelope.Event
	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		evs = l.snapshot()
		return cond(evs), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (have %d events; last read error: %v)", what, err, len(evs), l.lastError)
	}
	return evs
}

// freePort returns a loopback port below the kernel's ephemeral range, for the same reason as the test
// bed's free_port: a port from that range can be taken by an outgoing connection before the process
// under test binds it. Ports handed out are never handed out again in this test binary.
func freePort(t *testing.T) int {
	t.Helper()
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 10001 {
				low = n
			}
		}
	}
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		port := 10000 + rand.IntN(low-10000)
		if portsTaken[port] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		l.Close()
		portsTaken[port] = true
		return port
	}
	t.Fatal("no free loopback port below the ephemeral range")
	return 0
}

var (
	portsMu    sync.Mutex
	portsTaken = map[int]bool{}
)

// metricText is the value of an unlabelled series in a Prometheus exposition, "?" when absent.
func metricText(exposition, name string) string {
	for line := range strings.Lines(exposition) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			return v
		}
	}
	return "?"
}

func metricValue(exposition, name string) float64 {
	v, _ := strconv.ParseFloat(metricText(exposition, name), 64)
	return v
}

// metricSum adds up every series of a metric, labelled or not.
func metricSum(exposition, name string) float64 {
	var sum float64
	for line := range strings.Lines(exposition) {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, name); ok && (strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, "{")) {
			v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			sum += v
		}
	}
	return sum
}

// templatePrefix installs the index template of a new prefix named after name, for a test that
// writes its own documents; the template and every index of the prefix are deleted after the test.
func templatePrefix(t *testing.T, env *testbed.Env, name string) string {
	t.Helper()
	prefix := uniqueName(name)
	tmpl, err := mappings.IndexTemplate(mappings.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	mustHTTP(t, "PUT", env.OpenSearchURL+"/_index_template/"+mappings.TemplateName(prefix), string(tmpl))
	t.Cleanup(func() {
		for _, path := range []string{"/" + prefix + "-*?expand_wildcards=all", "/_index_template/" + mappings.TemplateName(prefix)} {
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodDelete, env.OpenSearchURL+path, nil)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}
	})
	return prefix
}
