// Package collector lists and watches the resources that ResourceRegistry objects select in each
// member cluster and publishes every change to Kafka as envelope events (DESIGN sections 2 and 3).
//
// Per (cluster, resource, namespace scope) a client-go Reflector feeds a store that keeps only
// key → (uid, resourceVersion). Every list starts a new epoch: the listed objects are published as
// ADDED, keys that vanished as DELETED, then a SYNC marker. Publishing blocks the reflectors when
// Kafka is slow or away; an event over Kafka's message size limit is published in a smaller form
// (oversize.go). Configuration files are re-read while running, and so are the members of a Karmada
// control plane (karmada.go); a selection that leaves every registry is PURGEd. Each member's OpenAPI
// v3 documents of the group-versions it collects are relayed through the collectors' ledger for the
// query API's facade (openapi.go).
//
// It leaves out what happens to the events (the indexer). Replicas of one collector share its member
// clusters through a lease (Options.Lease, lease.go); without it, run one collector per member
// cluster at a time, or two collectors would interleave epochs and delete each other's documents.
package collector

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubesearch/kubesearch/internal/envelope"
	"github.com/kubesearch/kubesearch/internal/lifecycle"
	"github.com/kubesearch/kubesearch/internal/registry"
	"github.com/kubesearch/kubesearch/internal/serving"
	"github.com/kubesearch/kubesearch/internal/stream"
)

// Options configure a Collector. Zero values take the defaults of SetDefaults.
type Options struct {
	// Registry is a ResourceRegistry file or a folder of them.
	Registry string
	// KarmadaRegistries reads ResourceRegistry objects from the control plane of KarmadaKubeconfig
	// too (karmadaregistries.go), beside or instead of Registry, and writes each one's status.
	KarmadaRegistries bool
	// ClustersFile lists the member clusters; Kubeconfig instead makes every context a member;
	// KarmadaKubeconfig instead reaches a Karmada control plane whose Push-mode Cluster objects are
	// the members (karmada.go).
	ClustersFile      string
	Kubeconfig        string
	KarmadaKubeconfig string

	Brokers []string
	// Stream, when set, is the event stream instead of Kafka at Brokers: the standalone mode's
	// in-process log. It stays the caller's: the collector does not close it.
	Stream stream.Broker
	// Kafka configures TLS and SASL toward the brokers, as the indexer takes them.
	Kafka           stream.Security
	Topic           string
	TopicPartitions int
	// MaxMessageBytes must not exceed the broker's message.max.bytes.
	MaxMessageBytes int
	// PublishBuffer bounds the events waiting for Kafka, PublishBufferBytes their size (what
	// bounds the memory: events are as large as their objects); PublishBatch is the most written at
	// once, in at most half of PublishBufferBytes.
	PublishBuffer      int
	PublishBufferBytes int
	PublishBatch       int

	// PageSize is the limit of each list request. A page is the collector's largest allocation (its
	// objects decoded at once), so it bounds the memory; 100 halves the peak of 500 at no loss of speed.
	PageSize int64
	// QPS and Burst bound the requests to each member.
	QPS   float32
	Burst int

	// ListenAddr serves /healthz, /readyz, /metrics and /status; empty serves nothing.
	ListenAddr string
	// Endpoints says who may read /metrics and /status (every subject its authenticators accept;
	// the probes stay open) and whether they are served over HTTPS.
	Endpoints serving.Options
	// ReloadInterval is how often the configuration files are checked for changes.
	ReloadInterval time.Duration
	// DiscoveryInterval is how often each member's served resources are rediscovered.
	DiscoveryInterval time.Duration
	// ShutdownTimeout bounds the flush of buffered events on shutdown.
	ShutdownTimeout time.Duration
	// Name identifies this collector in the ledger (see ledger.go). With a name, a member cluster
	// removed from the configuration while the collector was down is purged at the next start; an
	// unnamed collector cannot tell its ledger records from another collector's, and purges only the
	// selections removed from clusters it still serves. Collectors sharing a Kafka topic need distinct
	// names.
	Name string
	// Lease makes this process one of several replicas of the collector Name (same topic and
	// configuration files), which share its member clusters through a Kafka consumer group: each
	// cluster is collected by one replica at a time, and moves to another within about
	// stream.ShareSessionTimeout when its replica is killed or hangs (lease.go).
	Lease bool

	Logger *slog.Logger
}

