package osstore

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The query API builds its OpenSearch client from the same options; the files are read as for the
// indexer, and bad combinations are refused before any file is read.
func TestSecurityClientConfig(t *testing.T) {
	dir := t.TempDir()
	for name, v := range map[string]string{"userName": "admin\n", "password": "s3cret\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := Security{SecretDir: dir}.clientConfig([]string{"https://os:9200"})
	if err != nil || cfg.Username != "admin" || cfg.Password != "s3cret" || len(cfg.Addresses) != 1 {
		t.Fatalf("secret dir: %+v, %v", cfg, err)
	}
	_, err = Security{UsernameFile: "/nonexistent"}.clientConfig(nil)
	if err == nil || !strings.Contains(err.Error(), "give both or neither") || strings.Contains(err.Error(), "nonexistent") {
		t.Fatalf("half the credentials: %v; want the combination refused before reading", err)
	}
}

// TestSecurityCredentials: a Karmada Secret (userName) or a plain one (username), or two files; every
// bad file is reported, each naming its flag.
func TestSecurityCredentials(t *testing.T) {
	dir := t.TempDir()
	karmada := filepath.Join(dir, "karmada")
	plain := filepath.Join(dir, "plain")
	empty := filepath.Join(dir, "empty")
	for _, d := range []string{karmada, plain, empty} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, karmada, "userName", "admin\n")
	writeFile(t, karmada, "password", "s3cret\n")
	writeFile(t, plain, "username", "indexer")
	writeFile(t, plain, "password", "pw")

	tests := []struct {
		name     string
		sec      Security
		user     string
		pass     string
		wantErrs []string
	}{
		{"Karmada's userName", Security{SecretDir: karmada}, "admin", "s3cret", nil},
		{"username", Security{SecretDir: plain}, "indexer", "pw", nil},
		{"files", Security{UsernameFile: filepath.Join(plain, "username"), PasswordFile: filepath.Join(karmada, "password")}, "indexer", "s3cret", nil},
		{"empty secret", Security{SecretDir: empty}, "", "", []string{"--opensearch-secret-dir:", "neither username nor userName", "password"}},
		{"missing files", Security{UsernameFile: "/nonexistent/u", PasswordFile: "/nonexistent/p"}, "", "",
			[]string{"--opensearch-username-file:", "--opensearch-password-file:"}},
		{"bad CA", Security{CAFile: filepath.Join(plain, "password")}, "", "", []string{"--opensearch-ca-file:", "no PEM certificate"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			user, pass, _, errs := tt.sec.credentials()
			err := errors.Join(errs...)
			if len(tt.wantErrs) > 0 {
				if err == nil {
					t.Fatal("no error")
				}
				for _, w := range tt.wantErrs {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("missing %q in %v", w, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if user != tt.user || pass != tt.pass {
				t.Errorf("got %q/%q, want %q/%q", user, pass, tt.user, tt.pass)
			}
		})
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
