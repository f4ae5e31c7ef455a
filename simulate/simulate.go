package simulate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/lifecycle"
	"github.com/kubesearch/kubesearch/internal/registry"
	"github.com/kubesearch/kubesearch/internal/serving"
	"github.com/kubesearch/kubesearch/internal/stream"
)

// Simulator writes a simulated fleet to the event stream.
type Simulator struct {
	opts     Options
	log      *slog.Logger
	seed     uint64
	run      uint64    // this run, mixed into the identities of the objects its churn creates
	start    time.Time // the simulation's "now" for the objects' ages
	selected [kindCount]bool

	broker stream.Broker
	events stream.Writer
	ledger stream.Writer
	epochs *envelope.Epochs

	clusters []*cluster
	byName   map[string]*cluster

	apps     []*app   // made by New, read-only afterwards
	stencils sync.Map // stencilKey → *stencil
	docs     sync.Map // OpenAPI path → openAPIDoc

	stats     stats
	listener  net.Listener
	endpoints *serving.Endpoints
	ready     chan struct{} // closed once every list is published

	mu     sync.Mutex // guards the report's phase and times
	report Report
}

// Report is what a simulation published, so far.
type Report struct {
	Seed              uint64   `json:"seed"`
	Clusters          int      `json:"clusters"`
	ObjectsPerCluster int      `json:"objectsPerCluster"`
	Kinds             []string `json:"kinds"`
	// Phase is "starting", "listing", "churning" or "done".
	Phase string `json:"phase"`
	// Events are the events published (acknowledged by Kafka), by type; Bytes their envelopes'
	// bytes before compression.
	Events map[envelope.Type]int64 `json:"events"`
	Bytes  int64                   `json:"bytes"`
	// Objects is how many objects of the selected kinds the simulated clusters hold now: what the
	// index holds of them once it is current.
	Objects int64 `json:"objects"`
	// ListSeconds is how long the lists took to publish, from the first event to Kafka's last
	// acknowledgement (the ledger's records before them are not counted);
	// ListEventsPerSecond and ListMiBPerSecond their rate.
	ListSeconds         float64 `json:"listSeconds,omitempty"`
	ListEventsPerSecond float64 `json:"listEventsPerSecond,omitempty"`
	ListMiBPerSecond    float64 `json:"listMiBPerSecond,omitempty"`
	// ChurnEvents is how many changes the churn published in ChurnSeconds.
	ChurnEvents  int64   `json:"churnEvents"`
	ChurnSeconds float64 `json:"churnSeconds,omitempty"`
	// LastChanges are, for a few pairs per event type, the pair's last churn event: the state the
	// member holds of that object now (a MODIFIED object is at that resourceVersion, a DELETED one
	// gone), which a reader of the index can check.
	LastChanges []Change `json:"lastChanges,omitempty"`
}

// Change is one churn event.
type Change struct {
	Type            envelope.Type `json:"type"`
	Cluster         string        `json:"cluster"`
	Group           string        `json:"group"`
	Version         string        `json:"version"`
	Resource        string        `json:"resource"`
	Namespace       string        `json:"namespace,omitempty"`
	Name            string        `json:"name"`
	UID             string        `json:"uid"`
	ResourceVersion string        `json:"resourceVersion"`
}

// New validates the options, makes the fleet (every cluster's objects at start, in memory: about
// 40 bytes per object) and opens the listener. Nothing connects to Kafka before Run.
func New(opts Options) (*Simulator, error) {
	opts.SetDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	now := time.Now()
	s := &Simulator{opts: opts, log: opts.Logger, seed: opts.Seed, run: uint64(now.UnixNano()), start: now.Truncate(time.Second),
		byName: map[string]*cluster{}, ready: make(chan struct{})}
	for k := range kinds {
		s.selected[k] = len(opts.Kinds) == 0 || slices.Contains(opts.Kinds, kinds[k].id())
	}
	for i := 1; i <= opts.Clusters; i++ {
		c := s.newCluster(i, now)
		s.clusters = append(s.clusters, c)
		s.byName[c.name] = c
	}
	s.report = Report{Seed: opts.Seed, Clusters: opts.Clusters, ObjectsPerCluster: opts.Objects, Phase: "starting"}
	for k := range kinds {
		if s.selected[k] {
			s.report.Kinds = append(s.report.Kinds, kinds[k].id())
		}
	}
	s.broker = opts.Stream
	if s.broker == nil {
		conn, err := opts.Kafka.Resolve()
		if err != nil {
			return nil, err
		}
		s.broker = stream.NewClient(opts.Brokers, conn, s.log)
	}
	s.events = s.broker.NewWriter(stream.WriterOptions{BatchSize: opts.PublishBatch, BatchBytes: opts.MaxMessageBytes, Compress: true})
	s.ledger = s.broker.NewWriter(stream.WriterOptions{Topic: registry.LedgerTopic(opts.Topic), Compress: true,
		BatchBytes: registry.LedgerMaxMessageBytes})
	s.epochs = envelope.NewEpochs(time.Now, s.reserveEpochs)
	if opts.ListenAddr != "" {
		e, err := serving.New(opts.Endpoints, s.log)
		if err != nil {
			return nil, err
		}
		l, err := e.Listen(opts.ListenAddr)
		if err != nil {
			return nil, fmt.Errorf("--listen: %w", err)
		}
		s.listener, s.endpoints = l, e
	}
	return s, nil
}

