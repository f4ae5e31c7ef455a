package authz

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultReloadInterval is how often, at most, the policy file is checked for changes.
const DefaultReloadInterval = 5 * time.Second

// Options configure an Authorizer.
type Options struct {
	// PolicyFile (--authorization-policy-file) is the policy, re-read when it changes.
	PolicyFile string
	// ReloadInterval is how often, at most, the file is checked for changes.
	ReloadInterval time.Duration
	// Logger receives reloads and the problems of a bad new file.
	Logger *slog.Logger
}

// Check reports every option that is wrong, without reading the file.
func (o Options) Check() error {
	var errs []error
	if o.PolicyFile == "" {
		errs = append(errs, errors.New("--authorization-policy-file: required"))
	}
	if o.ReloadInterval < 0 {
		errs = append(errs, fmt.Errorf("reload interval: %v is negative", o.ReloadInterval))
	}
	return errors.Join(errs...)
}

// Authorizer holds the policy of the policy file, re-read when the file changes so that a change
// of grants needs no restart. A bad new file keeps the policy read last, and is logged. It checks
// lazily, when the policy is asked for and at most once per interval: no goroutine to own.
type Authorizer struct {
	path     string
	interval time.Duration
	log      *slog.Logger
	now      func() time.Time

	policy atomic.Pointer[Policy]

	mu      sync.Mutex // held while checking; requests meanwhile use the current policy
	info    os.FileInfo
	checked time.Time
}

// New reads the policy file.
func New(o Options) (*Authorizer, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	if o.ReloadInterval == 0 {
		o.ReloadInterval = DefaultReloadInterval
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	a := &Authorizer{path: o.PolicyFile, interval: o.ReloadInterval, log: o.Logger, now: time.Now}
	if err := a.Reload(); err != nil {
		return nil, fmt.Errorf("--authorization-policy-file: %w", err)
	}
	return a, nil
}

// Policy is the current policy. A request should ask once and make all its checks (Scope,
// Allowed, Visible) with the one answer, so that a reload between them cannot mix two policies.
func (a *Authorizer) Policy() *Policy {
	a.maybeReload()
	return a.policy.Load()
}

// Reload re-reads the file now; on error the policy read last stays in use.
func (a *Authorizer) Reload() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.checked = a.now()
	return a.reloadLocked()
}

func (a *Authorizer) maybeReload() {
	if !a.mu.TryLock() {
		return
	}
	defer a.mu.Unlock()
	now := a.now()
	if now.Sub(a.checked) < a.interval {
		return
	}
	a.checked = now
	if info, err := os.Stat(a.path); err == nil && a.same(info) {
		return
	}
	if err := a.reloadLocked(); err != nil {
		a.log.Error("policy file not reloaded, keeping the previous policy", "err", err)
	}
}

// same tells whether the file is the one read last: the same file behind the path (a Kubernetes
// Secret or ConfigMap volume swaps a symlink), size and modification time.
func (a *Authorizer) same(info os.FileInfo) bool {
	return a.info != nil && os.SameFile(a.info, info) && a.info.Size() == info.Size() && a.info.ModTime().Equal(info.ModTime())
}

func (a *Authorizer) reloadLocked() error {
	// Stat first: a change while reading is then seen at the next check.
	info, err := os.Stat(a.path)
	if err != nil {
		return fmt.Errorf("policy file: %w", err)
	}
	p, err := Load(a.path)
	a.info = info // a bad file is reported once per change, not at every check
	if err != nil {
		return err
	}
	a.policy.Store(p)
	a.log.Info("policy file loaded", "path", a.path, "rules", p.Rules())
	return nil
}
