package packaging

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
)

const (
	testVersion = "v9.9.9-test"
	testCommit  = "0123456789abcdef"
)

var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kubesearch-packaging")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// root is the repository's top folder.
func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

type built struct {
	once sync.Once
	path string
	err  error
}

var builds sync.Map // name → *built

// buildOnce runs `go build` once per test binary and returns the program's path.
func buildOnce(t *testing.T, name, dir string, env []string, args ...string) string {
	t.Helper()
	v, _ := builds.LoadOrStore(name, &built{})
	b := v.(*built)
	b.once.Do(func() {
		b.path = filepath.Join(binDir, name)
		cmd := exec.Command("go", append([]string{"build", "-o", b.path}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(append(os.Environ(), "GOWORK=off"), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", name, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// kubesearchBinary is the product binary as the Dockerfile builds it: static, stamped by -ldflags.
func kubesearchBinary(t *testing.T) string {
	t.Helper()
	ldflags := fmt.Sprintf("-s -w -X main.version=%s -X main.commit=%s", testVersion, testCommit)
	return buildOnce(t, "kubesearch", root(), []string{"CGO_ENABLED=0", "GOOS=linux"}, "-trimpath", "-ldflags", ldflags, "./cmd/kubesearch")
}

// tool builds one program of the tools module (tools/image, tools/chart).
func tool(t *testing.T, name string) string {
	t.Helper()
	return buildOnce(t, "tool-"+name, filepath.Join(root(), "tests/packaging/tools"), nil, "./"+name)
}

// run runs a program and returns its standard output, failing the test with its standard error.
func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	out, err := runErr(name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func runErr(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// flagSpec is one flag of `kubesearch <command> --help`.
type flagSpec struct {
	takesValue bool
	required   bool
}

// flagLine is a flag of pflag's help: "      --name type   usage" or "  -h, --help   usage"; a flag
// without a type (a boolean) takes no value.
var flagLine = regexp.MustCompile(`^(?:  -[a-zA-Z], |      )--([a-z0-9-]+)(?: (\S+))?(?:\s{2,}(.*))?$`)

var (
	helpMu    sync.Mutex
	helpCache = map[string]map[string]flagSpec{}
)

// commandFlags are the flags `kubesearch <command> --help` lists: the source of truth for every
// argument the compose file and the chart pass. They are the lines of its "... flags:" sections.
func commandFlags(t *testing.T, command string) map[string]flagSpec {
	t.Helper()
	helpMu.Lock()
	defer helpMu.Unlock()
	if f, ok := helpCache[command]; ok {
		return f
	}
	cmd := exec.Command(kubesearchBinary(t), command, "--help")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubesearch %s --help: %v\n%s", command, err, out.String())
	}
	flags := map[string]flagSpec{}
	inFlags := false
	s := bufio.NewScanner(&out)
	for s.Scan() {
		line := s.Text()
		if line != "" && !strings.HasPrefix(line, " ") { // a heading: "Kafka flags:", "Examples:"
			inFlags = strings.HasSuffix(strings.ToLower(line), "flags:")
			continue
		}
		if m := flagLine.FindStringSubmatch(line); inFlags && m != nil {
			flags[m[1]] = flagSpec{takesValue: m[2] != "", required: strings.Contains(m[3], "(required)")}
		}
	}
	if len(flags) < 3 {
		t.Fatalf("kubesearch %s --help: too few flags parsed:\n%s", command, out.String())
	}
	helpCache[command] = flags
	return flags
}

// parseArgs splits a kubesearch command line (after the subcommand) into flag → value, checking each
// flag against --help: unknown flags, missing values and missing required flags are errors.
func parseArgs(t *testing.T, command string, args []string) (map[string]string, []string) {
	t.Helper()
	flags := commandFlags(t, command)
	got := map[string]string{}
	var problems []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			problems = append(problems, fmt.Sprintf("%q: not a flag (kubesearch %s takes flags only)", a, command))
			continue
		}
		if !strings.HasPrefix(a, "--") {
			problems = append(problems, fmt.Sprintf("%q: long flags take two dashes", a))
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		spec, ok := flags[name]
		if !ok {
			problems = append(problems, fmt.Sprintf("--%s: not a flag of `kubesearch %s` (see --help)", name, command))
			continue
		}
		if spec.takesValue && !hasValue {
			if i+1 >= len(args) {
				problems = append(problems, fmt.Sprintf("--%s: needs a value", name))
				continue
			}
			i++
			value = args[i]
		}
		got[name] = value
	}
	for name, spec := range flags {
		if _, ok := got[name]; spec.required && !ok {
			problems = append(problems, fmt.Sprintf("--%s: required by `kubesearch %s`", name, command))
		}
	}
	return got, problems
}
