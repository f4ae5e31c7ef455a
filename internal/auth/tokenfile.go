package auth

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// tokenSet is a parsed token file. It holds SHA-256 hashes, never the tokens: a heap dump or a
// debugger shows no credential, and a lookup compares fixed-size hashes in constant time.
type tokenSet struct {
	entries []tokenEntry
}

type tokenEntry struct {
	hash [sha256.Size]byte
	user User
}

// lookup finds the user of token. It compares with every entry and never stops at a match, so its
// time depends on the number of entries only, not on which entry (or which prefix) matches.
func (s *tokenSet) lookup(token string) (User, bool) {
	h := sha256.Sum256([]byte(token))
	found := -1
	for i := range s.entries {
		eq := subtle.ConstantTimeCompare(h[:], s.entries[i].hash[:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return User{}, false
	}
	return s.entries[found].user, true
}

// parseTokenFile reads kube-apiserver's token file format: CSV records of token, user name, uid
// and optionally a quoted, comma-separated list of groups; further columns are ignored. As in
// kube-apiserver, blank lines are skipped, there are no comments, a record with an empty token is
// skipped with a warning and a duplicate token replaces the earlier record with a warning. Unlike
// kube-apiserver, an empty user name is an error (it would authenticate a nameless user), and group
// names are trimmed of spaces with empty ones dropped ("a, b" means groups a and b).
//
// Errors and warnings name the file and line, never the content of a line: a line may hold a token.
func parseTokenFile(path string, data []byte) (set *tokenSet, warnings []string, err error) {
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	r.ReuseRecord = true
	index := make(map[[sha256.Size]byte]int)
	set = &tokenSet{}
	for {
		record, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// csv.ParseError's Err is one of encoding/csv's fixed messages, never the line itself.
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, nil, fmt.Errorf("token file %s: line %d: %w", path, pe.Line, pe.Err)
			}
			return nil, nil, fmt.Errorf("token file %s: %w", path, err)
		}
		line, _ := r.FieldPos(0)
		if len(record) < 3 {
			return nil, nil, fmt.Errorf("token file %s: line %d: %d columns, want at least 3 (token, user name, uid)",
				path, line, len(record))
		}
		if record[0] == "" {
			warnings = append(warnings, fmt.Sprintf("token file %s: line %d: empty token, record skipped", path, line))
			continue
		}
		if record[1] == "" {
			return nil, nil, fmt.Errorf("token file %s: line %d: empty user name", path, line)
		}
		var groups []string
		if len(record) >= 4 {
			for g := range strings.SplitSeq(record[3], ",") {
				groups = append(groups, strings.TrimSpace(g))
			}
		}
		e := tokenEntry{hash: sha256.Sum256([]byte(record[0])), user: authenticated(record[1], record[2], groups)}
		if i, dup := index[e.hash]; dup {
			warnings = append(warnings, fmt.Sprintf("token file %s: line %d: duplicate token, replaces an earlier record", path, line))
			set.entries[i] = e
			continue
		}
		index[e.hash] = len(set.entries)
		set.entries = append(set.entries, e)
	}
	return set, warnings, nil
}

// fileStamp tells whether a file changed since it was read: another file behind the path (a
// Kubernetes Secret volume swaps a symlink), another size or another modification time.
type fileStamp struct {
	info os.FileInfo
}

func (s fileStamp) same(info os.FileInfo) bool {
	return s.info != nil && os.SameFile(s.info, info) && s.info.Size() == info.Size() && s.info.ModTime().Equal(info.ModTime())
}

// tokenFile is the token file, re-read when it changes so that removing a line revokes a token
// without a restart. It checks lazily, when a token is looked up and at most once per interval: no
// goroutine to own, and an idle server does no work.
type tokenFile struct {
	path     string
	interval time.Duration
	log      *slog.Logger
	now      func() time.Time

	set atomic.Pointer[tokenSet]

	mu      sync.Mutex // held while checking; lookups meanwhile use the current set
	stamp   fileStamp
	checked time.Time
}

func openTokenFile(path string, interval time.Duration, log *slog.Logger) (*tokenFile, error) {
	f := &tokenFile{path: path, interval: interval, log: log, now: time.Now}
	if err := f.Reload(); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *tokenFile) lookup(token string) (User, bool) {
	f.maybeReload()
	return f.set.Load().lookup(token)
}

// maybeReload re-reads the file if the interval passed and the file changed. A lookup never waits
// for another one's check.
func (f *tokenFile) maybeReload() {
	if !f.mu.TryLock() {
		return
	}
	defer f.mu.Unlock()
	now := f.now()
	if now.Sub(f.checked) < f.interval {
		return
	}
	f.checked = now
	info, err := os.Stat(f.path)
	if err == nil && f.stamp.same(info) {
		return
	}
	if err := f.reloadLocked(); err != nil {
		// Keep the tokens read last (as the policy file does): a half-written file must not lock
		// everyone out. The stamp of the bad file is recorded, so it is reported once per change.
		f.log.Error("token file not reloaded, keeping the previous tokens", "err", err)
	}
}

// Reload re-reads the file now. On error the tokens read last stay in use.
func (f *tokenFile) Reload() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checked = f.now()
	return f.reloadLocked()
}

func (f *tokenFile) reloadLocked() error {
	file, err := os.Open(f.path)
	if err != nil {
		return fmt.Errorf("token file: %w", err)
	}
	defer file.Close()
	// The stamp is of the file read (the same open file), so a change during or after the read is
	// seen at the next check.
	info, err := file.Stat()
	if err != nil {
		return fmt.Errorf("token file: %w", err)
	}
	f.stamp = fileStamp{info: info}
	data, err := io.ReadAll(file)
	if err != nil {
		return fmt.Errorf("token file %s: %w", f.path, err)
	}
	set, warnings, err := parseTokenFile(f.path, data)
	if err != nil {
		return err
	}
	for _, w := range warnings {
		f.log.Warn(w)
	}
	f.set.Store(set)
	f.log.Info("token file loaded", "path", f.path, "tokens", len(set.entries))
	return nil
}
