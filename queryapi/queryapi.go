// Package queryapi serves kubesearch's REST search and its Kubernetes facade (DESIGN section 5): a
// gin server that parses Kubernetes-style parameters into the query model, runs them on the store,
// and says with every answer how fresh it is; and, for kubectl and client-go, discovery, OpenAPI,
// LIST, GET and WATCH of the fleet in three views (facade.go), the watch fed from the event stream
// (package watchcache). Errors are Kubernetes Status objects. It writes nothing but, with
// --karmada-kubeconfig, the ResourceRegistry objects a Karmada control plane stores, forwarded to it
// (registries.go).
package queryapi

import (
	"context"
	"crypto/tls"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubesearch/kubesearch/internal/auth"
	"github.com/kubesearch/kubesearch/internal/authz"
	"github.com/kubesearch/kubesearch/internal/changes"
	"github.com/kubesearch/kubesearch/internal/lifecycle"
	"github.com/kubesearch/kubesearch/internal/osstore"
	"github.com/kubesearch/kubesearch/internal/query"
	"github.com/kubesearch/kubesearch/internal/registry"
	"github.com/kubesearch/kubesearch/internal/serving"
	"github.com/kubesearch/kubesearch/internal/store"
	"github.com/kubesearch/kubesearch/internal/stream"
	"github.com/kubesearch/kubesearch/mappings"
	"github.com/kubesearch/kubesearch/queryapi/watchcache"
)

