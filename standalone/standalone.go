// Package standalone runs the whole pipeline in one process (DESIGN section 1): the collector, the
// indexer and the query API — the same components as the distributed mode, with the same
// configuration files and the same APIs — joined by an in-process log (stream.Local) instead of
// Kafka and writing to an embedded on-disk store (blevestore) instead of OpenSearch. It is the only
// package besides main that imports components: it composes them, and adds nothing to what they do.
//
// The data folder holds the index, the collectors' ledger (what each member had cached, so a member
// removed while the process was down is purged at the next start), the key signing continue tokens,
// the token the query API reads the collector's /status with (new at every start) and, without
// --registry, the default registry. The event stream itself is not kept: at every
// start the collector lists each member again in a new epoch, and the SYNC that ends each list
// removes what vanished meanwhile.
package standalone

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/kubesearch/kubesearch/collector"
	"github.com/kubesearch/kubesearch/indexer"
	"github.com/kubesearch/kubesearch/internal/auth"
	"github.com/kubesearch/kubesearch/internal/blevestore"
	"github.com/kubesearch/kubesearch/internal/changes"
	"github.com/kubesearch/kubesearch/internal/lifecycle"
	"github.com/kubesearch/kubesearch/internal/progress"
	"github.com/kubesearch/kubesearch/internal/registry"
	"github.com/kubesearch/kubesearch/internal/serving"
	"github.com/kubesearch/kubesearch/internal/stream"
	"github.com/kubesearch/kubesearch/queryapi"
)

// DefaultRegistry selects the kinds operators search most, in every member.
//
//go:embed default-registry.yaml
var DefaultRegistry []byte

// Options configure a Standalone. Zero values take the defaults of SetDefaults.
type Options struct {
	// Kubeconfig makes every context a member cluster; ClustersFile lists them instead;
	// KarmadaKubeconfig takes them from a Karmada control plane's Cluster objects instead.
	Kubeconfig        string
	ClustersFile      string
	KarmadaKubeconfig string
	// KarmadaRegistries takes the ResourceRegistry objects from the control plane of
	// KarmadaKubeconfig, where they are stored as resourceregistries.karmada.kubesearch.io, and
	// has the query API serve them under search.karmada.io/v1alpha1.
	KarmadaRegistries bool
	// Registry is a ResourceRegistry file or folder; empty uses DefaultRegistry, unless
	// KarmadaRegistries takes them from the control plane.
	Registry string
	// DataDir holds the index and what must survive a restart.
	DataDir string
	// ListenAddr serves REST search, the Kubernetes facade, /healthz, /readyz and /metrics.
	ListenAddr string
	// Progress, when set, shows the first sync's progress: a live table when it is a terminal, log
	// lines otherwise (internal/progress).
	Progress io.Writer

	// Collector, Indexer and QueryAPI tune the components; their connection fields (brokers,
	// OpenSearch, stream, backend, registry, clusters, listen addresses) are set by New.
	Collector collector.Options
	Indexer   indexer.Options
	QueryAPI  queryapi.Options

	Logger *slog.Logger
}

// SetDefaults fills the zero fields: members from $KUBECONFIG or ~/.kube/config, the data folder
// in the user's state directory, the API on 127.0.0.1:8080.
func (o *Options) SetDefaults() {
	if o.Kubeconfig == "" && o.ClustersFile == "" && o.KarmadaKubeconfig == "" {
		o.Kubeconfig = DefaultKubeconfig()
	}
	if o.DataDir == "" {
		o.DataDir = DefaultDataDir()
	}
	if o.ListenAddr == "" {
		o.ListenAddr = "127.0.0.1:8080"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// DefaultKubeconfig is the first file $KUBECONFIG names, or ~/.kube/config.
func DefaultKubeconfig() string {
	for _, p := range filepath.SplitList(os.Getenv("KUBECONFIG")) {
		if p != "" {
			return p
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".kube", "config")
	}
	return ""
}

// DefaultDataDir is $XDG_STATE_HOME/kubesearch, or ~/.local/state/kubesearch.
func DefaultDataDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "kubesearch")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "kubesearch")
	}
	return "kubesearch-data"
}