// Addr is the address the HTTP endpoints listen on, "" without them.
func (s *Simulator) Addr() string {
	if s.listener == nil {
		return ""
	}
	return s.listener.Addr().String()
}

// Ready is closed once every cluster's lists are published and acknowledged.
func (s *Simulator) Ready() <-chan struct{} { return s.ready }

// Run publishes the simulation: the ledger's records, the PURGEs of what an earlier simulation
// made and this one does not, the lists of every cluster, then the churn. It returns once that is
// done (the churn after ChurnDuration; at once without churn), or when ctx ends; with a listener, it
// serves until ctx ends.
func (s *Simulator) Run(ctx context.Context) error {
	g := lifecycle.New(ctx)
	if s.listener != nil {
		g.Serve("http", &http.Server{Handler: s.handler(), ReadHeaderTimeout: 10 * time.Second}, s.listener)
	}
	g.OnStop("kafka writers", func(context.Context) error {
		err := errors.Join(s.events.Close(), s.ledger.Close())
		if s.opts.Stream == nil {
			s.broker.Close()
		}
		return err
	})
	g.Go("simulate", func(ctx context.Context) error {
		err := s.simulate(ctx)
		if ctx.Err() != nil {
			return nil // stopped: what was published stands
		}
		if err == nil && s.listener != nil {
			<-ctx.Done()
		}
		return err
	})
	return g.Wait(s.opts.ShutdownTimeout)
}

func (s *Simulator) simulate(ctx context.Context) error {
	if err := s.ensureTopics(ctx); err != nil {
		return err
	}
	held, err := s.readLedger(ctx)
	if err != nil {
		return err
	}
	s.epochs.Restore(held.floor)
	w0 := s.newWriter()
	if err := s.purge(ctx, w0, s.forgotten(held)); err != nil {
		return err
	}
	if err := s.recordSelections(ctx, held); err != nil {
		return err
	}
	if err := s.listAll(ctx); err != nil {
		return err
	}
	if s.opts.ChurnRate > 0 && len(s.clusters) > 0 {
		if err := s.churnAll(ctx); err != nil {
			return err
		}
	}
	s.setPhase("done")
	r := s.Report()
	s.log.Info("simulation done", "events", r.Events, "churnEvents", r.ChurnEvents, "objects", r.Objects)
	return nil
}

// ensureTopics creates the event topic and its dead-letter topic as a collector does.
func (s *Simulator) ensureTopics(ctx context.Context) error {
	if err := s.broker.EnsureTopic(ctx, stream.Topic{Name: s.opts.Topic, Partitions: s.opts.TopicPartitions,
		Config: stream.MaxMessageBytes(s.opts.MaxMessageBytes)}); err != nil {
		return err
	}
	return s.broker.EnsureTopic(ctx, stream.Topic{Name: stream.DeadLetterTopic(s.opts.Topic), Partitions: 1,
		Config: stream.MaxMessageBytes(s.opts.MaxMessageBytes + stream.DeadLetterRoom), Optional: true})
}

func (s *Simulator) newWriter() *writer {
	return &writer{w: s.events, topic: s.opts.Topic, batch: s.opts.PublishBatch, log: s.log, stats: &s.stats}
}

// shares splits the clusters between the writers: writer w publishes every Writers-th cluster.
func (s *Simulator) shares() [][]*cluster {
	n := min(s.opts.Writers, max(len(s.clusters), 1))
	out := make([][]*cluster, n)
	for i, c := range s.clusters {
		out[i%n] = append(out[i%n], c)
	}
	return out
}

