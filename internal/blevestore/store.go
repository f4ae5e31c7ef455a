package blevestore

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/keyword"
	bolt "go.etcd.io/bbolt"

	"github.com/kubesearch/kubesearch/internal/pagetoken"
	"github.com/kubesearch/kubesearch/internal/store"
)

// Options configure a Store.
type Options struct {
	// Dir holds the index and the state database; created when missing.
	Dir string
	// TokenKey signs continue tokens; nil makes a random one (tokens then die with the process).
	TokenKey []byte
	// KeepAlive is how long a paged query's snapshot lives between two pages (0 means 5 minutes,
	// as osstore's).
	KeepAlive time.Duration
	// Limits bound what one subject's searches hold: snapshots between pages, searches by fuzzy
	// name running (store.Limits; zero fields are defaults), as osstore's.
	Limits store.Limits
	Logger *slog.Logger
}

// Validate reports every invalid option at once.
func (o Options) Validate() error {
	var errs []error
	if o.Dir == "" {
		errs = append(errs, errors.New("blevestore: no directory"))
	}
	if len(o.TokenKey) > 0 && len(o.TokenKey) < 16 {
		errs = append(errs, errors.New("blevestore: token key shorter than 16 bytes"))
	}
	if o.KeepAlive < 0 {
		errs = append(errs, fmt.Errorf("blevestore: keep-alive must not be negative, got %s", o.KeepAlive))
	}
	errs = append(errs, o.Limits.Validate())
	return errors.Join(errs...)
}

// Store is the embedded store: one bleve index of every document, and a bbolt database of the
// watermarks, under one directory. It is safe for concurrent use; writes are applied one Write at a
// time.
type Store struct {
	dir       string
	tokens    tokenCodec
	keepAlive time.Duration
	now       func() time.Time
	log       *slog.Logger

	idx   bleve.Index
	state *bolt.DB

	// writeMu orders writes and garbage collection, and guards docs: the write rule's view of every
	// document and tombstone, kept in memory and rebuilt from the index at open.
	writeMu sync.Mutex
	docs    map[string]*stored

	// snaps are the snapshots held for continue tokens, by subject; fuzzy counts the searches by
	// fuzzy name running (store.Limits).
	snaps *store.Snapshots[*snapshot]
	fuzzy *store.InFlight

	closeOnce sync.Once
	stop      chan struct{}
	wg        sync.WaitGroup
}

// New opens the store under o.Dir, creating it when missing, and starts the janitor that frees
// expired snapshots. Close stops it.
func New(o Options) (*Store, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	key := o.TokenKey
	if len(key) == 0 {
		key = make([]byte, 32)
		_, _ = crand.Read(key) // crypto/rand.Read never fails (Go 1.24+)
	}
	ka := o.KeepAlive
	if ka == 0 {
		ka = 5 * time.Minute
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	if err := os.MkdirAll(o.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("blevestore: create %s: %w", o.Dir, err)
	}
	s := &Store{
		dir: o.Dir, tokens: tokenCodec{pagetoken.New(key)}, keepAlive: ka, now: time.Now, log: log,
		docs: map[string]*stored{}, stop: make(chan struct{}),
	}
	if err := s.open(); err != nil {
		return nil, err
	}
	s.snaps = store.NewSnapshots[*snapshot](o.Limits)
	s.fuzzy = store.NewInFlight(o.Limits.WithDefaults().FuzzySearchesPerSubject, "searches by fuzzyName")
	s.wg.Add(1)
	go s.janitor()
	return s, nil
}

func (s *Store) open() error {
	// The state database first: its lock (with a timeout) keeps a second process off the
	// directory, where the index's own lock would wait for ever.
	statePath := filepath.Join(s.dir, "state.db")
	db, err := bolt.Open(statePath, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return fmt.Errorf("blevestore: open state %s (is another process using the directory?): %w", statePath, err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(watermarkBucket)
		return err
	}); err != nil {
		return errors.Join(fmt.Errorf("blevestore: state %s: %w", statePath, err), db.Close())
	}
	path := filepath.Join(s.dir, "index.bleve")
	idx, err := bleve.Open(path)
	if errors.Is(err, bleve.ErrorIndexPathDoesNotExist) {
		// Fields are built by this package (index.go), never through the mapping: it only has to
		// analyse nothing.
		m := bleve.NewIndexMapping()
		m.DefaultAnalyzer = keyword.Name
		m.IndexDynamic, m.StoreDynamic, m.DocValuesDynamic = false, false, false
		idx, err = bleve.New(path, m)
	}
	if err != nil {
		return errors.Join(fmt.Errorf("blevestore: open index %s: %w", path, err), db.Close())
	}
	s.idx, s.state = idx, db
	if err := s.loadDocs(); err != nil {
		return errors.Join(err, idx.Close(), db.Close())
	}
	return nil
}

// Setup makes the store ready for writes. New already opened (or created) the index and the
// state, so there is nothing left to do but to say so; calling it again is harmless.
func (s *Store) Setup(ctx context.Context, o store.SetupOptions) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := s.idx.DocCount(); err != nil {
		return fmt.Errorf("blevestore: index: %w", err)
	}
	if o.Step != nil {
		o.Step("embedded index ready in " + s.dir)
	}
	return nil
}

// Refresh makes everything written so far searchable. Every Write and garbage collection commits
// its batch before it returns, searchable and on disk, so there is nothing to do: it keeps the
// contract callers rely on.
func (s *Store) Refresh(ctx context.Context, kinds ...string) error {
	return ctx.Err()
}

// Close stops the janitor, frees every snapshot, and closes the index and the state database.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.stop)
		s.wg.Wait()
		for _, sn := range s.snaps.Close() {
			_ = sn.r.Close()
		}
		err = errors.Join(s.idx.Close(), s.state.Close())
	})
	return err
}

// janitor frees the snapshots of continue tokens nobody used within the keep-alive.
func (s *Store) janitor() {
	defer s.wg.Done()
	every := min(max(s.keepAlive/4, 10*time.Millisecond), 30*time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if expired := s.snaps.Expire(s.now()); len(expired) > 0 {
				for _, sn := range expired {
					_ = sn.r.Close()
				}
				s.log.Debug("freed expired snapshots", "snapshots", len(expired))
			}
			s.expireTombstones()
		}
	}
}