// Validate reports every invalid option at once, each named by its flag.
func (o *Options) Validate() error {
	var errs []error
	if n := len(slices.DeleteFunc([]string{o.Kubeconfig, o.ClustersFile, o.KarmadaKubeconfig}, func(s string) bool { return s == "" })); n > 1 {
		errs = append(errs, errors.New("--kubeconfig, --clusters, --karmada-kubeconfig: at most one"))
	}
	if o.Kubeconfig != "" {
		if _, err := os.Stat(o.Kubeconfig); err != nil {
			errs = append(errs, fmt.Errorf("--kubeconfig %s: %w (members are the contexts of $KUBECONFIG or ~/.kube/config unless --kubeconfig or --clusters names them)", o.Kubeconfig, err))
		}
	}
	if o.Kubeconfig == "" && o.ClustersFile == "" && o.KarmadaKubeconfig == "" {
		errs = append(errs, errors.New("--kubeconfig: no kubeconfig found; name one, or a clusters file with --clusters"))
	}
	if o.KarmadaRegistries && o.KarmadaKubeconfig == "" {
		errs = append(errs, errors.New("--karmada-registries: needs --karmada-kubeconfig"))
	}
	if o.DataDir == "" {
		errs = append(errs, errors.New("--data-dir: required"))
	}
	errs = append(errs, o.QueryAPI.ValidateHoldings())
	return errors.Join(errs...)
}

// Standalone is the pipeline in one process.
type Standalone struct {
	opts      Options
	log       *slog.Logger
	lock      *os.File
	events    *stream.Local
	store     *blevestore.Store
	collector *collector.Collector
	indexer   *indexer.Indexer
	api       *queryapi.Server
}

// New prepares the data folder (locking it against a second process), opens the store and makes
// the three components; nothing connects to a member before Run.
func New(o Options) (_ *Standalone, err error) {
	o.SetDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	// Not the named result: every error return sets that to nil before the deferred close runs.
	s := &Standalone{opts: o, log: o.Logger}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.close())
		}
	}()
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("--data-dir: %w", err)
	}
	if s.lock, err = lockDir(o.DataDir); err != nil {
		return nil, err
	}
	key, err := tokenKey(filepath.Join(o.DataDir, "continue.key"))
	if err != nil {
		return nil, fmt.Errorf("--data-dir: %w", err)
	}
	registryPath := o.Registry
	// With the control plane's ResourceRegistry objects, those are the configuration: the default
	// registry would collect beside them what no object asked for.
	if registryPath == "" && !o.KarmadaRegistries {
		// A file, so the collector reads it as it reads any registry; rewritten at every start,
		// so it follows the binary's default.
		registryPath = filepath.Join(o.DataDir, "default-registry.yaml")
		if err := os.WriteFile(registryPath, DefaultRegistry, 0o600); err != nil {
			return nil, fmt.Errorf("--data-dir: %w", err)
		}
	}
	s.events = stream.NewLocal(stream.LocalOptions{Dir: filepath.Join(o.DataDir, "ledger"), RetainBytes: 2 << 20, MaxBacklogBytes: 8 << 20})
	qo := o.QueryAPI
	qo.SetDefaults()
	// The indexer creates the change feed when it starts; the query API, started beside it, must
	// find it at once, or its watch cache follows the event stream until it notices (package
	// changes). Both with the partitions the components would choose.
	for _, topic := range []string{qo.Topic, qo.ChangesTopic} {
		if topic == changes.None {
			continue
		}
		if err := s.events.CreateTopic(context.Background(), stream.Topic{Name: topic, Partitions: stream.DefaultPartitions}); err != nil {
			return nil, fmt.Errorf("create topic %s: %w", topic, err)
		}
	}
	s.store, err = blevestore.New(blevestore.Options{Dir: filepath.Join(o.DataDir, "index"), TokenKey: key,
		KeepAlive: qo.PageKeepAlive, Limits: qo.SearchLimits, Logger: o.Logger})
	if err != nil {
		return nil, fmt.Errorf("--data-dir: open the index: %w", err)
	}

	co := o.Collector
	co.Registry, co.Kubeconfig, co.ClustersFile, co.KarmadaKubeconfig = registryPath, o.Kubeconfig, o.ClustersFile, o.KarmadaKubeconfig
	co.KarmadaRegistries = o.KarmadaRegistries
	co.Stream, co.Brokers = s.events, nil
	// The ledger remembers the members under this name, so one removed from the kubeconfig while
	// the process was down is purged at the next start.
	co.Name = "standalone"
	// Loopback only: the query API reads the collection state there, with a token made at every
	// start, so the machine's other users cannot read it when the API itself is locked down.
	co.ListenAddr = "127.0.0.1:0"
	statusToken, statusTokens, err := newStatusToken(o.DataDir)
	if err != nil {
		return nil, fmt.Errorf("--data-dir: %w", err)
	}
	co.Endpoints = serving.Options{Authentication: auth.Options{TokenAuthFile: statusTokens}}
	co.Logger = o.Logger.With("component", "collector")
	if s.collector, err = collector.New(co); err != nil {
		return nil, err
	}

	ixo := o.Indexer
	ixo.Stream, ixo.Backend, ixo.Brokers, ixo.ListenAddr = s.events, s.store, nil, ""
	if qo.ChangesTopic == changes.None && ixo.ChangesTopic == "" {
		ixo.ChangesTopic = changes.None // nobody here would read it
	}
	ixo.Logger = o.Logger.With("component", "indexer")
	if s.indexer, err = indexer.New(ixo); err != nil {
		return nil, err
	}

	qo.ListenAddr, qo.Backend, qo.Stream = o.ListenAddr, s.store, s.events
	if o.KarmadaRegistries {
		qo.KarmadaKubeconfig = o.KarmadaKubeconfig
	}
	qo.CollectorStatusURLs = []string{"http://" + s.collector.Addr() + "/status"}
	qo.CollectorStatusTokenFile = statusToken
	if qo.WatchWindowBytes == 0 {
		qo.WatchWindowBytes = 128 << 20 // a laptop's share; the distributed default is 512 MiB
	}
	qo.Logger = o.Logger.With("component", "queryapi")
	if s.api, err = queryapi.New(qo); err != nil {
		return nil, err
	}
	return s, nil
}

