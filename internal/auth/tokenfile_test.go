package auth

import (
	"bytes"
	"crypto/sha256"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestParseTokenFile(t *testing.T) {
	const path = "/etc/kubesearch/tokens.csv"
	tests := []struct {
		name     string
		in       string
		want     map[string]User // token → user
		warnings int
		err      string // substring of the error, "" for none
	}{
		{
			name: "kube-apiserver format",
			in: "t0k3n-alice,alice,uid-1,\"sre,dev\"\n" +
				"t0k3n-bob,bob,uid-2\n" +
				"\n" + // blank lines are skipped
				"t0k3n-carol,carol,uid-3,ops,extra-column-ignored\n",
			want: map[string]User{
				"t0k3n-alice": {Name: "alice", UID: "uid-1", Groups: []string{"sre", "dev", GroupAuthenticated}},
				"t0k3n-bob":   {Name: "bob", UID: "uid-2", Groups: []string{GroupAuthenticated}},
				"t0k3n-carol": {Name: "carol", UID: "uid-3", Groups: []string{"ops", GroupAuthenticated}},
			},
		},
		{
			name: "groups trimmed, empty and duplicate groups dropped",
			in:   "tok,alice,1,\" sre, ,sre,,system:authenticated\"\n",
			want: map[string]User{"tok": {Name: "alice", UID: "1", Groups: []string{"sre", GroupAuthenticated}}},
		},
		{
			name:     "empty token skipped",
			in:       ",nobody,0\ntok,alice,1\n",
			want:     map[string]User{"tok": {Name: "alice", UID: "1", Groups: []string{GroupAuthenticated}}},
			warnings: 1,
		},
		{
			name:     "duplicate token: the later record wins",
			in:       "tok,alice,1\ntok,bob,2\n",
			want:     map[string]User{"tok": {Name: "bob", UID: "2", Groups: []string{GroupAuthenticated}}},
			warnings: 1,
		},
		{name: "empty file", in: "", want: map[string]User{}},
		{name: "too few columns", in: "tok,alice,1\nsecret-token-xyz,bob\n", err: path + ": line 2: 2 columns, want at least 3"},
		{name: "empty user name", in: "tok,alice,1\n\nsecret-token-xyz,,2\n", err: path + ": line 3: empty user name"},
		{name: "bad quote", in: "tok,alice,1\nsecret-token-xyz,bob,2,\"sre\n", err: path + ": line 2: extraneous or missing \" in quoted-field"},
		{name: "bare quote", in: "secret-token-xyz\"x,bob,2\n", err: path + ": line 1: bare \" in non-quoted-field"},
		{name: "comments are not comments (as in kube-apiserver)", in: "# a comment\n", err: path + ": line 1: 1 columns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, warnings, err := parseTokenFile(path, []byte(tt.in))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
				if strings.Contains(err.Error(), "secret-token-xyz") {
					t.Fatalf("error %q shows a token", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(warnings) != tt.warnings {
				t.Errorf("warnings %q, want %d", warnings, tt.warnings)
			}
			if len(set.entries) != len(tt.want) {
				t.Errorf("%d entries, want %d", len(set.entries), len(tt.want))
			}
			for tok, want := range tt.want {
				got, ok := set.lookup(tok)
				if !ok || !reflect.DeepEqual(got, want) {
					t.Errorf("lookup(%q) = %+v, %v; want %+v", tok, got, ok, want)
				}
			}
			if _, ok := set.lookup("not-a-token"); ok {
				t.Error("an unknown token was found")
			}
			for _, w := range warnings {
				if strings.Contains(w, "tok,") {
					t.Errorf("warning %q shows a record", w)
				}
			}
		})
	}
}

// The tokens are held as hashes only: nothing in memory that a dump could leak compares equal to
// a token.
func TestTokenFileHoldsOnlyHashes(t *testing.T) {
	const token = "s3cr3t-token-value-0123456789"
	set, _, err := parseTokenFile("tokens.csv", []byte(token+",alice,1,sre\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := set.entries[0]
	if e.hash != sha256.Sum256([]byte(token)) {
		t.Error("the entry is not keyed by the token's SHA-256")
	}
	// tokenEntry is the hash and the user: no field can hold the token.
	if n := reflect.TypeFor[tokenEntry]().NumField(); n != 2 {
		t.Errorf("tokenEntry has %d fields; a new one must not hold the token", n)
	}
	if bytes.Contains(e.hash[:], []byte(token)) || strings.Contains(e.user.Name+e.user.UID+strings.Join(e.user.Groups, ","), token) {
		t.Error("the token is in memory")
	}
	// Tokens differing only in their last byte, or only in their first, are told apart.
	for _, other := range []string{token[:len(token)-1] + "X", "X" + token[1:], token[:len(token)-1], token + "0"} {
		if _, ok := set.lookup(other); ok {
			t.Errorf("lookup(%q) matched %q", other, token)
		}
	}
}

// Removing a line from the token file revokes its token without a restart, once the reload
// interval passed; a bad new file keeps the tokens read last.
func TestTokenFileReloadRevokes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.csv")
	writeFile(t, path, "alice-token,alice,1\nbob-token,bob,2\n")
	f, err := openTokenFile(path, 5*time.Second, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	f.now = func() time.Time { return now }
	for _, tok := range []string{"alice-token", "bob-token"} {
		if _, ok := f.lookup(tok); !ok {
			t.Fatalf("%s not accepted", tok)
		}
	}

	writeFile(t, path, "alice-token,alice,1\n")
	if _, ok := f.lookup("bob-token"); !ok {
		t.Fatal("the file was checked again before the interval passed")
	}
	now = now.Add(6 * time.Second)
	if _, ok := f.lookup("bob-token"); ok {
		t.Fatal("a removed token is still accepted after the interval")
	}
	if _, ok := f.lookup("alice-token"); !ok {
		t.Fatal("a kept token is refused")
	}

	// A broken file keeps the last good tokens.
	writeFile(t, path, "alice-token,alice,1\nbroken\n")
	now = now.Add(6 * time.Second)
	if _, ok := f.lookup("alice-token"); !ok {
		t.Fatal("a bad new file dropped the tokens read last")
	}
	if err := f.Reload(); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("Reload of a bad file: %v, want an error naming line 2", err)
	}

	// An explicit Reload takes a fixed file at once.
	writeFile(t, path, "alice-token,alice,1\n")
	if err := f.Reload(); err != nil {
		t.Fatal(err)
	}

	// The same number of bytes, another token: seen by its modification time.
	writeFile(t, path, "carol-token,carol,3\n")
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	now = now.Add(6 * time.Second)
	if _, ok := f.lookup("carol-token"); !ok {
		t.Fatal("a token added to the file is refused")
	}
	if _, ok := f.lookup("alice-token"); ok {
		t.Fatal("a token removed from the file is still accepted")
	}
}
