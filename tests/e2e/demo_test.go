//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/tests/testbed"
)

// TestDemo runs `make run 2>&1 | tee` as a newcomer does, in its own state folder and process group,
// on a machine whose every core another process keeps busy until the demo is ready: it waits for the
// queries the demo prints, runs every printed curl and kubectl command and checks the answers (the
// shared Deployment once per member, the custom resources from the one member that has them, the
// Pending pods by a field selector, what is broken in namespace shop), then presses Ctrl-C (SIGINT to
// the process group, tee included) and checks that every process the demo started is gone and its
// state folder with them. It needs no test bed services: the demo brings its own members; a cold
// build cache makes it build Kubernetes first.
func TestDemo(t *testing.T) {
	root := testbed.Root()
	state := filepath.Join(t.TempDir(), "demo")
	listen := "127.0.0.1:" + strconv.Itoa(freePort(t))
	logs := &bytes.Buffer{}
	var logMu sync.Mutex
	stopBusy := keepCoresBusy(t)
	defer stopBusy()

	cmd := exec.Command("bash", "-c", `make -s run 2>&1 | tee "$DEMO_TEE"`)
	cmd.Dir = root
	cmd.Env = append(withoutEnv(os.Environ(), "KUBESEARCH_TESTBED_DIR", "KUBECONFIG"),
		"KUBESEARCH_DEMO_DIR="+state, "KUBESEARCH_DEMO_LISTEN="+listen, "DEMO_TEE="+state+".log")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = &lockedWriter{mu: &logMu, w: logs}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	exited := make(chan error, 1)
	printed := make(chan []string, 1)
	go func() {
		// Through tee, the demo's progress and the queries; the queries' last line ends the block,
		// which starts after the line "==> kubesearch is ready".
		var lines []string
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			logMu.Lock()
			logs.WriteString(s.Text() + "\n")
			logMu.Unlock()
			if strings.HasPrefix(s.Text(), "==> kubesearch is ready") {
				lines = nil
			}
			lines = append(lines, s.Text())
			if strings.HasPrefix(s.Text(), "# Ctrl-C here stops") {
				printed <- lines
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	stopped := false
	t.Cleanup(func() {
		if !stopped { // the test failed before its own Ctrl-C: stop the demo the same way
			_ = syscall.Kill(-pgid, syscall.SIGINT)
			select {
			case <-exited:
			case <-time.After(2 * time.Minute):
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
			}
		}
		if t.Failed() {
			logMu.Lock()
			defer logMu.Unlock()
			t.Logf("---- stderr of make run (last 200 lines) ----\n%s", tail(logs.String(), 200))
		}
	})

	var block []string
	select {
	case block = <-printed:
	case err := <-exited:
		stopped = true
		t.Fatalf("make run exited before printing the queries: %v", err)
	case <-time.After(45 * time.Minute): // a cold cache builds Kubernetes first
		t.Fatal("make run printed no queries within 45 minutes")
	}
	stopBusy()
	t.Logf("printed:\n%s", strings.Join(block, "\n"))
	started := demoProcesses(t, state)
	if len(started) < 3*5+1 { // etcd, apiserver, controller-manager, scheduler, kwok per member, kubesearch
		t.Errorf("found %d processes of the demo, want at least 16: %v", len(started), started)
	}

	// Every printed command runs as printed, with the block's exports and the test bed's kubectl.
	var exports, commands []string
	for _, l := range block {
		switch {
		case strings.HasPrefix(l, "export "):
			exports = append(exports, l)
		case strings.HasPrefix(l, "curl ") || strings.HasPrefix(l, "kubectl "):
			commands = append(commands, l)
		}
	}
	prelude := "set -o pipefail\nexport PATH=" + testbedBinDir(t, root) + ":$PATH\n" + strings.Join(exports, "\n") + "\n"
	checks := []struct {
		match string // a substring of the printed command
		want  []string
		not   []string
	}{
		{match: "labelSelector=app.kubernetes.io/name%3Dweb", want: []string{"member1", "member2", "member3"}},
		{match: "image%3Dnginx:1.27.3", want: []string{"member1", "member2", "member3", "web-"}, not: []string{"cart-"}},
		{match: "namespaces=shop&fieldSelector=status.conditions.status%3DFalse",
			want: []string{"checkout-", "CrashLoopBackOff", "recommendations-", "Unschedulable"}, not: []string{"web-", "cart-"}},
		{match: "status.phase!%3DRunning", want: []string{"recommendations-", "payments-worker-", "ledger-migrate-"}, not: []string{"web-"}},
		{match: "q=payments", want: []string{"payments-api"}},
		{match: "/v1alpha1/fleet", want: []string{"member1", "member2", "member3"}},
		{match: "get pods -A -o wide", want: []string{"CLUSTER", "member1", "member2", "member3", "node-exporter-"}},
		{match: "get deployments -n shop -l", want: []string{"web", "cart", "checkout", "recommendations"}, not: []string{"node-exporter"}},
		{match: "--field-selector status.phase=Pending", want: []string{"recommendations-", "payments-worker-"}, not: []string{"web-", "checkout-"}},
		{match: "get databases -A", want: []string{"member3", "orders", "ledger", "postgres"}, not: []string{"member1", "member2"}},
		{match: "kubesearch-qualified get deployments", want: []string{"web_member1", "web_member2", "web_member3"}},
		{match: "kubesearch-member3 get pods -n payments", want: []string{"payments-api-", "ledger-migrate-"}, not: []string{"web-"}},
		{match: "kubectl search pods --image nginx:1.27.3", want: []string{"CLUSTER", "member1", "member2", "member3", "web-"}, not: []string{"cart-"}},
		{match: "--count-by cluster", want: []string{"CLUSTER", "COUNT", "member1", "member2", "member3"}},
	}
	for _, c := range checks {
		i := slices.IndexFunc(commands, func(cmd string) bool { return strings.Contains(cmd, c.match) })
		if i < 0 {
			t.Errorf("no printed command with %q", c.match)
			continue
		}
		line := commands[i]
		commands = slices.Delete(commands, i, i+1)
		// The index follows the members within seconds of /readyz; give it that long.
		var out string
		var err error
		deadline := time.Now().Add(60 * time.Second)
		for {
			out, err = runShell(t.Context(), prelude+line)
			if err == nil && containsAll(out, c.want) && containsNone(out, c.not) || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Second)
		}
		if err != nil || !containsAll(out, c.want) || !containsNone(out, c.not) {
			t.Errorf("%s\n=> err %v, want %q and none of %q in:\n%s", line, err, c.want, c.not, out)
		}
	}
	for _, line := range commands { // printed but not checked above: each must at least work
		if out, err := runShell(t.Context(), prelude+line); err != nil || strings.TrimSpace(out) == "" {
			t.Errorf("%s\n=> err %v, output:\n%s", line, err, out)
		}
	}

	// The search page's printed URL serves the page (TestSearchPage drives it in a browser).
	pageURL := ""
	for _, l := range block {
		if u, ok := strings.CutPrefix(l, "page: "); ok {
			pageURL = u
		}
	}
	if !strings.Contains(pageURL, "/ui/?q=") {
		t.Errorf("make run printed no search page URL (a line \"page: http://.../ui/?q=...\")")
	} else if body := string(httpGetBody(t, pageURL)); !strings.Contains(body, "<title>kubesearch</title>") {
		t.Errorf("GET %s: %.200s, want the search page", pageURL, body)
	}

	// The answers exactly, beyond what a printed command shows.
	base := "http://" + listen + "/v1alpha1/search?"
	if got := clustersOf(t, base+"resources=deployments.apps&names=web&namespaces=shop"); !slices.Equal(got, []string{"member1", "member2", "member3"}) {
		t.Errorf("Deployment shop/web found in %v, want once per member", got)
	}
	if got := clustersOf(t, base+"resources=databases"); !slices.Equal(got, []string{"member3", "member3"}) {
		t.Errorf("Databases found in %v, want the two of member3", got)
	}
	if got := clustersOf(t, base+"resources=pods&fieldSelector=status.phase%3DPending&namespaces=shop"); !slices.Equal(got, []string{"member2"}) {
		t.Errorf("Pending pods in shop found in %v, want the one of member2", got)
	}

	// Ctrl-C: SIGINT to the whole foreground process group, as a terminal sends it.
	stopped = true
	if err := syscall.Kill(-pgid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Errorf("make run: %v", err)
		}
	case <-time.After(2 * time.Minute):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		t.Fatal("make run did not exit within 2 minutes of SIGINT")
	}
	if err := syscall.Kill(-pgid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the demo's process group %d still has processes (kill -0: %v)", pgid, err)
	}
	for _, p := range started {
		if p.alive() {
			t.Errorf("still running after Ctrl-C: %s", p)
		}
	}
	if left := demoProcesses(t, state); len(left) > 0 {
		t.Errorf("processes naming %s still run: %v", state, left)
	}
	if _, err := os.Stat(state); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state folder %s left behind (%v)", state, err)
	}
}