// Options configure the query API.
type Options struct {
	// ListenAddr serves the API, /healthz, /livez, /readyz, /metrics and /openapi.json.
	ListenAddr string
	// OpenSearchAddresses are node URLs.
	OpenSearchAddresses []string
	// Backend, when set, is the store instead of OpenSearch, and Stream the event stream instead of
	// Kafka at KafkaBrokers: the standalone mode's embedded store and in-process log. Both stay the
	// caller's: the server closes neither.
	Backend Backend
	Stream  stream.Broker
	// OpenSearch holds credentials and TLS settings, as the indexer takes them.
	OpenSearch osstore.Security
	// OpenSearchCompression asks OpenSearch for gzipped answers (osstore.Options.Compression): for
	// a slow link to it, not for loopback or in-cluster networks.
	OpenSearchCompression bool
	// IndexPrefix is the indexer's --index-prefix.
	IndexPrefix string
	// KafkaBrokers are the event stream's brokers. The Kubernetes facade reads the collectors'
	// ledger there (what each member has cached); without brokers it discovers nothing.
	KafkaBrokers []string
	// Kafka holds the brokers' TLS and SASL settings, as the collector and indexer take them.
	Kafka stream.Security
	// Topic is the event topic (the collectors' --topic); the ledger is next to it.
	Topic string
	// IndexerGroup is the indexers' consumer group (their --group): the watch cache starts reading
	// the stream a little before what they committed.
	IndexerGroup string
	// ChangesTopic, when set (not "none", the default), is the indexers' change feed (their
	// --changes-topic), which the watch cache follows instead of Topic, keeping no identity per
	// object; when the topic does not exist, the cache follows Topic. Not the default yet: the
	// cache's heads then move only as fast as the indexers, so a consistent read (a LIST without
	// resourceVersion) is only as current as the index, not as the stream (issue 25).
	ChangesTopic string
	// WatchWindowEvents and WatchWindowBytes bound the watch cache's window of recent events (the
	// first reached applies); a watch can resume from a position the window still holds.
	WatchWindowEvents int
	WatchWindowBytes  int64
	// CollectorStatusURLs are the collectors' /status endpoints; without them, collection state is
	// Unknown and only the index's own progress is reported. A URL prefixed dns+ (dns+http://name:port/status)
	// stands for every address the name resolves to: the replicas of a collector behind a headless
	// Service, each of which reports the members it holds.
	CollectorStatusURLs []string
	// CollectorStatusTokenFile holds the bearer token presented to the collectors' /status, which
	// authenticate it when they have a token file; read again at every poll, so a rotated token
	// needs no restart. CollectorStatusCAFile holds the CAs that sign the certificates of collectors
	// serving HTTPS (read at start).
	CollectorStatusTokenFile string
	CollectorStatusCAFile    string
	// ContinueKeyFile holds the key that signs continue tokens and seals the fleet views'
	// resourceVersions (at least 16 bytes). Replicas must share it; without it a random key is
	// made, and tokens and fleet resourceVersions die with the process (410: clients list again).
	ContinueKeyFile string
	// Authentication says who may ask (bearer tokens from a file, client certificates, a cluster's
	// TokenReview, anonymous access); without any of them every request but the probes is a 401.
	Authentication auth.Options
	// AcceptHosts are regular expressions of the host names, besides localhost, *.localhost and IP
	// addresses, that anonymous requests may name in their Host header (--accept-hosts; origin.go).
	AcceptHosts []string
	// AuthorizationPolicyFile maps users and groups to what they may see (internal/authz); without
	// it every authenticated subject sees everything.
	AuthorizationPolicyFile string
	// SubjectAccessReview, when enabled, asks each member's SubjectAccessReview API what a subject
	// may see of that member, so member RBAC applies as if the subject asked the member. With a
	// policy file too, a subject sees what either grants (as kube-apiserver chains authorizers).
	SubjectAccessReview authz.ReviewOptions
	// RateLimit and RateBurst bound each subject's requests per second (a token bucket; 0: no
	// bound), MaxWatches its open watches: past them, 429 with Retry-After.
	RateLimit  float64
	RateBurst  int
	MaxWatches int
	// MaxListsPerSubject bounds a subject's LISTs without a limit streaming at once (each holds a
	// page and a snapshot until its client has read them): past it, 429. 0: no bound.
	MaxListsPerSubject int
	// MaxRequestsInFlight bounds the requests served at once, watches aside (bounded per
	// subject): past it, 429. 0: no bound.
	MaxRequestsInFlight int
	// WriteTimeout bounds each write of an answer to its client: a client that stops reading
	// loses its request, and what the request held, after it. 0: no bound.
	WriteTimeout time.Duration
	// Before authentication, per source address (an IPv4 address, an IPv6 /64): SourceRateLimit
	// and SourceRateBurst bound its requests per second; SourceAuthFailureLimit and
	// SourceAuthFailureBurst its failed authentications, past which its credentials are judged
	// only if known without a new token review (others: 429); MaxConnectionsPerSource its open
	// connections. MaxTrackedSources bounds the sources whose state is kept (IPv6 prefixes
	// wider than a /64 counting as one); past it, the new sources share one state. 0: no bound.
	// limits.go and sources.go.
	SourceRateLimit         float64
	SourceRateBurst         int
	SourceAuthFailureLimit  float64
	SourceAuthFailureBurst  int
	MaxConnectionsPerSource int
	MaxTrackedSources       int
	// SearchLimits bound what one subject's searches hold of the store: snapshots between pages
	// (--max-snapshots-per-subject, --max-snapshots) and searches by fuzzy name running
	// (--max-fuzzy-searches-per-subject); zero fields are their defaults (store.Limits).
	SearchLimits store.Limits
	// MaxWatchObjectsPerSubject bounds the objects a subject's streaming watches track together,
	// about 16 bytes each (present.go); past it a watch stops tracking them. 0: 1,000,000.
	MaxWatchObjectsPerSubject int
	// TLSCertFile and TLSKeyFile serve HTTPS, reloaded when the files change; without them, HTTP.
	TLSCertFile, TLSKeyFile string
	// PageKeepAlive is how long a paged query's snapshot lives between pages.
	PageKeepAlive time.Duration
	// PollInterval is how often watermarks and collector status are read.
	PollInterval time.Duration
	// StaleAfter is the lag past which an answer carries a Warning.
	StaleAfter time.Duration
	// ResourceVersionWait bounds how long a facade LIST waits for the index to reach the
	// resourceVersion it asks for (resourceVersionMatch=NotOlderThan) before answering 504.
	ResourceVersionWait time.Duration
	// SessionRecheckInterval is how often an open watch authenticates and authorizes its request
	// again, so that a revoked subject loses it (default 5s; the token file, the policy file and
	// the token and access reviews are themselves re-read within their own intervals).
	SessionRecheckInterval time.Duration
	// RequestTimeout bounds one request's work against OpenSearch.
	RequestTimeout time.Duration
	// KarmadaKubeconfig (--karmada-kubeconfig), when set, is the kubeconfig of a Karmada control
	// plane storing ResourceRegistry objects as resourceregistries.karmada.kubesearch.io: the query
	// API then serves them under Karmada's search.karmada.io/v1alpha1 to the users its
	// aggregation layer names (registries.go), with these credentials.
	KarmadaKubeconfig string
	// Profiling serves the Go runtime's profiles under /debug/pprof/ (kube-apiserver's
	// --profiling) to subjects who may get that path: the only way to see where a loaded replica's
	// CPU and memory go. Off by default: a profile names no member, but it costs CPU to take.
	Profiling bool
	// ShutdownTimeout bounds the wait for requests in flight on shutdown.
	ShutdownTimeout time.Duration
	Logger          *slog.Logger
}

