package collector

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/lifecycle"
	"github.com/kubesearch/kubesearch/internal/registry"
	"github.com/kubesearch/kubesearch/internal/stream"
)

// The lease (Options.Lease) lets replicas of one collector — the same --name, topic and
// configuration — share its member clusters, each collected by exactly one replica at a time.
//
// It lives in Kafka, which every collector needs already and which replicates it: the replicas are
// the members of one consumer group (leaseGroup) over a topic of leaseShares partitions that holds no
// messages (leaseTopic); a cluster belongs to share fnv32a(name) mod leaseShares, and the replica the
// group assigns that partition to collects it. No member cluster is written to (a Lease object in
// each member would need write access where the collector only reads) and no other store is needed.
// A replica killed or hung loses its shares after stream.ShareSessionTimeout; one stopped with
// SIGTERM leaves the group and hands them over at once.
//
// Kafka cannot refuse a write by a replica that lost its shares, so the epochs fence it. The indexer
// drops every event of an older epoch than one it has seen for the same scope (in the same partition,
// hence in order), so a replica that lost a cluster can publish nothing that counts once the new
// holder's first event is in, provided the new holder's epochs are higher than any the old one handed
// out and the old one hands out none after losing the cluster:
//   - a new epoch is handed out only after the coordinator confirmed the holding that holds its
//     cluster (stream.ShareGroup.Confirm): after a takeover, the old holder's confirmation fails,
//     also when it wakes from SIGSTOP with its goroutines mid-way;
//   - every epoch handed out was reserved in the ledger first (envelope.Epochs), and a replica that
//     gains clusters reads the ledger again and starts above every reservation in it.
//
// Between consecutive generations a replica keeps collecting what it held: only clusters whose share
// moved are stopped (without a purge: they are collected elsewhere) and only new ones started, so a
// replica joining or leaving does not make the others re-list the fleet. A replica that missed a
// generation (hung past its session) starts everything it holds over: another may have collected it
// meanwhile, in newer epochs.

const leaseShares = 60 // divides evenly among 2, 3, 4, 5 and 6 replicas

func leaseTopic(topic string) string { return registry.LedgerTopic(topic) + ".lease" }

func leaseGroup(topic, name string) string { return "kubesearch-collector." + topic + "." + name }

// share is the lease share of a cluster.
func share(cluster string) int {
	h := fnv.New32a()
	h.Write([]byte(cluster))
	return int(h.Sum32() % leaseShares)
}

// shares is what the collector needs of a stream.ShareGroup.
type shares interface {
	Next(ctx context.Context) (stream.Holding, error)
	Confirm(ctx context.Context, h stream.Holding) error
	Close() error
}

// lease is this replica's current holding.
type lease struct {
	group shares
	log   *slog.Logger

	mu  sync.Mutex
	cur stream.Holding
}

func (l *lease) holding() stream.Holding {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur
}

func (l *lease) set(h stream.Holding) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cur = h
}

// holds tells whether the current holding holds the cluster.
func (l *lease) holds(cluster string) bool { return l.holding().Holds(share(cluster)) }

// confirm returns nil when the cluster is held and the coordinator confirms the holding.
func (l *lease) confirm(ctx context.Context, cluster string) error {
	h := l.holding()
	if !h.Holds(share(cluster)) {
		return fmt.Errorf("cluster %s: collected by another replica since generation %d", cluster, h.Generation)
	}
	return l.group.Confirm(ctx, h)
}

// next waits for the group's next generation, retrying what fails (Kafka away, a failed join) until
// ctx ends.
func (l *lease) next(ctx context.Context) (stream.Holding, error) {
	bo := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.2, Cap: 5 * time.Second, Steps: 1 << 30}
	for {
		h, err := l.group.Next(ctx)
		if err == nil {
			l.log.Info("lease: holding", "generation", h.Generation, "shares", len(h.Shares), "of", leaseShares)
			return h, nil
		}
		if ctx.Err() != nil {
			return stream.Holding{}, ctx.Err()
		}
		delay := bo.Step()
		l.log.Warn("lease: cannot join the collectors' group, retrying", "retryIn", delay.Round(time.Millisecond), "err", err)
		if err := lifecycle.Sleep(ctx, delay); err != nil {
			return stream.Holding{}, err
		}
	}
}