// keepCoresBusy starts a spinning process per core, as another job of the machine would, and
// returns what stops them (once; again is a no-op).
func keepCoresBusy(t *testing.T) func() {
	var procs []*exec.Cmd
	for range runtime.NumCPU() {
		c := exec.Command("bash", "-c", "while :; do :; done")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, c)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			for _, c := range procs {
				_ = c.Process.Kill()
				_ = c.Wait()
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// demoProc is a process identified by PID and kernel start time, so a reused PID is not mistaken.
type demoProc struct {
	pid     int
	started string
	cmdline string
}

func (p demoProc) String() string { return fmt.Sprintf("%d (%s)", p.pid, p.cmdline) }

func (p demoProc) alive() bool {
	s, ok := procStart(p.pid)
	return ok && s == p.started
}

// demoProcesses lists the running processes whose command line names the demo's state folder: every
// member service (data dirs, kubeconfigs and certificates live there) and kubesearch (--data-dir).
func demoProcesses(t *testing.T, state string) []demoProc {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []demoProc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(raw, []byte(state)) {
			continue
		}
		started, ok := procStart(pid)
		if !ok {
			continue
		}
		cmdline := strings.ReplaceAll(strings.TrimRight(string(raw), "\x00"), "\x00", " ")
		out = append(out, demoProc{pid: pid, started: started, cmdline: clipString(cmdline, 120)})
	}
	return out
}

// procStart is field 22 of /proc/PID/stat, the process's start time since boot.
func procStart(pid int) (string, bool) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", false
	}
	s := string(raw)
	i := strings.LastIndex(s, ") ")
	if i < 0 {
		return "", false
	}
	fields := strings.Fields(s[i+2:])
	if len(fields) < 20 {
		return "", false
	}
	return fields[19], true
}