// ParseWatchWindow reads --watch-window: a number of events ("100000") or a size ("512Mi", as
// Kubernetes quantities are written). The bound it does not give stays unset (its default).
func ParseWatchWindow(s string) (events int, bytes int64, err error) {
	if n, err := strconv.Atoi(s); err == nil {
		if n <= 0 {
			return 0, 0, fmt.Errorf("--watch-window: %d events; want at least 1", n)
		}
		return n, 0, nil
	}
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Value() <= 0 {
		return 0, 0, fmt.Errorf("--watch-window: %q is neither a number of events (100000) nor a size (512Mi)", s)
	}
	return 0, q.Value(), nil
}

// defaultSessionRecheck is how often an open watch is authenticated and authorized again.
const defaultSessionRecheck = 5 * time.Second

// SetDefaults fills unset options.
func (o *Options) SetDefaults() {
	if o.ListenAddr == "" {
		o.ListenAddr = "127.0.0.1:8080"
	}
	if o.Topic == "" {
		o.Topic = stream.DefaultTopic
	}
	if o.IndexerGroup == "" {
		o.IndexerGroup = "kubesearch-indexer"
	}
	if o.ChangesTopic == "" {
		o.ChangesTopic = changes.TopicOf(o.Topic)
	}
	if o.WatchWindowEvents == 0 {
		o.WatchWindowEvents = 100_000
	}
	if o.WatchWindowBytes == 0 {
		o.WatchWindowBytes = 512 << 20
	}
	if o.PageKeepAlive == 0 {
		o.PageKeepAlive = 5 * time.Minute
	}
	if o.PollInterval == 0 {
		o.PollInterval = 2 * time.Second
	}
	if o.StaleAfter == 0 {
		o.StaleAfter = 30 * time.Second
	}
	if o.ResourceVersionWait == 0 {
		o.ResourceVersionWait = 10 * time.Second
	}
	if o.SessionRecheckInterval == 0 {
		o.SessionRecheckInterval = defaultSessionRecheck
	}
	o.SearchLimits = o.SearchLimits.WithDefaults()
	if o.MaxWatchObjectsPerSubject == 0 {
		o.MaxWatchObjectsPerSubject = DefaultMaxWatchObjectsPerSubject
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = 30 * time.Second
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = 10 * time.Second
	}
}

