package osstore

import (
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
	cfg, err := Security{SecretDir: dir}.ClientConfig([]string{"https://os:9200"})
	if err != nil || cfg.Username != "admin" || cfg.Password != "s3cret" || len(cfg.Addresses) != 1 {
		t.Fatalf("secret dir: %+v, %v", cfg, err)
	}
	_, err = Security{UsernameFile: "/nonexistent"}.ClientConfig(nil)
	if err == nil || !strings.Contains(err.Error(), "give both or neither") || strings.Contains(err.Error(), "nonexistent") {
		t.Fatalf("half the credentials: %v; want the combination refused before reading", err)
	}
}