// SetDefaults fills the zero fields.
func (o *Options) SetDefaults() {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	if o.Topic == "" {
		o.Topic = stream.DefaultTopic
	}
	def(&o.TopicPartitions, stream.DefaultPartitions)
	def(&o.MaxMessageBytes, stream.DefaultMaxMessageBytes)
	def(&o.PublishBuffer, 1000)
	def(&o.PublishBufferBytes, defaultPublishBufferBytes)
	def(&o.PublishBatch, 500)
	def(&o.Burst, 100)
	if o.PageSize == 0 {
		o.PageSize = 100
	}
	if o.QPS == 0 {
		o.QPS = 50
	}
	if o.ReloadInterval == 0 {
		o.ReloadInterval = 10 * time.Second
	}
	if o.DiscoveryInterval == 0 {
		o.DiscoveryInterval = time.Minute
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Validate reports every invalid option at once, each named by its flag.
func (o *Options) Validate() error {
	var errs []error
	if o.Registry == "" && !o.KarmadaRegistries {
		errs = append(errs, errors.New("--registry: required (or --karmada-registries)"))
	}
	if o.KarmadaRegistries && o.KarmadaKubeconfig == "" {
		errs = append(errs, errors.New("--karmada-registries: needs --karmada-kubeconfig, the control plane holding them"))
	}
	if n := countSet(o.ClustersFile, o.Kubeconfig, o.KarmadaKubeconfig); n != 1 {
		errs = append(errs, fmt.Errorf("--clusters, --kubeconfig, --karmada-kubeconfig: exactly one is required, got %d", n))
	}
	if len(o.Brokers) == 0 && o.Stream == nil {
		errs = append(errs, errors.New("--kafka-brokers: required"))
	}
	if o.Lease && o.Name == "" {
		errs = append(errs, errors.New("--lease: needs --name, which the replicas sharing the member clusters have in common"))
	}
	if o.Lease && o.Stream != nil {
		errs = append(errs, errors.New("--lease: needs Kafka; a process with an in-process stream has no replicas"))
	}
	for name, v := range map[string]int{"--topic-partitions": o.TopicPartitions, "--publish-buffer": o.PublishBuffer,
		"--publish-buffer-bytes": o.PublishBufferBytes, "--publish-batch": o.PublishBatch, "--burst": o.Burst} {
		if v < 1 {
			errs = append(errs, fmt.Errorf("%s: must be at least 1, got %d", name, v))
		}
	}
	errs = append(errs, o.Kafka.Check()...)
	errs = append(errs, o.Endpoints.Check()...)
	if o.MaxMessageBytes < 1<<20 {
		errs = append(errs, fmt.Errorf("--kafka-max-message-bytes: must be at least 1 MiB (Kubernetes objects reach 1.5 MiB), got %d", o.MaxMessageBytes))
	}
	if o.PageSize < 1 {
		errs = append(errs, fmt.Errorf("--page-size: must be at least 1, got %d", o.PageSize))
	}
	if o.QPS <= 0 {
		errs = append(errs, fmt.Errorf("--qps: must be positive, got %v", o.QPS))
	}
	return errors.Join(errs...)
}

func countSet(values ...string) int {
	n := 0
	for _, v := range values {
		if v != "" {
			n++
		}
	}
	return n
}

// Collector runs the collections of every member cluster.
type Collector struct {
	opts    Options
	log     *slog.Logger
	kafka   stream.Broker // the publisher's and the ledger's
	pub     *publisher
	ledger  *ledger
	metrics *metrics
	epochs  *envelope.Epochs
	lease   *lease // nil without Options.Lease
	// started is set once the ledger is read and the first plan applied: /readyz waits for it.
	started atomic.Bool

	listener  net.Listener
	endpoints *serving.Endpoints // who may read /metrics and /status

	karmada    *karmadaMembers    // nil unless Options.KarmadaKubeconfig
	registries *karmadaRegistries // nil unless Options.KarmadaRegistries

	mu      sync.Mutex // serialises apply; may be held while Publish blocks on a full buffer
	plan    registry.Plan
	digest  [32]byte
	members map[string]*memberRun
	// verdicts: what the plan made of each ResourceRegistry object, for its status.
	verdicts map[string]verdict

	// view is the members as of the last apply, for the HTTP endpoints, which must answer while an
	// apply waits for Kafka.
	viewMu sync.RWMutex
	view   []*member
	// skipped: the Karmada Cluster objects the applied plan leaves out, and why.
	skipped []skippedCluster

	// warned: the members that look like one cluster, as logged already (identity.go).
	warnedMu sync.Mutex
	warned   map[string]bool
}

type memberRun struct {
	m      *member
	cancel context.CancelFunc
	done   chan struct{}
}

// New validates the options, loads and validates the configuration files (every error at once), and
// opens the HTTP listener. Nothing connects to a member or to Kafka before Run.
func New(opts Options) (*Collector, error) {
	opts.SetDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	c := &Collector{opts: opts, log: opts.Logger, members: map[string]*memberRun{}}
	if opts.KarmadaKubeconfig != "" {
		cfg, err := karmadaConfig(opts.KarmadaKubeconfig, opts.QPS, opts.Burst)
		if err != nil {
			return nil, err
		}
		if c.karmada, err = newKarmadaMembers(opts.KarmadaKubeconfig, cfg); err != nil {
			return nil, err
		}
		if opts.KarmadaRegistries {
			if c.registries, err = newKarmadaRegistries(opts.KarmadaKubeconfig, cfg, c.log); err != nil {
				return nil, err
			}
		}
	}
	// New has no context of its caller's: the first read of the control plane is bounded here, so
	// an unreachable one fails the start as an unreadable file does.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := c.readConfig(ctx)
	if err != nil {
		return nil, err
	}
	plan, verdicts, err := c.loadPlan(cfg)
	if err != nil {
		return nil, err
	}
	c.plan, c.digest, c.skipped, c.verdicts = plan, admittedDigest(cfg.digest, cfg.objects, verdicts), cfg.members.skipped, verdicts
	for _, s := range c.skipped {
		c.log.Warn("member cluster not collected", "cluster", s.Name, "reason", s.Reason)
	}
	if c.registries != nil {
		c.registries.warnIgnored(cfg.objects, verdicts)
	}
	c.kafka = opts.Stream
	if c.kafka == nil {
		kafkaConn, err := opts.Kafka.Resolve()
		if err != nil {
			return nil, err
		}
		client := stream.NewClient(opts.Brokers, kafkaConn, c.log)
		c.kafka = client
		if opts.Lease {
			g, err := client.NewShareGroup(stream.SharesConfig{Topic: leaseTopic(opts.Topic), Count: leaseShares,
				Group: leaseGroup(opts.Topic, opts.Name)})
			if err != nil {
				return nil, fmt.Errorf("--lease: %w", err)
			}
			c.lease = &lease{group: g, log: c.log}
		}
	}
	c.pub = newPublisher(c.kafka, publisherOptions{
		Topic: opts.Topic, Partitions: opts.TopicPartitions,
		MaxMessageBytes: opts.MaxMessageBytes, Buffer: opts.PublishBuffer, BufferBytes: opts.PublishBufferBytes, Batch: opts.PublishBatch,
	}, c.log)
	c.metrics = newMetrics(func() float64 { return float64(len(c.pub.queue)) })
	c.pub.metrics = c.metrics
	c.pub.dropped = c.refused
	c.ledger = newLedger(c.kafka, opts.Topic, opts.Name, c.log)
	c.epochs = envelope.NewEpochs(time.Now, c.ledger.reserve)
	if opts.ListenAddr != "" {
		e, err := serving.New(opts.Endpoints, c.log)
		if err != nil {
			return nil, err
		}
		l, err := e.Listen(opts.ListenAddr)
		if err != nil {
			return nil, fmt.Errorf("--listen: %w", err)
		}
		c.listener, c.endpoints = l, e
	}
	return c, nil
}

// Addr is the address the HTTP endpoints listen on.
func (c *Collector) Addr() string {
	if c.listener == nil {
		return ""
	}
	return c.listener.Addr().String()
}

// Run collects until ctx is done, then stops the collections, flushes the buffered events (bounded by
// ShutdownTimeout) and returns.
func (c *Collector) Run(ctx context.Context) error {
	g := lifecycle.New(ctx)
	// The server answers at once (/healthz; /readyz says what it waits for), also while Kafka is
	// away and the ledger cannot be read yet, and stops last, so /metrics and /status answer while the
	// collector drains.
	if c.listener != nil {
		g.Serve("http", &http.Server{Handler: c.handler(), ReadHeaderTimeout: 10 * time.Second}, c.listener)
	}
	g.OnStop("kafka writers", func(context.Context) error {
		err := errors.Join(c.pub.writer.Close(), c.ledger.close())
		if c.opts.Stream == nil {
			c.kafka.Close()
		}
		return err
	})
	// Flushes what the collections handed it once they stopped; aborted (what is left is lost, and the
	// next list of each collection repairs the index) when the flush outlasts ShutdownTimeout.
	g.Start("publisher", c.pub.run, func(context.Context) error {
		c.log.Info("flushing buffered events")
		c.pub.close()
		return nil
	})
	g.Go("collect", c.collect)
	return g.Wait(c.opts.ShutdownTimeout)
}

// collect starts the collections, applies configuration changes until ctx is done, then stops every
// collection: after it returns nothing calls Publish any more.
func (c *Collector) collect(ctx context.Context) error {
	defer func() {
		c.log.Info("shutting down: stopping collections")
		c.mu.Lock()
		defer c.mu.Unlock()
		for name, mr := range c.members {
			mr.cancel()
			<-mr.done
			delete(c.members, name)
		}
		if c.lease != nil {
			// Only now: the other replicas start what this one collected once it left the group.
			if err := c.lease.group.Close(); err != nil {
				c.log.Warn("lease: leaving the group failed; the other replicas take over after the session timeout", "err", err)
			}
		}
	}()
	if err := c.start(ctx); err != nil {
		c.log.Warn("stopped before the first plan was applied", "err", err)
		return nil
	}
	if c.lease != nil {
		following := make(chan struct{})
		go func() {
			defer close(following)
			_ = c.follow(ctx)
		}()
		defer func() { <-following }()
	}
	c.log.Info("collector started", "clusters", len(c.plan.Clusters), "topic", c.opts.Topic, "listen", c.Addr())
	var changed chan struct{} // nil, never ready, without registry objects to watch
	if c.registries != nil {
		changed = make(chan struct{}, 1)
		watching := make(chan struct{})
		go func() {
			defer close(watching)
			c.registries.watch(ctx, changed)
		}()
		defer func() { <-watching }()
		c.reload(ctx) // writes the first plan's statuses
	}
	ticker := time.NewTicker(c.opts.ReloadInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
			c.reload(ctx)
		case <-changed:
			c.reload(ctx)
		}
	}
}

// start reads the ledger, purges what it holds and no registry selects any more, and applies the
// plan, in that order: a PURGE of a namespace scope must precede the list of a wider scope that
// replaces it. It returns an error only when ctx ends first.
func (c *Collector) start(ctx context.Context) error {
	if c.lease != nil {
		// First the holding, then the ledger: what the clusters' previous holder reserved is in it.
		h, err := c.lease.next(ctx)
		if err != nil {
			return err
		}
		c.lease.set(h)
	}
	floor, err := c.ledger.load(ctx)
	if err != nil {
		return err
	}
	c.epochs.Restore(floor)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ledger.serve(c.held(c.plan))
	if err := c.purgeForgotten(ctx); err != nil {
		return err
	}
	for cl, paths := range c.ledger.forgottenOpenAPI(c.plan) {
		if !c.holdsCluster(cl) {
			continue
		}
		if err := c.ledger.dropOpenAPI(ctx, cl, paths); err != nil {
			return err
		}
	}
	c.apply(ctx, registry.Plan{}, c.held(c.plan))
	c.started.Store(true)
	return nil
}

// reload re-reads the configuration files when their content changed. An invalid new configuration is
// reported and ignored: the collector keeps collecting what the last valid one selected. (A
// ResourceRegistry object is judged on its own instead: see registry.Admit.) Then the objects'
// statuses are brought in line with the plan.
func (c *Collector) reload(ctx context.Context) {
	// A control plane that hangs must not stop the checks (file changes included): its reads, and
	// the status writes after them, are bounded, and the next check tries again.
	readCtx, cancel := context.WithTimeout(ctx, controlPlaneTimeout)
	cfg, err := c.readConfig(readCtx)
	cancel()
	if err != nil {
		c.log.Error("configuration unreadable, keeping the current one", "err", err)
		return
	}
	verdicts := c.applyConfig(ctx, cfg)
	if c.registries != nil {
		writeCtx, cancel := context.WithTimeout(ctx, controlPlaneTimeout)
		defer cancel()
		c.registries.report(writeCtx, cfg.objects, verdicts)
	}
}

// controlPlaneTimeout bounds one check's reads of the configuration, and its status writes: 1,000
// Secrets at the default 50 requests per second take 20 s.
const controlPlaneTimeout = 2 * time.Minute

// applyConfig applies cfg when it differs from the configuration in force, and returns the
// verdicts in force after it.
func (c *Collector) applyConfig(ctx context.Context, cfg config) map[string]verdict {
	c.mu.Lock()
	defer c.mu.Unlock()
	if admittedDigest(cfg.digest, cfg.objects, c.verdicts) == c.digest {
		return c.verdicts
	}
	plan, verdicts, err := c.loadPlan(cfg)
	if err != nil {
		c.log.Error("configuration changed but is invalid, keeping the current one", "err", err)
		return c.verdicts
	}
	c.log.Info("configuration changed, applying")
	for _, s := range cfg.members.skipped {
		c.log.Warn("member cluster not collected", "cluster", s.Name, "reason", s.Reason)
	}
	c.viewMu.Lock()
	c.skipped = cfg.members.skipped
	c.viewMu.Unlock()
	for name, v := range verdicts {
		if v.condition.Status != metav1.ConditionTrue {
			c.log.Warn("ResourceRegistry object not collected", "registry", name, "reason", v.condition.Message)
		}
	}
	if c.registries != nil {
		c.registries.warnIgnored(cfg.objects, verdicts)
	}
	c.apply(ctx, c.held(c.plan), c.held(plan))
	c.plan, c.digest, c.verdicts = plan, admittedDigest(cfg.digest, cfg.objects, verdicts), verdicts
	return verdicts
}

// apply moves from one plan to the next; c.mu is held. Removed selections are purged before anything
// starts, so a narrowing (all namespaces to one) never purges what the narrower selection collects:
// PURGE and the new collection's events share a partition, so they stay in that order.
func (c *Collector) apply(ctx context.Context, from, to registry.Plan) {
	c.ledger.serve(to)
	for _, ch := range registry.Diff(from, to) {
		mr := c.members[ch.Cluster]
		next, stays := to.Cluster(ch.Cluster)
		if mr != nil && (!stays || ch.Reconnect) {
			mr.cancel()
			<-mr.done
			delete(c.members, ch.Cluster)
		}
		if mr != nil && stays && !ch.Reconnect {
			keys := make([]registry.SelectionKey, len(ch.Removed))
			for i, s := range ch.Removed {
				keys[i] = s.SelectionKey
			}
			mr.m.remove(keys)
		}
		var purges []registry.SelectionRecord
		for _, s := range ch.Removed {
			e, known := c.ledger.entry(ch.Cluster, s.SelectionKey)
			if !known && mr != nil {
				e = mr.m.entry(s.SelectionKey, s.Version) // collected by a build without the ledger
			}
			if e.Resource == "" {
				// Never resolved here, so never collected by this build. Its PURGE could not name
				// the resource, whose partition orders it with a later collection of the same kind.
				if mr != nil {
					c.log.Warn("selection removed before it was ever collected: nothing to purge", "cluster", ch.Cluster, "selection", s.String())
				}
				continue
			}
			purges = append(purges, e)
		}
		if err := c.purge(ctx, ch.Cluster, purges, "selection left every registry"); err != nil {
			if ctx.Err() != nil {
				return // shutting down; the ledger keeps the selections, and the next start purges them
			}
			c.log.Error("purge not acknowledged by Kafka; the ledger keeps the selections, so the next start purges them",
				"cluster", ch.Cluster, "err", err)
		}
		if !stays {
			// The query API serves no document of a cluster without selections; the records go.
			if paths := slices.Sorted(maps.Keys(c.ledger.openAPIHashes(ch.Cluster))); len(paths) > 0 {
				if err := c.ledger.dropOpenAPI(ctx, ch.Cluster, paths); err != nil && ctx.Err() == nil {
					c.log.Warn("cannot delete the OpenAPI records of a cluster no longer collected", "cluster", ch.Cluster, "err", err)
				}
			}
			continue
		}
		if cur := c.members[ch.Cluster]; cur != nil {
			cur.m.setSelections(next.Selections)
			continue
		}
		m, err := newMember(c, next)
		if err != nil {
			c.log.Error("member cluster not collected", "cluster", ch.Cluster, "err", err)
			continue
		}
		mctx, cancel := context.WithCancel(ctx)
		run := &memberRun{m: m, cancel: cancel, done: make(chan struct{})}
		c.members[ch.Cluster] = run
		go func() {
			defer close(run.done)
			m.run(mctx)
		}()
	}
	view := make([]*member, 0, len(c.members))
	for _, mr := range c.members {
		view = append(view, mr.m)
	}
	c.viewMu.Lock()
	c.view = view
	c.viewMu.Unlock()
}

// purge publishes the PURGE of each entry, after the collections of these selections stopped (see
// gate), waits until Kafka acknowledged them, and only then drops them from the ledger. A purge cut
// short (SIGTERM while Kafka is away, a crash) leaves them in the ledger, and the next start (or,
// for a kind the member stopped serving, the next reconcile) purges them again: PURGE is
// idempotent. why says in the log what made the selection go.
func (c *Collector) purge(ctx context.Context, cluster string, entries []registry.SelectionRecord, why string) error {
	if len(entries) == 0 {
		return nil
	}
	keys := make([]registry.SelectionKey, len(entries))
	for i, e := range entries {
		keys[i] = e.Key()
		epoch, err := c.epochsOf(cluster).Next(ctx)
		if err != nil {
			return err
		}
		ev := &envelope.Event{V: envelope.Version, Type: envelope.Purge, Cluster: cluster, Group: e.Group, Version: e.Version,
			Resource: e.Resource, Kind: e.Kind, Namespace: e.Namespace, Epoch: epoch, ObservedAt: time.Now().UTC()}
		c.log.Info(why+", purging", "cluster", cluster, "selection", e.Key().String(), "resource", e.Resource)
		if err := c.pub.Publish(ctx, ev); err != nil {
			return fmt.Errorf("publish purge of %s: %w", e.Key(), err)
		}
	}
	if err := c.pub.flush(ctx); err != nil {
		return err
	}
	return c.ledger.drop(ctx, cluster, keys)
}

// purgeForgotten purges what the ledger holds and the plan no longer selects: selections removed
// while the collector was down, or whose PURGE an earlier run could not get acknowledged.
func (c *Collector) purgeForgotten(ctx context.Context) error {
	forgotten := c.ledger.forgotten(c.plan)
	clusters := make([]string, 0, len(forgotten))
	for cl := range forgotten {
		if c.holdsCluster(cl) { // the other replicas' clusters are theirs to purge
			clusters = append(clusters, cl)
		}
	}
	slices.Sort(clusters)
	for _, cl := range clusters {
		c.log.Info("the ledger holds selections no registry selects any more", "cluster", cl, "selections", len(forgotten[cl]))
		if err := c.purge(ctx, cl, forgotten[cl], "selection left every registry"); err != nil {
			return err
		}
	}
	return nil
}

// refused puts an event Kafka will never take into its collection's status. It runs on the
// publisher's goroutine, so it only takes the members' locks, never waits for Kafka.
func (c *Collector) refused(d droppedEvent) {
	for _, m := range c.viewMembers() {
		if m.cluster.Name == d.cluster {
			m.refused(d.group, d.resource, d.namespace, d.name, d.reason)
		}
	}
}

func (c *Collector) viewMembers() []*member {
	c.viewMu.RLock()
	defer c.viewMu.RUnlock()
	return c.view
}

// config is what a plan is built from, as read at one check: the digest of the configuration files
// and of the Karmada members, and those members.
type config struct {
	digest  [32]byte
	members karmadaRead
	objects []registryObject // the control plane's ResourceRegistry objects (Options.KarmadaRegistries)
}

// readConfig is the check of every reload: the files are only hashed (loadPlan parses them when the
// digest changed), while the Karmada members have no cheaper fingerprint than themselves, so they are
// read whole, hashed, and kept for loadPlan: one read of the control plane per check.
func (c *Collector) readConfig(ctx context.Context) (config, error) {
	var cfg config
	h := sha256.New()
	if err := c.configDigest(h); err != nil {
		return cfg, err
	}
	if c.karmada != nil {
		m, err := c.karmada.read(ctx)
		if err != nil {
			return cfg, err
		}
		m.digest(h)
		cfg.members = m
	}
	if c.registries != nil {
		objs, err := c.registries.read(ctx)
		if err != nil {
			return cfg, err
		}
		digestRegistryObjects(objs, h)
		cfg.objects = objs
	}
	copy(cfg.digest[:], h.Sum(nil))
	return cfg, nil
}

// loadPlan builds the plan of cfg, with the verdict on each ResourceRegistry object of the control
// plane (none without Options.KarmadaRegistries).
func (c *Collector) loadPlan(cfg config) (registry.Plan, map[string]verdict, error) {
	var (
		regs []registry.ResourceRegistry
		err  error
	)
	if c.opts.Registry != "" {
		if regs, err = registry.Load(c.opts.Registry); err != nil {
			return registry.Plan{}, nil, fmt.Errorf("--registry %s: %w", c.opts.Registry, err)
		}
	}
	var clusters []registry.Cluster
	switch {
	case c.opts.ClustersFile != "":
		clusters, err = registry.LoadClusters(c.opts.ClustersFile)
		if err != nil {
			return registry.Plan{}, nil, fmt.Errorf("--clusters %s: %w", c.opts.ClustersFile, err)
		}
	case c.karmada != nil:
		clusters = cfg.members.clusters
	default:
		clusters, err = registry.ClustersFromKubeconfig(c.opts.Kubeconfig)
		if err != nil {
			return registry.Plan{}, nil, fmt.Errorf("--kubeconfig %s: %w", c.opts.Kubeconfig, err)
		}
	}
	if c.registries == nil {
		plan, err := registry.NewPlan(regs, clusters)
		return plan, nil, err
	}
	admitted, verdicts := admitObjects(regs, cfg.objects, clusters, remember(c.verdicts))
	plan, err := registry.NewPlan(append(regs, admitted...), clusters)
	if err != nil {
		// Admit judged each object against the same set: only the files or the clusters can fail here.
		return registry.Plan{}, nil, err
	}
	describeAdmitted(verdicts, plan)
	return plan, verdicts, nil
}

// configDigest hashes every configuration file into h, so a reload happens only when content changed
// (including a ConfigMap volume's atomic symlink swap, which keeps every path the same).
func (c *Collector) configDigest(h io.Writer) error {
	add := func(path string) error {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(data))
		_, err = h.Write(data)
		return err
	}
	var errs []error
	for _, f := range []struct{ flag, path string }{{"--registry", c.opts.Registry}, {"--clusters", c.opts.ClustersFile}, {"--kubeconfig", c.opts.Kubeconfig}} {
		p := f.path
		if p == "" {
			continue
		}
		info, err := os.Stat(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.flag, err))
			continue
		}
		if !info.IsDir() {
			errs = append(errs, add(p))
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, e := range entries {
			if e.Name()[0] == '.' {
				continue
			}
			full := filepath.Join(p, e.Name())
			if st, err := os.Stat(full); err == nil && st.Mode().IsRegular() {
				errs = append(errs, add(full))
			} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func (c *Collector) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !c.started.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: reading the collector ledger %s from Kafka and purging what no registry selects any more\n", c.ledger.topic)
			return
		}
		if pending := c.unsettled(); len(pending) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: %d selections have neither synced nor failed yet: %v\n", len(pending), pending)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	// /metrics and /status name members, resources and failures: for the readers the
	// authenticators accept. The probes above stay open for the kubelet.
	mux.Handle("GET /metrics", c.endpoints.Guard(promhttp.HandlerFor(c.metrics.registry, promhttp.HandlerOpts{})))
	mux.Handle("GET /status", c.endpoints.Guard(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		body := map[string]any{"items": c.Status()}
		if c.lease != nil {
			h := c.lease.holding()
			body["lease"] = map[string]any{"generation": h.Generation, "shares": len(h.Shares), "of": leaseShares,
				"clusters": len(c.viewMembers())}
		}
		if w := c.Warnings(); len(w) > 0 {
			body["warnings"] = w
		}
		_ = enc.Encode(body)
	})))
	return mux
}

// Status is the state of every collection, one row per registry × cluster × resource.
func (c *Collector) Status() []registry.ResourceStatus {
	rows := []registry.ResourceStatus{}
	for _, m := range c.viewMembers() {
		rows = append(rows, m.rows()...)
	}
	c.viewMu.RLock()
	rows = append(rows, skippedRows(c.skipped, time.Now().UTC())...)
	c.viewMu.RUnlock()
	sortRows(rows)
	return rows
}

func (c *Collector) unsettled() []string {
	var out []string
	for _, m := range c.viewMembers() {
		out = append(out, m.unsettled()...)
	}
	slices.Sort(out)
	return out
}