// Validate reports every bad option at once, each naming its flag.
func (o *Options) Validate() error {
	var errs []error
	if len(o.OpenSearchAddresses) == 0 && o.Backend == nil {
		errs = append(errs, errors.New("--opensearch-addresses: required"))
	}
	errs = append(errs, registry.CheckAddressFlag(o.OpenSearchAddresses)...)
	for _, c := range o.CollectorStatusURLs {
		u, err := url.Parse(strings.TrimPrefix(c, dnsPrefix))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("--collector-status-urls: %q is not an http(s) URL, optionally prefixed dns+ (dns+http://collector-headless:8081/status)", c))
		}
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--page-keep-alive", o.PageKeepAlive}, {"--poll-interval", o.PollInterval}, {"--stale-after", o.StaleAfter},
		{"--request-timeout", o.RequestTimeout}, {"SessionRecheckInterval", o.SessionRecheckInterval}, {"--resource-version-wait", o.ResourceVersionWait}, {"--shutdown-timeout", o.ShutdownTimeout}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s: must not be negative, got %s", d.flag, d.v))
		}
	}
	if o.WatchWindowEvents < 0 || o.WatchWindowBytes < 0 {
		errs = append(errs, fmt.Errorf("--watch-window: must be positive, got %d events, %d bytes", o.WatchWindowEvents, o.WatchWindowBytes))
	}
	if (o.TLSCertFile == "") != (o.TLSKeyFile == "") {
		errs = append(errs, errors.New("--tls-cert-file, --tls-private-key-file: both or neither"))
	}
	if o.Authentication.ClientCAFile != "" && o.TLSCertFile == "" {
		errs = append(errs, errors.New("--client-ca-file: client certificates need HTTPS (--tls-cert-file, --tls-private-key-file)"))
	}
	if o.Authentication.RequestHeader.Enabled() && o.TLSCertFile == "" {
		errs = append(errs, errors.New("--requestheader-client-ca-file: the front proxy authenticates by its client certificate, which needs HTTPS (--tls-cert-file, --tls-private-key-file)"))
	}
	if _, err := newAcceptHosts(o.AcceptHosts); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, o.validateBounds()...)
	errs = append(errs, o.ValidateHoldings())
	errs = append(errs, o.SubjectAccessReview.Check())
	if o.PageKeepAlive > 0 && o.PageKeepAlive < time.Second {
		errs = append(errs, fmt.Errorf("--page-keep-alive: at least 1s, got %s", o.PageKeepAlive))
	}
	return errors.Join(errs...)
}

// ValidateHoldings reports every negative bound of what a subject's searches and watches hold,
// each naming its flag (the standalone mode checks them before it opens its store).
func (o *Options) ValidateHoldings() error {
	var errs []error
	for _, b := range []struct {
		flag string
		v    int
	}{{"--max-snapshots-per-subject", o.SearchLimits.SnapshotsPerSubject}, {"--max-snapshots", o.SearchLimits.Snapshots},
		{"--max-fuzzy-searches-per-subject", o.SearchLimits.FuzzySearchesPerSubject}, {"--max-watch-objects-per-subject", o.MaxWatchObjectsPerSubject}} {
		if b.v < 0 {
			errs = append(errs, fmt.Errorf("%s: must not be negative, got %d", b.flag, b.v))
		}
	}
	return errors.Join(errs...)
}

// Server is the query API.
type Server struct {
	opts     Options
	log      *slog.Logger
	store    searcher
	backend  Backend
	closers  []func() error // of what New made, not of what Options gave
	fleet    *fleet
	catalog  *catalog
	kafka    stream.Broker // nil without KafkaBrokers or Stream
	cache    watchCache    // nil without KafkaBrokers or Stream
	metrics  *metrics
	authn    *auth.Authenticator
	hosts    acceptHosts       // --accept-hosts, for anonymous requests
	authz    *authz.Authorizer // nil without a policy file
	reviewer *authz.Reviewer   // nil without the SubjectAccessReview mode
	inv      *inventory
	limits   *limiter
	tls      *tls.Config // nil: plain HTTP
	// registries forwards ResourceRegistry requests to a Karmada control plane; nil without
	// --karmada-kubeconfig (registries.go).
	registries *registryProxy
	listener   net.Listener
	engine     *gin.Engine

	// watchObjects bounds the objects each subject's streaming watches track (present.go).
	watchObjects *watchObjects
	// positions seals fleet resourceVersions (position.go).
	positions *sealer
}

// watchCache is what the facade needs of the watch cache (package watchcache): WATCH places
// watches in it (watchStarter, watch.go), LIST asks it how far the stream is and which positions
// the index covers (positions, covered.go), and Run fills it from the event stream.
type watchCache interface {
	Run(ctx context.Context) error
	Ready() bool
	watchStarter
	positions
	marks
}

