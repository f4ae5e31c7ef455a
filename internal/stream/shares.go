package stream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// SharesConfig says which shares a ShareGroup divides, and among whom.
type SharesConfig struct {
	// Topic's partitions are the shares. It holds no messages; it is created with Count partitions
	// when missing.
	Topic string
	Count int
	// Group is the consumer group of the processes sharing them.
	Group string
}

// Holding is this process's part of the shares for one generation of the group.
type Holding struct {
	Generation int32
	Member     string
	// Shares are the partitions held, sorted; none when the group has more members than shares.
	Shares []int
	// Done is closed once the generation ends: the group rebalances (a member joined or left, or
	// lost its session) or this process lost its own session. The next holding says what is held
	// then; until Confirm says otherwise the shares of this one are still held.
	Done <-chan struct{}
}

// Holds tells whether share s is held.
func (h Holding) Holds(s int) bool {
	_, ok := slices.BinarySearch(h.Shares, s)
	return ok
}

// ShareGroup divides a fixed set of shares among the live processes of a Kafka consumer group, each
// share held by exactly one of them per generation: a lease that lives where the event stream does,
// replicated as Kafka replicates its group state. A process that stops heartbeating (killed, hung,
// cut off from the brokers) loses its shares after the session timeout, one that closes the group
// hands them over at once. Kafka cannot fence writes by generation, so a holder that may act on a
// share after losing it (say after SIGSTOP) asks Confirm first.
type ShareGroup struct {
	client *Client
	cfg    SharesConfig
	log    func(msg string, args ...any)

	once sync.Once
	cg   *kafka.ConsumerGroup
	err  error

	coordMu sync.Mutex
	coord   net.Addr // the group coordinator Confirm last reached; nil: look it up
}

// ShareSessionTimeout is how long the group waits for a member's heartbeat before its shares move
// to the others: the bound of a takeover after kill -9 or SIGSTOP, with a heartbeat interval and a
// join on top. Kafka's group.min.session.timeout.ms (6 s by default) is the least it accepts.
const ShareSessionTimeout = 10 * time.Second

// NewShareGroup returns a group that joins on the first Next; it connects to nothing before.
func (c *Client) NewShareGroup(cfg SharesConfig) (*ShareGroup, error) {
	var errs []error
	if cfg.Topic == "" {
		errs = append(errs, errors.New("no topic"))
	}
	if cfg.Group == "" {
		errs = append(errs, errors.New("no consumer group"))
	}
	if cfg.Count < 1 {
		errs = append(errs, fmt.Errorf("shares: want at least 1, got %d", cfg.Count))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("share group %q: %w", cfg.Group, err)
	}
	return &ShareGroup{client: c, cfg: cfg, log: func(msg string, args ...any) {
		c.log.Warn(fmt.Sprintf(msg, args...), "group", cfg.Group, "source", "kafka-go")
	}}, nil
}

// join creates the topic when missing and starts the consumer group, once.
func (s *ShareGroup) join(ctx context.Context) (*kafka.ConsumerGroup, error) {
	if err := s.client.EnsureTopic(ctx, Topic{Name: s.cfg.Topic, Partitions: s.cfg.Count,
		Config: map[string]string{"retention.ms": "60000"}}); err != nil {
		return nil, err
	}
	s.once.Do(func() {
		s.cg, s.err = kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
			ID:      s.cfg.Group,
			Brokers: s.client.brokers,
			Dialer:  s.client.conn.dialer(s.client.dialer),
			Topics:  []string{s.cfg.Topic},
			// Range keeps a member's shares contiguous, so adding a member moves a slice of them,
			// not a scatter.
			GroupBalancers:    []kafka.GroupBalancer{kafka.RangeGroupBalancer{}},
			SessionTimeout:    ShareSessionTimeout,
			HeartbeatInterval: 2 * time.Second,
			RebalanceTimeout:  ShareSessionTimeout,
			// kafka-go's 5 s between failed joins would add itself to every takeover that follows a
			// lost coordinator.
			JoinGroupBackoff: time.Second,
			// Nothing is read: the offsets are never used.
			StartOffset: kafka.LastOffset,
			ErrorLogger: kafka.LoggerFunc(s.log),
		})
	})
	return s.cg, s.err
}