// listAll publishes a list of every pair of every cluster: a new epoch, an ADDED event per object,
// a SYNC marker at the member's resourceVersion.
func (s *Simulator) listAll(ctx context.Context) error {
	s.setPhase("listing")
	start := time.Now()
	before := s.stats.total()
	bytesBefore := s.stats.bytes.Load()
	g, gctx := errgroup.WithContext(ctx)
	for _, mine := range s.shares() {
		g.Go(func() error {
			w, r := s.newWriter(), &renderer{}
			for _, c := range mine {
				if err := s.list(gctx, w, r, c); err != nil {
					return err
				}
			}
			return w.flush(gctx)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	d := time.Since(start)
	events, bytes := s.stats.total()-before, s.stats.bytes.Load()-bytesBefore
	s.mu.Lock()
	s.report.ListSeconds = d.Seconds()
	if d > 0 {
		s.report.ListEventsPerSecond = float64(events) / d.Seconds()
		s.report.ListMiBPerSecond = float64(bytes) / (1 << 20) / d.Seconds()
	}
	s.mu.Unlock()
	close(s.ready)
	s.log.Info("lists published", "clusters", len(s.clusters), "events", events, "MiB", bytes>>20,
		"seconds", d.Round(time.Millisecond).Seconds(), "eventsPerSecond", int(float64(events)/d.Seconds()))
	return nil
}

// list publishes the lists of one cluster. The churn has not started: its objects do not change
// meanwhile, only the pairs' list state, which the status endpoint reads under the lock.
func (s *Simulator) list(ctx context.Context, w *writer, r *renderer, c *cluster) error {
	for k, p := range c.pairs {
		if p == nil {
			continue
		}
		epoch, err := s.epochs.Next(ctx)
		if err != nil {
			return err
		}
		for i := range p.objs {
			ev, err := s.event(r, c, k, &p.objs[i], envelope.Added, epoch, time.Now().UTC())
			if err != nil {
				return err
			}
			if err := w.add(ctx, ev); err != nil {
				return err
			}
		}
		count := len(p.objs)
		marker := s.header(c, k, envelope.Sync, epoch, time.Now().UTC())
		marker.Count, marker.ListResourceVersion = &count, strconv.FormatInt(c.rv, 10)
		if err := w.add(ctx, marker); err != nil {
			return err
		}
		c.mu.Lock()
		p.epoch, p.listRV, p.lastRV, p.publishedAt = epoch, c.rv, c.rv, time.Now().UTC()
		c.mu.Unlock()
	}
	return nil
}

func (s *Simulator) header(c *cluster, k int, t envelope.Type, epoch int64, now time.Time) *envelope.Event {
	kk := &kinds[k]
	return &envelope.Event{V: envelope.Version, Type: t, Cluster: c.name, Group: kk.group, Version: c.served[k],
		Resource: kk.resource, Kind: kk.kind, Epoch: epoch, ObservedAt: now}
}

// event is an object's event: its state rendered, with the envelope's identity of it.
func (s *Simulator) event(r *renderer, c *cluster, k int, o *object, t envelope.Type, epoch int64, now time.Time) (*envelope.Event, error) {
	raw, err := s.render(r, c, k, o)
	if err != nil {
		return nil, err
	}
	ev := s.header(c, k, t, epoch, now)
	if kinds[k].namespaced {
		ev.Namespace = s.app(int(o.app)).Namespace
	}
	ev.Name, ev.UID, ev.ResourceVersion = string(r.values[hName]), string(r.values[hUID]), string(r.values[hRV])
	ev.ChangedAt, ev.Object = time.UnixMicro(o.changed).UTC(), raw
	return ev, nil
}

func (s *Simulator) setPhase(p string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.report.Phase = p
}

// Report is what the simulation published so far.
func (s *Simulator) Report() Report {
	s.mu.Lock()
	r := s.report
	s.mu.Unlock()
	r.Kinds = slices.Clone(r.Kinds)
	r.Events = map[envelope.Type]int64{}
	for i, t := range typeOrder {
		r.Events[t] = s.stats.events[i].Load()
	}
	r.Bytes = s.stats.bytes.Load()
	const perType = 3
	seen := map[envelope.Type]int{}
	for _, c := range s.clusters {
		c.mu.Lock()
		for _, p := range c.pairs {
			if p == nil {
				continue
			}
			r.Objects += int64(len(p.objs))
			if p.last != nil && seen[p.last.Type] < perType {
				seen[p.last.Type]++
				r.LastChanges = append(r.LastChanges, *p.last)
			}
		}
		c.mu.Unlock()
	}
	return r
}

// Status is the collectors' status of every simulated pair: one row per cluster and resource,
// under the registry named as the simulator.
func (s *Simulator) Status() []registry.ResourceStatus {
	rows := []registry.ResourceStatus{}
	for _, c := range s.clusters {
		c.mu.Lock()
		for k, p := range c.pairs {
			if p == nil {
				continue
			}
			kk := &kinds[k]
			row := registry.ResourceStatus{Registry: s.opts.Name, Cluster: c.name, Group: kk.group, Version: p.version,
				Resource: kk.resource, Kind: kk.kind, State: registry.StateUnknown, TotalNum: len(p.objs), UpdateTime: s.start}
			if p.epoch == 0 {
				row.Listing = true
			} else {
				at := p.publishedAt
				row.State, row.Epoch, row.UpdateTime, row.PublishedAt = registry.StateRunning, p.epoch, at, &at
				row.ResourceVersion = strconv.FormatInt(p.lastRV, 10)
			}
			rows = append(rows, row)
		}
		c.mu.Unlock()
	}
	return rows
}

func (s *Simulator) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		select {
		case <-s.ready:
			fmt.Fprintln(w, "ok")
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: %s\n", s.Report().Phase)
		}
	})
	// The collectors' /status, with the simulation's report beside the rows.
	mux.Handle("GET /status", s.endpoints.Guard(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"items": s.Status(), "simulation": s.Report()})
	})))
	return mux
}