// searcher is what the query API needs of a store backend: searches, and the per-pair counts of the
// fleet status, each within a subject's scope.
type searcher interface {
	Search(ctx context.Context, q *query.Query) (*store.Result, error)
	// Release frees the snapshot of a continue token whose pages will not all be read.
	Release(ctx context.Context, continueToken string)
	Counts(ctx context.Context, scope *query.Scope) ([]store.Count, error)
}

// Backend is the store the query API reads: OpenSearch unless Options.Backend names another.
type Backend interface {
	searcher
	Watermarks(ctx context.Context) ([]store.Watermark, error)
}

// New checks the options, reads their files and binds the listen address.
func New(o Options) (*Server, error) {
	o.SetDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	var (
		err error
		key []byte // without a key file, the store makes a random one
	)
	if o.ContinueKeyFile != "" {
		var kerr error
		key, kerr = os.ReadFile(o.ContinueKeyFile)
		if kerr == nil && len(key) < 16 {
			kerr = fmt.Errorf("%d bytes; at least 16", len(key))
		}
		if kerr != nil {
			key, err = nil, errors.Join(err, fmt.Errorf("--continue-key-file: %w", kerr))
		}
	}
	var kafkaConn stream.Connection
	if len(o.KafkaBrokers) > 0 && o.Stream == nil {
		var kerr error
		if kafkaConn, kerr = o.Kafka.Resolve(); kerr != nil {
			err = errors.Join(err, kerr)
		}
	}
	authn, aerr := auth.New(o.Authentication)
	err = errors.Join(err, aerr)
	hosts, herr := newAcceptHosts(o.AcceptHosts)
	err = errors.Join(err, herr)
	statusClient, serr := newStatusClient(o.CollectorStatusTokenFile, o.CollectorStatusCAFile)
	err = errors.Join(err, serr)
	var authorizer *authz.Authorizer
	if o.AuthorizationPolicyFile != "" {
		var zerr error
		authorizer, zerr = authz.New(authz.Options{PolicyFile: o.AuthorizationPolicyFile, Logger: log})
		err = errors.Join(err, zerr)
	}
	m := newMetrics()
	var reviewer *authz.Reviewer
	if o.SubjectAccessReview.Enabled() {
		var rerr error
		ro := o.SubjectAccessReview
		ro.Logger = log
		ro.Observe = func(cluster, result string) { m.reviews.WithLabelValues(cluster, result).Inc() }
		reviewer, rerr = authz.NewReviewer(ro)
		err = errors.Join(err, rerr)
	}
	var tlsConfig *tls.Config
	if o.TLSCertFile != "" && o.TLSKeyFile != "" {
		var terr error
		tlsConfig, terr = serving.TLS(o.TLSCertFile, o.TLSKeyFile, o.Authentication, log)
		err = errors.Join(err, terr)
	}
	var registries *registryProxy
	if o.KarmadaKubeconfig != "" {
		var rerr error
		registries, rerr = newRegistryProxy(o.KarmadaKubeconfig)
		err = errors.Join(err, rerr)
	}
	var closers []func() error
	backend := o.Backend
	if backend == nil {
		// The store reads the OpenSearch credentials: its errors join the others.
		oss, berr := osstore.New(osstore.Options{Addresses: o.OpenSearchAddresses, Security: o.OpenSearch,
			RequestTimeout: o.RequestTimeout, Index: mappings.Options{Prefix: o.IndexPrefix}, TokenKey: key,
			KeepAlive: o.PageKeepAlive, Limits: o.SearchLimits, Compression: o.OpenSearchCompression, Logger: log})
		if berr == nil {
			backend = oss
			closers = append(closers, oss.Close)
		}
		err = errors.Join(err, berr)
	}
	if err != nil {
		return nil, errors.Join(err, closeAll(closers))
	}
	seal, err := newSealer(key)
	if err != nil {
		return nil, errors.Join(err, closeAll(closers))
	}
	l, err := net.Listen("tcp", o.ListenAddr)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("--listen: %w", err), closeAll(closers))
	}
	limits := newLimiter(o, m.registry)
	l = limits.limitConnections(l)
	s := &Server{opts: o, log: log, store: backend, backend: backend, listener: l, metrics: m, catalog: newCatalog(),
		authn: authn, hosts: hosts, authz: authorizer, reviewer: reviewer, tls: tlsConfig, limits: limits,
		watchObjects: newWatchObjects(o.MaxWatchObjectsPerSubject), positions: seal, registries: registries}
	if tlsConfig != nil {
		s.listener = tls.NewListener(l, tlsConfig)
	}
	s.inv = newInventory(s.catalog, backend)
	s.fleet = &fleet{
		readWatermarks: backend.Watermarks,
		collectors:     o.CollectorStatusURLs, client: statusClient, tokenFile: o.CollectorStatusTokenFile,
		interval: o.PollInterval, staleAfter: o.StaleAfter, log: log, now: time.Now,
	}
	switch {
	case o.Stream != nil:
		s.kafka = o.Stream
	case len(o.KafkaBrokers) > 0:
		s.kafka = stream.NewClient(o.KafkaBrokers, kafkaConn, log)
		closers = append(closers, func() error {
			s.kafka.Close()
			return nil
		})
	}
	if s.kafka != nil {
		s.cache = watchcache.New(watchcache.Options{Log: log, MaxEvents: o.WatchWindowEvents, MaxBytes: o.WatchWindowBytes,
			Stream: s.kafka, Topic: o.Topic, IndexerGroup: o.IndexerGroup, Changes: feedTopic(o.ChangesTopic), Index: backend,
			ResourceOf: s.catalog.resourceOf, CatalogSynced: s.catalog.isSynced})
	}
	s.closers = closers
	s.engine = s.routes()
	return s, nil
}