// runShell runs script with bash and returns its stdout; stderr (kubectl's freshness warnings, say)
// is only part of the error.
func runShell(ctx context.Context, script string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		err = fmt.Errorf("%w: %s", err, stderr.String())
	}
	return string(out), err
}

// clustersOf is the sorted clusters of a search's items, one entry per item.
func clustersOf(t *testing.T, url string) []string {
	t.Helper()
	var got []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		got = nil
		resp, err := http.Get(url)
		if err == nil {
			var body struct {
				Items []struct {
					Metadata struct {
						Annotations map[string]string `json:"annotations"`
					} `json:"metadata"`
				} `json:"items"`
			}
			err = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("%s", resp.Status)
			}
			for _, it := range body.Items {
				got = append(got, it.Metadata.Annotations["resource.karmada.io/cached-from-cluster"])
			}
		}
		if err == nil && len(got) > 0 || time.Now().After(deadline) {
			if err != nil {
				t.Errorf("GET %s: %v", url, err)
			}
			break
		}
		time.Sleep(time.Second)
	}
	slices.Sort(got)
	return got
}

// testbedBinDir is the test bed's version-keyed binary folder (kubectl is there), as lib.sh names it.
func testbedBinDir(t *testing.T, root string) string {
	t.Helper()
	out, err := exec.Command("bash", "-c", `source "$1/tests/testbed/lib.sh" && echo "$BIN_DIR"`, "-", root).Output()
	if err != nil {
		t.Fatalf("read BIN_DIR from lib.sh: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func withoutEnv(env []string, keys ...string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(keys, k)
	})
}

func containsAll(s string, subs []string) bool {
	return !slices.ContainsFunc(subs, func(sub string) bool { return !strings.Contains(s, sub) })
}

func containsNone(s string, subs []string) bool {
	return !slices.ContainsFunc(subs, func(sub string) bool { return strings.Contains(s, sub) })
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func clipString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
