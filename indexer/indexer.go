package indexer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubesearch/kubesearch/internal/changes"
	"github.com/kubesearch/kubesearch/internal/lifecycle"
	"github.com/kubesearch/kubesearch/internal/osstore"
	"github.com/kubesearch/kubesearch/internal/serving"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/internal/stream"
)

// Backend is the store the indexer writes: OpenSearch unless Options.Backend names another.
type Backend interface {
	documents
	progress
	// Setup prepares the store for writes in one attempt; an error means it is not done, and calling
	// it again resumes it.
	Setup(ctx context.Context, o store.SetupOptions) error
}

// Indexer consumes the event stream into OpenSearch.
type Indexer struct {
	opts    Options
	log     *slog.Logger
	conn    connection
	backend Backend
	closers []func() error // of what New made, not of what Options gave
	kafka   stream.Broker
	reader  stream.GroupReader
	metrics *metrics

	listener  net.Listener
	endpoints *serving.Endpoints // who may read /metrics

	// setupStep says what setup is doing; nil once the indexer consumes.
	setupStep    atomic.Pointer[string]
	openSearchUp atomic.Bool
}

// New validates the options, reads every file they name (credentials, CA certificates, registries;
// every error at once) and opens the HTTP listener. Nothing connects to Kafka or OpenSearch before
// Run.
func New(opts Options) (*Indexer, error) {
	opts.SetDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	conn, cerr := resolveConnection(&opts)
	ix := &Indexer{opts: opts, log: opts.Logger, conn: conn, metrics: newMetrics()}
	ix.setupStep.Store(ptr("installing the index template"))
	ix.backend = opts.Backend
	if ix.backend == nil {
		// The backend reads the OpenSearch credentials: its errors join the others, so every bad
		// file is reported at once.
		backend, berr := osstore.New(osstore.Options{
			Addresses: conn.addresses, Security: opts.OpenSearch, RequestTimeout: opts.RequestTimeout, Index: opts.Index,
			Registerer: ix.metrics.registry, Reachable: ix.openSearchUp.Store, Logger: opts.Logger,
		})
		if berr == nil {
			ix.backend = backend
			ix.closers = append(ix.closers, backend.Close)
		}
		cerr = errors.Join(cerr, berr)
	} else {
		ix.openSearchUp.Store(true)
	}
	if opts.ListenAddr != "" {
		e, err := serving.New(opts.Endpoints, opts.Logger)
		ix.endpoints, cerr = e, errors.Join(cerr, err)
	}
	if cerr != nil {
		return nil, errors.Join(cerr, ix.close())
	}
	ix.kafka = opts.Stream
	if ix.kafka == nil {
		ix.kafka = stream.NewClient(opts.Brokers, conn.kafka, ix.log)
		ix.closers = append(ix.closers, func() error {
			ix.kafka.Close()
			return nil
		})
	}
	// Joins the group on its first fetch, in Run; a configuration it refuses is reported now.
	reader, err := ix.kafka.NewGroupReader(stream.GroupReaderConfig{Topic: opts.Topic, Group: opts.GroupID, MaxBytes: opts.FetchMaxBytes})
	if err != nil {
		return nil, errors.Join(err, ix.close())
	}
	ix.reader = reader
	if opts.ListenAddr != "" {
		l, err := ix.endpoints.Listen(opts.ListenAddr)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("--listen: %w", err), ix.close())
		}
		ix.listener = l
	}
	return ix, nil
}

// close releases what New made, last made first.
func (ix *Indexer) close() error {
	var errs []error
	for i := len(ix.closers) - 1; i >= 0; i-- {
		errs = append(errs, ix.closers[i]())
	}
	return errors.Join(errs...)
}

// Addr is the address the HTTP endpoints listen on.
func (ix *Indexer) Addr() string {
	if ix.listener == nil {
		return ""
	}
	return ix.listener.Addr().String()
}