// feedTopic is the change feed the watch cache follows: "" for none.
func feedTopic(t string) string {
	if t == changes.None {
		return ""
	}
	return t
}

// closeAll closes what New made, last made first.
func closeAll(closers []func() error) error {
	var errs []error
	for i := len(closers) - 1; i >= 0; i-- {
		errs = append(errs, closers[i]())
	}
	return errors.Join(errs...)
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.listener.Addr().String() }

// Run serves until ctx is done, then lets requests in flight finish (bounded by ShutdownTimeout).
func (s *Server) Run(ctx context.Context) error {
	g := lifecycle.New(ctx)
	g.OnStop("opensearch and kafka clients", func(context.Context) error { return closeAll(s.closers) })
	s.log.Info("query API listening", "addr", s.Addr(), "tls", s.tls != nil)
	if s.opts.Authentication.Anonymous {
		s.log.Warn("ANONYMOUS ACCESS IS ON: whoever reaches " + s.Addr() + " reads what the policy grants system:anonymous (everything without --authorization-policy-file); use --token-auth-file, --client-ca-file or --authentication-kubeconfig, and --anonymous=false, to lock it down")
	}
	// No WriteTimeout: watches and full lists stream for as long as they take (a watch ends by its
	// own timeoutSeconds); each write has its own deadline instead (--write-timeout, deadline.go).
	// ReadTimeout covers the request, whose body is at most a ResourceRegistry's (3 MiB).
	srv := &http.Server{Handler: s.engine, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 256 << 10}
	if s.registries != nil {
		// The ResourceRegistry watches relayed from the control plane end as shutdown begins:
		// the server's Shutdown waits for every handler.
		srv.RegisterOnShutdown(s.registries.close)
	}
	g.Serve("http", srv, s.listener)
	g.Go("fleet status", func(ctx context.Context) error {
		s.fleet.run(ctx)
		return nil
	})
	if s.kafka != nil {
		g.Go("collectors' ledger", s.followLedger)
		g.Go("watch cache", s.cache.Run)
	} else {
		s.log.Warn("no --kafka-brokers: the Kubernetes facade discovers no resources; REST search is served")
	}
	return g.Wait(s.opts.ShutdownTimeout)
}
