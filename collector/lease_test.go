package collector

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/registry"
	"github.com/kubesearch/kubesearch/internal/stream"
)

// fakeShares is a share group whose holdings the test hands out.
type fakeShares struct {
	mu        sync.Mutex
	confirmed []int32 // generations confirmed
	refuse    error   // Confirm's answer when set
}

func (f *fakeShares) Next(ctx context.Context) (stream.Holding, error) {
	<-ctx.Done()
	return stream.Holding{}, ctx.Err()
}

func (f *fakeShares) Confirm(_ context.Context, h stream.Holding) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse != nil {
		return f.refuse
	}
	f.confirmed = append(f.confirmed, h.Generation)
	return nil
}

func (f *fakeShares) Close() error { return nil }

func holding(gen int32, clusters ...string) stream.Holding {
	h := stream.Holding{Generation: gen, Done: make(chan struct{})}
	for _, c := range clusters {
		h.Shares = append(h.Shares, share(c))
	}
	slices.Sort(h.Shares)
	return h
}

// twoShares returns two cluster names of different shares.
func twoShares(t *testing.T) (string, string) {
	t.Helper()
	a := "member-a"
	for i := range 100 {
		b := "member-b" + strings.Repeat("x", i)
		if share(b) != share(a) {
			return a, b
		}
	}
	t.Fatal("no two names of different shares")
	return "", ""
}

// An epoch is handed out only for a cluster of the current holding and once the coordinator
// confirmed that holding: a replica that lost a cluster, or whose generation ended, starts nothing.
func TestLeaseFencesEpochs(t *testing.T) {
	a, b := twoShares(t)
	group := &fakeShares{}
	l := &lease{group: group, log: slog.New(slog.DiscardHandler)}
	l.set(holding(7, a))
	src := fencedEpochs{epochs: envelope.NewEpochs(time.Now, nil), lease: l, cluster: a}
	if _, err := src.Next(t.Context()); err != nil {
		t.Fatalf("held and confirmed: %v", err)
	}
	if !slices.Equal(group.confirmed, []int32{7}) {
		t.Errorf("confirmed generations %v, want [7]", group.confirmed)
	}
	if _, err := (fencedEpochs{epochs: src.epochs, lease: l, cluster: b}).Next(t.Context()); err == nil {
		t.Error("an epoch of a cluster the holding does not hold was handed out")
	}
	group.refuse = errors.New("[22] Illegal Generation")
	if _, err := src.Next(t.Context()); err == nil || !strings.Contains(err.Error(), "Illegal Generation") {
		t.Errorf("an unconfirmed holding: got %v, want the coordinator's refusal", err)
	}
	if n := len(group.confirmed); n != 1 {
		t.Errorf("%d confirmations, want 1", n)
	}
}