// epochSource hands out the epochs of one cluster's collections.
type epochSource interface {
	Next(ctx context.Context) (int64, error)
}

// fencedEpochs are the process's epochs, each handed out only once the lease holding the cluster is
// confirmed (see the top of this file); without a lease, the epochs as they are.
type fencedEpochs struct {
	epochs  *envelope.Epochs
	lease   *lease // nil: no lease
	cluster string
}

func (f fencedEpochs) Next(ctx context.Context) (int64, error) {
	epoch, err := f.epochs.Next(ctx)
	if err != nil || f.lease == nil {
		return epoch, err
	}
	if err := f.lease.confirm(ctx, f.cluster); err != nil {
		return 0, fmt.Errorf("epoch not used, the lease is not confirmed: %w", err)
	}
	return epoch, nil
}

func (c *Collector) epochsOf(cluster string) epochSource {
	return fencedEpochs{epochs: c.epochs, lease: c.lease, cluster: cluster}
}

// held is the part of plan this replica collects: all of it without a lease.
func (c *Collector) held(plan registry.Plan) registry.Plan {
	if c.lease == nil {
		return plan
	}
	h := c.lease.holding()
	out := registry.Plan{}
	for _, cp := range plan.Clusters {
		if h.Holds(share(cp.Cluster.Name)) {
			out.Clusters = append(out.Clusters, cp)
		}
	}
	return out
}

// holdsCluster tells whether this replica collects the cluster: always without a lease.
func (c *Collector) holdsCluster(cluster string) bool {
	return c.lease == nil || c.lease.holds(cluster)
}

// follow applies every next holding of the lease until ctx is done.
func (c *Collector) follow(ctx context.Context) error {
	for {
		h := c.lease.holding()
		select {
		case <-ctx.Done():
			return nil
		case <-h.Done:
		}
		next, err := c.lease.next(ctx)
		if err != nil {
			return nil // ctx done
		}
		c.hold(ctx, next)
	}
}

// hold moves to holding h: clusters whose share moved away stop (nothing is purged: another replica
// collects them now), clusters gained start above every epoch the ledger records, after what their
// previous holder left unpurged is purged.
func (c *Collector) hold(ctx context.Context, h stream.Holding) {
	c.mu.Lock()
	defer c.mu.Unlock()
	before := c.held(c.plan)
	prev := c.lease.holding()
	c.lease.set(h)
	after := c.held(c.plan)
	// A cluster stays where it runs only if this replica held it in the generation just before: a
	// replica that missed a generation (hung past its session, or cut off) may have had its clusters
	// collected elsewhere meanwhile, in newer epochs than its own collections', which the indexer would
	// then drop for good. Those start over, above every epoch the ledger records.
	consecutive := h.Generation == prev.Generation+1
	var kept registry.Plan
	for _, cp := range before.Clusters {
		if _, stays := after.Cluster(cp.Cluster.Name); stays && consecutive {
			kept.Clusters = append(kept.Clusters, cp)
			continue
		}
		if mr := c.members[cp.Cluster.Name]; mr != nil {
			c.log.Info("lease: cluster moved to another replica or may have since the last generation held, stopping its collections",
				"cluster", cp.Cluster.Name, "generation", h.Generation, "previous", prev.Generation)
			mr.cancel()
			<-mr.done
			delete(c.members, cp.Cluster.Name)
		}
	}
	if len(after.Clusters) > len(kept.Clusters) {
		// The previous holder's ledger records: its epochs reservations and what it left to purge.
		floor, err := c.ledger.load(ctx)
		if err != nil {
			return // shutting down
		}
		c.epochs.Restore(floor)
		if err := c.purgeForgotten(ctx); err != nil && ctx.Err() == nil {
			c.log.Error("purge not acknowledged by Kafka; the ledger keeps the selections, so the next start purges them", "err", err)
		}
	}
	c.apply(ctx, kept, after)
	c.log.Info("lease: collecting", "generation", h.Generation, "clusters", len(after.Clusters), "of", len(c.plan.Clusters))
}
