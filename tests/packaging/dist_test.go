package packaging

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// `make dist` builds the release binaries: static, path-free, stamped with the version and commit it
// is given, listed with their SHA-256 in SHA256SUMS. The test builds the amd64 one into a temporary
// folder (same flags as kubesearchBinary, so the Go build cache serves it) and checks that both
// architectures are in the default build.
func TestDist(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not installed")
	}
	// The default build covers both architectures.
	plan := run(t, "make", "-C", root(), "-s", "--no-print-directory", "-n", "dist", "DIST_DIR="+t.TempDir())
	for _, arch := range []string{"amd64", "arm64"} {
		if !bytes.Contains(plan, []byte("kubesearch-dev-linux-"+arch)) {
			t.Errorf("make -n dist does not build linux/%s:\n%s", arch, plan)
		}
	}

	dir := t.TempDir()
	cmd := exec.Command("make", "-C", root(), "-s", "--no-print-directory", "dist", "GO=go", "DIST_DIR="+dir, "DIST_ARCHES=amd64",
		"DIST_VERSION="+testVersion, "DIST_COMMIT="+testCommit)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make dist: %v\n%s", err, out)
	}
	name := "kubesearch-" + testVersion + "-linux-amd64"
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		files = append(files, e.Name())
	}
	if want := []string{"SHA256SUMS", name}; !slices.Equal(files, want) {
		t.Errorf("dist holds %v, want %v", files, want)
	}

	// SHA256SUMS is in sha256sum's format and matches the binary.
	sums, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(bin)
	var lines []string
	for s := bufio.NewScanner(bytes.NewReader(sums)); s.Scan(); {
		lines = append(lines, s.Text())
	}
	if want := hex.EncodeToString(sum[:]) + "  " + name; !slices.Equal(lines, []string{want}) {
		t.Errorf("SHA256SUMS:\n%s\nwant the single line %q", sums, want)
	}

	// Static and built with -trimpath: no interpreter, no shared library, no path of this machine.
	f, err := elf.Open(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 {
		t.Errorf("machine %s, want x86-64", f.Machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary asks for a dynamic loader (PT_INTERP): not static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary links %v: not static", libs)
	}
	if bytes.Contains(bin, []byte(root())) {
		t.Errorf("the binary holds the build folder %s: not built with -trimpath", root())
	}

	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skipf("the linux/amd64 binary does not run on %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	out := run(t, filepath.Join(dir, name), "version")
	for _, want := range []string{"kubesearch " + testVersion + "\n", "commit: " + testCommit + "\n", "go: go1.", " linux/amd64\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("kubesearch version printed %q, want it to contain %q", out, want)
		}
	}
}