// Run indexes until ctx is done: it installs the index template and the state index (waiting for
// OpenSearch), joins the consumer group and consumes. Once ctx is done it writes and commits the
// batch in flight (bounded by ShutdownTimeout), leaves the group and returns. Call it once.
func (ix *Indexer) Run(ctx context.Context) error {
	g := lifecycle.New(ctx)
	// Added before the reader's and the dead-letter writer's steps, so it runs after them: they
	// share the Kafka client's connections.
	g.OnStop("opensearch and kafka clients", func(context.Context) error { return ix.close() })
	// Servers last, so /metrics answers while the indexer drains.
	if ix.listener != nil {
		g.Serve("http", &http.Server{Handler: ix.handler(), ReadHeaderTimeout: 10 * time.Second}, ix.listener)
	}
	g.Go("index", func(ctx context.Context) error { return ix.index(ctx, g) })
	return g.Wait(ix.opts.ShutdownTimeout)
}

// index sets up, then consumes until ctx is done and the batch in flight is written and committed.
// Its Kafka clients are closed by stop steps of g, after it returned.
func (ix *Indexer) index(ctx context.Context, g *lifecycle.Group) error {
	if err := ix.setup(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped before anything was consumed
		}
		return err
	}
	// A letter larger than MaxMessageBytes is refused before it is sent, and goes again without its
	// value.
	dlq := ix.kafka.NewWriter(stream.WriterOptions{Topic: ix.opts.DeadLetterTopic, BatchBytes: ix.opts.MaxMessageBytes})
	g.OnStop("dead-letter writer", func(context.Context) error { return dlq.Close() })
	// The events topic too: a consumer group that joins before its topic exists is assigned no
	// partitions. Created with the collector's defaults when the indexer comes first.
	if err := ix.ensureTopic(ctx, ix.opts.Topic, stream.DefaultPartitions); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if err := ix.ensureTopic(ctx, ix.opts.DeadLetterTopic, 1); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	var feed stream.Writer
	if ix.opts.ChangesTopic != "" {
		if err := ix.ensureFeed(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		feed = ix.kafka.NewWriter(stream.WriterOptions{Topic: ix.opts.ChangesTopic, BatchBytes: ix.opts.MaxMessageBytes})
		g.OnStop("change feed writer", func(context.Context) error { return feed.Close() })
	}
	// Closing leaves the group, so the partitions move to the other members without waiting for the
	// session timeout.
	g.OnStop("kafka reader", func(context.Context) error { return ix.reader.Close() })

	work, stop := shutdownGrace(ctx, ix.opts.ShutdownTimeout)
	defer stop()
	c := ix.newConsumer(ix.reader, dlq)
	if feed != nil {
		c.changes, c.bookmarks = feed, ix.kafka
		c.feedTopic, c.feedGroup = ix.opts.ChangesTopic, changes.BookmarkGroup(ix.opts.GroupID)
	}
	ix.log.Info("indexer started", "topic", ix.opts.Topic, "group", ix.opts.GroupID, "listen", ix.Addr())
	if err := c.run(ctx, work); err != nil {
		return fmt.Errorf("shutdown: batch in flight not written within %s: %w", ix.opts.ShutdownTimeout, err)
	}
	ix.log.Info("indexer stopped: batch in flight written and committed")
	return nil
}

// shutdownGrace returns a context for the work in flight: it outlives ctx by at most grace. stop
// releases it.
func shutdownGrace(ctx context.Context, grace time.Duration) (work context.Context, stop func()) {
	work, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-work.Done():
			return
		case <-ctx.Done():
		}
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-work.Done():
		}
	})
	return work, func() {
		cancel()
		wg.Wait()
	}
}

func (ix *Indexer) newConsumer(reader messageReader, dlq messageWriter) *consumer {
	return &consumer{
		reader: reader, dlq: dlq, docs: ix.backend, progress: ix.backend, wm: newWatermarks(), metrics: ix.metrics, log: ix.log,
		now: time.Now, backoff: defaultBackoff,
		prefix: ix.opts.Index.Prefix, topic: ix.opts.Topic,
		batchSize: ix.opts.BatchSize, batchBytes: ix.opts.BatchBytes, batchInterval: ix.opts.BatchInterval,
		wmInterval: ix.opts.WatermarkInterval,
		next:       map[int]int64{}, unversioned: map[store.Pair]bool{},
	}
}