// Addr is the address of the API.
func (s *Standalone) Addr() string { return s.api.Addr() }

// Status is the collector's status rows: what each member's resources are doing.
func (s *Standalone) Status() []registry.ResourceStatus { return s.collector.Status() }

// Run runs the three components until ctx is done, then closes the log and the store once all of
// them returned.
func (s *Standalone) Run(ctx context.Context) error {
	g := lifecycle.New(ctx)
	g.OnStop("log and index", func(context.Context) error { return s.close() })
	g.Go("indexer", s.indexer.Run)
	g.Go("collector", s.collector.Run)
	g.Go("query API", s.api.Run)
	if s.opts.Progress != nil {
		g.Go("first sync progress", func(ctx context.Context) error {
			if _, err := progress.Run(ctx, progress.Options{Rows: s.Status, Out: s.opts.Progress, Log: s.log}); err != nil {
				s.log.Warn("cannot show the first sync's progress", "err", err) // the sync goes on
			}
			return nil
		})
	}
	s.log.Info("standalone: collector, indexer and query API in one process", "addr", s.Addr(), "dataDir", s.opts.DataDir,
		"members", membersFrom(s.opts))
	// Each component bounds its own drain by its own ShutdownTimeout.
	return g.Wait(0)
}

func membersFrom(o Options) string {
	if o.ClustersFile != "" {
		return "the clusters of " + o.ClustersFile
	}
	if o.KarmadaKubeconfig != "" {
		return "the Push-mode Cluster objects of the Karmada control plane of " + o.KarmadaKubeconfig
	}
	return "every context of " + o.Kubeconfig
}

func (s *Standalone) close() error {
	var errs []error
	if s.events != nil {
		s.events.Close()
	}
	if s.store != nil {
		errs = append(errs, s.store.Close())
	}
	if s.lock != nil {
		errs = append(errs, s.lock.Close()) // releases the flock
	}
	return errors.Join(errs...)
}

// lockDir takes an exclusive lock on the data folder: two processes writing one index corrupt it.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, "lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--data-dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		pid, _ := os.ReadFile(path)
		f.Close()
		return nil, fmt.Errorf("--data-dir %s: in use by another kubesearch standalone (pid %s): %w", dir, strings.TrimSpace(string(pid)), err)
	}
	if err := f.Truncate(0); err == nil {
		fmt.Fprintf(f, "%d\n", os.Getpid())
	}
	return f, nil
}

// newStatusToken writes a new random token for the collector's /status into dir: the file the query
// API presents it from, and the token file the collector accepts it with.
func newStatusToken(dir string) (tokenFile, tokensFile string, err error) {
	b := make([]byte, 32)
	rand.Read(b)
	token := hex.EncodeToString(b)
	tokenFile, tokensFile = filepath.Join(dir, "collector-status.token"), filepath.Join(dir, "collector-status.tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(tokensFile, []byte(token+",system:kubesearch:standalone,\n"), 0o600); err != nil {
		return "", "", err
	}
	return tokenFile, tokensFile, nil
}

// tokenKey reads the key signing continue tokens, making it at the first start: tokens stay valid
// across a restart, as long as their snapshot does.
func tokenKey(path string) ([]byte, error) {
	key, err := os.ReadFile(path)
	if err == nil && len(key) >= 16 {
		return key, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	key = make([]byte, 32)
	rand.Read(key)
	if err := os.WriteFile(path, key, 0o600); err != nil {
		return nil, err
	}
	return key, nil
}
