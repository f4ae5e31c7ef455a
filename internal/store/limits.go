package store

import (
	"errors"
	"fmt"
	"sync"
)

// Limits bound what the searches of one subject (query.Query.Subject) may hold of a backend
// (DESIGN section 6: every resource a request can hold is bounded per subject). Both backends
// apply them alike; the zero value of a field means its default.
type Limits struct {
	// SnapshotsPerSubject bounds the snapshots one subject's paged queries hold between pages
	// (OpenSearch point-in-times, the embedded store's index readers). A first page past it closes
	// the subject's least recently used snapshot no page is being read in: that query's continue
	// token then answers ErrExpired (410; Kubernetes clients list again).
	SnapshotsPerSubject int
	// Snapshots bounds the snapshots of every subject together, in this process. Continue tokens
	// handed to clients hold at most three quarters of them; the last quarter is kept for queries
	// the server reads to the end at once (query.Query.Drain: the facade's LISTs without a limit,
	// watches' initial events), so those get a snapshot however many tokens clients keep. Past
	// it, an idle snapshot of a client token is closed, as above: the least recently used one of
	// the subject holding the most, and never one of a subject within its fair share (the room
	// for client tokens divided among the subjects holding any), so a few subjects each within
	// SnapshotsPerSubject cannot close everyone else's.
	Snapshots int
	// FuzzySearchesPerSubject bounds one subject's searches by fuzzy name (query.Query.Costly)
	// running at once; past it, ErrThrottled (429).
	FuzzySearchesPerSubject int
}

// Defaults of Limits. OpenSearch opens at most 300 point-in-times per node
// (search.max_open_pit_context): Snapshots stays below it, and an operator running several query
// API replicas on one OpenSearch sets it to about 300 divided by the replicas.
const (
	DefaultSnapshotsPerSubject     = 20
	DefaultSnapshots               = 200
	DefaultFuzzySearchesPerSubject = 2
)

// WithDefaults fills the zero fields.
func (l Limits) WithDefaults() Limits {
	if l.SnapshotsPerSubject == 0 {
		l.SnapshotsPerSubject = DefaultSnapshotsPerSubject
	}
	if l.Snapshots == 0 {
		l.Snapshots = DefaultSnapshots
	}
	if l.FuzzySearchesPerSubject == 0 {
		l.FuzzySearchesPerSubject = DefaultFuzzySearchesPerSubject
	}
	return l
}

// Validate reports every negative bound.
func (l Limits) Validate() error {
	var errs []error
	for _, b := range []struct {
		name string
		v    int
	}{{"snapshots per subject", l.SnapshotsPerSubject}, {"snapshots", l.Snapshots}, {"fuzzy searches per subject", l.FuzzySearchesPerSubject}} {
		if b.v < 0 {
			errs = append(errs, fmt.Errorf("store: %s must not be negative, got %d", b.name, b.v))
		}
	}
	return errors.Join(errs...)
}

// ErrThrottled: the subject has as many searches of a costly kind running as it may; the message
// says which bound. Retrying later can succeed (Kubernetes answers 429 TooManyRequests).
var ErrThrottled = errors.New("too many searches running")

// InFlight counts the searches of one costly kind each subject has running, and refuses one past
// its bound. It is safe for concurrent use.
type InFlight struct {
	max  int
	what string

	mu      sync.Mutex
	running map[string]int
}

// NewInFlight bounds each subject to max searches at once; what names them in the refusal
// ("searches by fuzzyName").
func NewInFlight(max int, what string) *InFlight {
	return &InFlight{max: max, what: what, running: map[string]int{}}
}

// Acquire counts one search of subject, or refuses it with ErrThrottled; done ends it.
func (f *InFlight) Acquire(subject string) (done func(), err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.running[subject] >= f.max {
		who := fmt.Sprintf("%q", subject)
		if subject == "" {
			who = "the server"
		}
		return nil, fmt.Errorf("%w: %s has %d %s running, at most %d at once; retry when one has answered", ErrThrottled, who, f.running[subject], f.what, f.max)
	}
	f.running[subject]++
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.running[subject]--; f.running[subject] == 0 {
				delete(f.running, subject)
			}
		})
	}, nil
}
