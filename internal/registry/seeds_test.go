package registry

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// seedsDir holds the design's seed documents, beside the repository; the fidelity check is skipped
// where they are absent.
const seedsDir = "../../../shared/seeds"

type seedExample struct {
	file string
	seed string
	// wantErr is empty when the example loads; otherwise a substring of the error.
	wantErr string
}

// seedExamples are the YAML examples of the seeds, copied into testdata, and what Load makes of them.
func seedExamples() []seedExample {
	return []seedExample{
		{file: "001-clustercache-sample.yaml", seed: "001_ee2cea62352186b4.txt"},
		{file: "000-clustercache-draft.yaml", seed: "000_e0c35f30e4b47b7d.txt",
			wantErr: `apiVersion "clustercaches.karmada.io/v1alpha1" kind "ClusterCache" is the caching proposal's early draft, never served by Karmada`},
		{file: "002-deployment-generatename.yaml", seed: "002_3425b8bdaa6e5da7.txt",
			wantErr: `apiVersion "apps/v1" kind "Deployment" is not a ResourceRegistry`},
	}
}

func TestSeedExamplesLoad(t *testing.T) {
	for _, ex := range seedExamples() {
		t.Run(ex.file, func(t *testing.T) {
			_, err := Load(filepath.Join("testdata/seeds", ex.file))
			switch {
			case ex.wantErr == "" && err != nil:
				t.Fatalf("Load: %v", err)
			case ex.wantErr != "" && (err == nil || !strings.Contains(err.Error(), ex.wantErr)):
				t.Fatalf("Load error = %v, want one containing %q", err, ex.wantErr)
			}
		})
	}
}

// TestSeedExamplesMatchSeeds checks that the copies in testdata say what the seeds say, ignoring
// comments and whitespace (seed 001 lost its line breaks in extraction).
func TestSeedExamplesMatchSeeds(t *testing.T) {
	if _, err := os.Stat(seedsDir); err != nil {
		t.Skipf("seeds not available: %v", err)
	}
	for _, ex := range seedExamples() {
		t.Run(ex.file, func(t *testing.T) {
			copied, err := os.ReadFile(filepath.Join("testdata/seeds", ex.file))
			if err != nil {
				t.Fatal(err)
			}
			seed, err := os.ReadFile(filepath.Join(seedsDir, ex.seed))
			if err != nil {
				t.Fatal(err)
			}
			var lines []string
			for _, l := range strings.Split(string(copied), "\n") {
				if !strings.HasPrefix(strings.TrimSpace(l), "#") {
					lines = append(lines, l)
				}
			}
			want := strings.Join(strings.Fields(strings.Join(lines, "\n")), " ")
			if !strings.Contains(strings.Join(strings.Fields(string(seed)), " "), want) {
				t.Errorf("testdata/seeds/%s is not in seed %s:\n%s", ex.file, ex.seed, want)
			}
		})
	}
}