// setup has the backend install the index template and the state index and roll indices of an
// older mapping version (osstore.Store.Setup), retrying until it is done; /readyz says what it is
// doing meanwhile. Concrete indices are created later, on the first event of each kind.
func (ix *Indexer) setup(ctx context.Context) error {
	so := store.SetupOptions{BatchSize: ix.opts.BatchSize, BatchBytes: ix.opts.BatchBytes,
		Step: func(s string) { ix.setupStep.Store(&s) }}
	bo := defaultBackoff()
	for {
		err := ix.backend.Setup(ctx, so)
		if err == nil {
			ix.setupStep.Store(nil)
			return nil
		}
		delay := bo.Step()
		ix.log.Warn("OpenSearch not ready for the indexer, retrying", "retryIn", delay.Round(time.Millisecond), "err", err)
		if err := lifecycle.Sleep(ctx, delay); err != nil {
			return fmt.Errorf("setup: %w", err)
		}
	}
}

// ensureTopic creates a topic when it does not exist, retrying until Kafka answers. A refusal (no
// permission to create topics) is logged: the topic may exist, or be created by the broker.
func (ix *Indexer) ensureTopic(ctx context.Context, topic string, partitions int) error {
	return ix.kafka.EnsureTopic(ctx, stream.Topic{Name: topic, Partitions: partitions,
		Config: stream.MaxMessageBytes(ix.opts.MaxMessageBytes), Optional: true})
}

// ensureFeed creates the change feed's topic with as many partitions as the events topic, and
// refuses one of another size: a feed partition must hold the changes of one events partition,
// which one indexer writes in order (package changes).
func (ix *Indexer) ensureFeed(ctx context.Context) error {
	events, err := ix.partitions(ctx, ix.opts.Topic)
	if err != nil {
		return err
	}
	if err := ix.ensureTopic(ctx, ix.opts.ChangesTopic, len(events)); err != nil {
		return err
	}
	feed, err := ix.partitions(ctx, ix.opts.ChangesTopic)
	if err != nil {
		return err
	}
	if len(feed) != len(events) {
		return fmt.Errorf("--changes-topic: %s has %d partitions and the events topic %s %d: they must be equal (delete the feed topic; the indexer creates it)",
			ix.opts.ChangesTopic, len(feed), ix.opts.Topic, len(events))
	}
	return nil
}

// partitions are the topic's partitions, read again until Kafka tells them: a topic just created
// answers "not leader" until its partitions have leaders.
func (ix *Indexer) partitions(ctx context.Context, topic string) (map[int]int64, error) {
	bo := defaultBackoff()
	for {
		ps, err := ix.kafka.HighWaterMarks(ctx, topic)
		if err == nil {
			return ps, nil
		}
		delay := bo.Step()
		ix.log.Info("partitions of a topic not known yet, retrying", "topic", topic, "retryIn", delay.Round(time.Millisecond), "err", err)
		if err := lifecycle.Sleep(ctx, delay); err != nil {
			return nil, fmt.Errorf("--changes-topic: partitions of %s: %w", topic, err)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// defaultBackoff paces the retries of what failed, from 200 ms up to 5 s. Its cap is also how long
// the indexer may sit idle after the failure ends (a broker or node back, a partition's leader
// moved): 5 s keeps that well inside the minute a lost node may take (README, "High availability"),
// while one request per 5 s per indexer is no load on a struggling cluster.
func defaultBackoff() wait.Backoff {
	return wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.2, Cap: 5 * time.Second, Steps: 1 << 30}
}

func (ix *Indexer) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		switch {
		case ix.setupStep.Load() != nil:
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready: "+*ix.setupStep.Load())
		case !ix.openSearchUp.Load():
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready: OpenSearch does not answer")
		default:
			fmt.Fprintln(w, "ok")
		}
	})
	// For the readers the authenticators accept; the probes above stay open for the kubelet.
	mux.Handle("GET /metrics", ix.endpoints.Guard(promhttp.HandlerFor(ix.metrics.registry, promhttp.HandlerOpts{})))
	return mux
}