// Next blocks until the group's next generation and returns what this process holds in it. The
// first call joins the group. It returns an error wrapping ctx's once ctx is done; another error (a
// failed join, Kafka away) is worth calling Next again, which kafka-go paces.
func (s *ShareGroup) Next(ctx context.Context) (Holding, error) {
	cg, err := s.join(ctx)
	if err != nil {
		return Holding{}, fmt.Errorf("join share group %s: %w", s.cfg.Group, err)
	}
	gen, err := cg.Next(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return Holding{}, fmt.Errorf("join share group %s: %w", s.cfg.Group, ctx.Err())
		}
		return Holding{}, fmt.Errorf("join share group %s: %w", s.cfg.Group, err)
	}
	h := Holding{Generation: gen.ID, Member: gen.MemberID}
	for _, a := range gen.Assignments[s.cfg.Topic] {
		h.Shares = append(h.Shares, a.ID)
	}
	slices.Sort(h.Shares)
	done := make(chan struct{})
	h.Done = done
	// Returns at once when the generation ends, so kafka-go joins the next one without waiting:
	// the caller keeps what it runs until the next holding says what moved (see Confirm).
	gen.Start(func(gctx context.Context) {
		<-gctx.Done()
		close(done)
	})
	return h, nil
}

// Confirm asks the group's coordinator whether h is still current: nil means that, as the
// coordinator answered, no other process can hold h's shares. It fails during a rebalance and after
// this process lost its session, so a holder that confirms before it starts something new on a share
// never starts it after another process took the share over.
func (s *ShareGroup) Confirm(ctx context.Context, h Holding) error {
	addr, err := s.coordinator(ctx)
	if err != nil {
		return fmt.Errorf("confirm generation %d of share group %s: %w", h.Generation, s.cfg.Group, err)
	}
	resp, err := s.client.kc.Heartbeat(ctx, &kafka.HeartbeatRequest{Addr: addr, GroupID: s.cfg.Group,
		GenerationID: h.Generation, MemberID: h.Member})
	if err == nil {
		err = resp.Error
	}
	if err != nil {
		s.coordMu.Lock()
		s.coord = nil // a moved coordinator answers NOT_COORDINATOR: look it up again next time
		s.coordMu.Unlock()
		return fmt.Errorf("confirm generation %d of share group %s: %w", h.Generation, s.cfg.Group, err)
	}
	return nil
}

func (s *ShareGroup) coordinator(ctx context.Context) (net.Addr, error) {
	s.coordMu.Lock()
	defer s.coordMu.Unlock()
	if s.coord != nil {
		return s.coord, nil
	}
	resp, err := s.client.kc.FindCoordinator(ctx, &kafka.FindCoordinatorRequest{Key: s.cfg.Group,
		KeyType: kafka.CoordinatorKeyTypeConsumer})
	if err == nil && resp.Error != nil {
		err = resp.Error
	}
	if err != nil {
		return nil, fmt.Errorf("find the coordinator: %w", err)
	}
	if resp.Coordinator == nil {
		return nil, errors.New("find the coordinator: none named")
	}
	s.coord = kafka.TCP(net.JoinHostPort(resp.Coordinator.Host, strconv.Itoa(resp.Coordinator.Port)))
	return s.coord, nil
}

// Close leaves the group, so the shares move to the other members at once.
func (s *ShareGroup) Close() error {
	s.once.Do(func() {}) // a Next after Close must not join
	if s.cg == nil {
		return nil
	}
	if err := s.cg.Close(); err != nil {
		return fmt.Errorf("leave share group %s: %w", s.cfg.Group, err)
	}
	return nil
}