// A new holding stops only the clusters that moved away (publishing no PURGE: they are collected
// elsewhere), keeps the others running as they were, starts the clusters gained, and hands out their
// epochs above every reservation in the ledger, the previous holder's included.
func TestHoldMovesOnlyWhatMoved(t *testing.T) {
	ctx := t.Context()
	a, b := twoShares(t)
	log := slog.New(slog.DiscardHandler)
	broker := stream.NewLocal(stream.LocalOptions{})
	t.Cleanup(broker.Close)
	c := &Collector{opts: Options{PageSize: 100, QPS: 5, Burst: 5, DiscoveryInterval: time.Minute}, log: log, kafka: broker,
		members: map[string]*memberRun{}}
	c.pub = newPublisher(broker, publisherOptions{Topic: "events", Partitions: 1, MaxMessageBytes: 1 << 20, Buffer: 16, Batch: 16}, log)
	c.metrics = newMetrics(func() float64 { return float64(len(c.pub.queue)) })
	c.pub.metrics = c.metrics
	c.ledger = newLedger(broker, "events", "collector", log)
	c.epochs = envelope.NewEpochs(time.Now, c.ledger.reserve)
	c.lease = &lease{group: &fakeShares{}, log: log}
	pubDone := make(chan struct{})
	go func() {
		defer close(pubDone)
		_ = c.pub.run(ctx)
	}()
	t.Cleanup(func() {
		c.mu.Lock()
		for _, mr := range c.members {
			mr.cancel()
			<-mr.done
		}
		c.mu.Unlock()
		c.pub.close()
		<-pubDone
		_ = c.ledger.close()
		_ = c.pub.writer.Close()
	})

	// Members nobody answers at: their collections retry, which is all this test needs of them.
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	sel := registry.Selection{SelectionKey: registry.SelectionKey{Kind: "ConfigMap"}, Version: "v1", Sources: []registry.Source{{Registry: "r"}}}
	for _, name := range []string{a, b} {
		c.plan.Clusters = append(c.plan.Clusters, registry.ClusterPlan{
			Cluster:    registry.Cluster{Name: name, Server: "https://127.0.0.1:1", TokenFile: token, InsecureSkipTLSVerify: true},
			Selections: []registry.Selection{sel}})
	}
	slices.SortFunc(c.plan.Clusters, func(x, y registry.ClusterPlan) int { return strings.Compare(x.Cluster.Name, y.Cluster.Name) })
	if _, err := c.ledger.load(ctx); err != nil {
		t.Fatal(err)
	}

	c.lease.set(holding(1, a))
	c.apply(ctx, registry.Plan{}, c.held(c.plan))
	if got := memberNames(c); !slices.Equal(got, []string{a}) {
		t.Fatalf("generation 1 runs %v, want [%s]", got, a)
	}
	runA := c.members[a]

	// The other replica, holding b, reserved epochs far ahead of this one's clock.
	other := newLedger(broker, "events", "collector", log)
	t.Cleanup(func() { _ = other.close() })
	other.serve(registry.Plan{Clusters: []registry.ClusterPlan{{Cluster: registry.Cluster{Name: b}}}})
	ahead := time.Now().Add(time.Hour).UnixMicro()
	if err := other.reserve(ctx, ahead); err != nil {
		t.Fatal(err)
	}

	c.hold(ctx, holding(2, a, b))
	if got := memberNames(c); !slices.Equal(got, []string{a, b}) {
		t.Fatalf("generation 2 runs %v, want [%s %s]", got, a, b)
	}
	if c.members[a] != runA {
		t.Errorf("%s was restarted although it stayed with this replica", a)
	}
	if e, err := c.epochsOf(b).Next(ctx); err != nil || e <= ahead {
		t.Errorf("epoch of %s after the takeover: %d, %v; want above the other replica's reservation %d", b, e, err, ahead)
	}

	// This replica missed generation 3 (hung past its session): what it holds again in 4 may have been
	// collected elsewhere in 3, in newer epochs, so it starts over above them.
	runB := c.members[b]
	if err := other.reserve(ctx, ahead+time.Hour.Microseconds()); err != nil {
		t.Fatal(err)
	}
	c.hold(ctx, holding(4, a, b))
	if got := memberNames(c); !slices.Equal(got, []string{a, b}) {
		t.Fatalf("generation 4 runs %v, want [%s %s]", got, a, b)
	}
	if c.members[b] == runB || c.members[a] == runA {
		t.Error("a replica that missed a generation kept its collections running in their old epochs")
	}
	if e, err := c.epochsOf(a).Next(ctx); err != nil || e <= ahead+time.Hour.Microseconds() {
		t.Errorf("epoch of %s after the missed generation: %d, %v; want above the latest reservation", a, e, err)
	}
	runA = c.members[a]

	c.hold(ctx, holding(5, b))
	if got := memberNames(c); !slices.Equal(got, []string{b}) {
		t.Fatalf("generation 5 runs %v, want [%s]", got, b)
	}
	select {
	case <-runA.done:
	default:
		t.Errorf("%s still runs after its share moved away", a)
	}
	if err := c.pub.flush(ctx); err != nil {
		t.Fatal(err)
	}
	msgs, err := broker.ReadPartition(ctx, "events", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if strings.Contains(string(m.Value), `"type":"PURGE"`) {
			t.Errorf("a cluster that moved to another replica was purged: %s", m.Value)
		}
	}
	if _, err := c.epochsOf(a).Next(ctx); err == nil {
		t.Errorf("an epoch of %s, no longer held, was handed out", a)
	}
}

func memberNames(c *Collector) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for name := range c.members {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}
