package packaging

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/yaml"
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
	typ        string // pflag's value type ("string", "strings", "duration", ...); "" for a boolean
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
			flags[m[1]] = flagSpec{takesValue: m[2] != "", typ: m[2], required: strings.Contains(m[3], "(required)")}
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
	got, problems := parseFlags(t, command, args)
	return got, append(problems, missingRequired(t, command, got)...)
}

// parseFlags is parseArgs without the check of required flags (they may come from a config file).
func parseFlags(t *testing.T, command string, args []string) (map[string]string, []string) {
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
	return got, problems
}

// parseConfig reads a --config file (YAML, keys = flag names) into flag → value as the command line
// would spell it, checking each key against --help: unknown keys, --config and --help themselves,
// lists for a flag of one value, a boolean flag given something else than true or false, mappings
// and empty values are errors.
func parseConfig(t *testing.T, command string, data []byte) (map[string]string, []string) {
	t.Helper()
	flags := commandFlags(t, command)
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, []string{fmt.Sprintf("config file: %v", err)}
	}
	got := map[string]string{}
	var problems []string
	for key, v := range doc {
		spec, ok := flags[key]
		if !ok || key == "config" || key == "help" {
			problems = append(problems, fmt.Sprintf("config key %s: not a flag of `kubesearch %s` (see --help)", key, command))
			continue
		}
		scalar := func(v any) (string, bool) {
			switch v := v.(type) {
			case string:
				return v, spec.typ != ""
			case bool:
				return strconv.FormatBool(v), true
			case float64:
				return strconv.FormatFloat(v, 'f', -1, 64), spec.typ != ""
			}
			return "", false
		}
		var value string
		if list, isList := v.([]any); isList {
			if spec.typ != "strings" {
				problems = append(problems, fmt.Sprintf("config key %s: a list, but --%s takes one %s", key, key, cmp.Or(spec.typ, "boolean")))
				continue
			}
			items := make([]string, 0, len(list))
			for _, item := range list {
				s, ok := scalar(item)
				if !ok {
					problems = append(problems, fmt.Sprintf("config key %s: list item %v is not a value", key, item))
				}
				items = append(items, s)
			}
			value = strings.Join(items, ",")
		} else if value, ok = scalar(v); !ok {
			problems = append(problems, fmt.Sprintf("config key %s: %v (%T) is not a value --%s takes", key, v, v, key))
			continue
		}
		got[key] = value
	}
	return got, problems
}

// missingRequired are the required flags of a command that none of sets gives.
func missingRequired(t *testing.T, command string, sets ...map[string]string) []string {
	t.Helper()
	var problems []string
	for name, spec := range commandFlags(t, command) {
		given := false
		for _, set := range sets {
			_, ok := set[name]
			given = given || ok
		}
		if spec.required && !given {
			problems = append(problems, fmt.Sprintf("--%s: required by `kubesearch %s`", name, command))
		}
	}
	return problems
}
