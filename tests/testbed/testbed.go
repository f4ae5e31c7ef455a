// Package testbed connects integration tests to the project's test bed: member clusters (etcd,
// kube-apiserver, controller-manager, scheduler, kwok), an Apache Kafka broker and an OpenSearch node,
// started on loopback by up.sh. It reuses a running test bed named by .testbed/env (or by the
// environment variables that file exports), starts one for the test run when there is none, and gives
// fault tests control over single services (stop, kill -9, SIGSTOP/SIGCONT, restart) and etcd compaction.
//
// It leaves out what the services are and how they are built: that is up.sh and build.sh.
package testbed

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Env describes a running test bed.
type Env struct {
	// Dir is the state folder of a test bed this project started; empty for external services, which
	// the fault helpers cannot control.
	Dir          string
	Kubeconfig   string   // one context per member, named like the member
	Clusters     []string // member1 .. memberN
	KafkaBrokers []string
	// KafkaSecure is the broker's SASL_SSL listener (TLS with a certificate of KafkaCAFile; SASL
	// PLAIN with the user of the two files, SCRAM-SHA-256 and -512 with users a test creates);
	// empty for external services without one.
	KafkaSecure                                    []string
	KafkaCAFile                                    string
	KafkaPlainUsernameFile, KafkaPlainPasswordFile string
	OpenSearchURL                                  string
	// OpenSearchURLs are every node of the OpenSearch cluster (OpenSearchURL is the first); HA
	// says the test bed runs three brokers (services kafka-1..3) and three OpenSearch nodes
	// (opensearch-1..3) instead of one of each (kafka, opensearch): KUBESEARCH_TESTBED_HA=1.
	OpenSearchURLs []string
	HA             bool
	// Cuts are the partition proxies of the HA test bed (tests/testbed/cutproxy): by the service
	// behind one (kafka-3, opensearch-3), the URL of its control API. See Cut and Heal.
	Cuts    map[string]string
	Kubectl string
	Logs    string
	etcd    map[string]string // member → etcd client URL
	root    string
	// karmadaKubeconfig and karmadaFrontProxyCA are the Karmada control plane's (karmada.sh),
	// empty until it runs: see Karmada.
	karmadaKubeconfig, karmadaFrontProxyCA string
}

// Root is the repository's top folder.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

func stateDir(root string) string {
	if d := os.Getenv("KUBESEARCH_TESTBED_DIR"); d != "" {
		return d
	}
	return filepath.Join(root, ".testbed")
}

// Load reads the test bed from the process environment when KUBESEARCH_TESTBED_KUBECONFIG,
// KAFKA_BROKERS and OPENSEARCH_URL are all set (services you run yourself, e.g. with Docker), else from
// the env file up.sh wrote. It does not check that the services answer.
func Load() (*Env, error) {
	root := Root()
	vars := map[string]string{}
	for _, k := range []string{"KUBESEARCH_TESTBED_KUBECONFIG", "KAFKA_BROKERS", "OPENSEARCH_URL"} {
		if v := os.Getenv(k); v != "" {
			vars[k] = v
		}
	}
	if len(vars) < 3 {
		file := filepath.Join(stateDir(root), "env")
		f, err := os.Open(file)
		if err != nil {
			return nil, fmt.Errorf("testbed: no running test bed (%w); start one with `make testbed-up`", err)
		}
		defer f.Close()
		vars, err = parseEnvFile(f)
		if err != nil {
			return nil, fmt.Errorf("testbed: read %s: %w", file, err)
		}
	} else {
		for _, kv := range os.Environ() {
			if k, v, ok := strings.Cut(kv, "="); ok {
				vars[k] = v
			}
		}
	}
	e := &Env{
		Dir:                    vars["KUBESEARCH_TESTBED_DIR"],
		Kubeconfig:             vars["KUBESEARCH_TESTBED_KUBECONFIG"],
		Clusters:               strings.Fields(vars["KUBESEARCH_TESTBED_CLUSTERS"]),
		KafkaBrokers:           strings.Split(vars["KAFKA_BROKERS"], ","),
		KafkaCAFile:            vars["KUBESEARCH_TESTBED_KAFKA_CA"],
		KafkaPlainUsernameFile: vars["KUBESEARCH_TESTBED_KAFKA_PLAIN_USERNAME_FILE"],
		KafkaPlainPasswordFile: vars["KUBESEARCH_TESTBED_KAFKA_PLAIN_PASSWORD_FILE"],
		OpenSearchURL:          strings.TrimRight(vars["OPENSEARCH_URL"], "/"),
		Kubectl:                vars["KUBECTL"],
		Logs:                   vars["KUBESEARCH_TESTBED_LOGS"],
		etcd:                   map[string]string{},
		root:                   root,
		karmadaKubeconfig:      vars["KUBESEARCH_TESTBED_KARMADA_KUBECONFIG"],
		karmadaFrontProxyCA:    vars["KUBESEARCH_TESTBED_KARMADA_FRONT_PROXY_CA"],
	}
	e.OpenSearchURLs = []string{e.OpenSearchURL}
	if v := vars["KUBESEARCH_TESTBED_OPENSEARCH_URLS"]; v != "" {
		e.OpenSearchURLs = strings.Split(v, ",")
	}
	e.HA = vars["KUBESEARCH_TESTBED_HA"] == "1"
	e.Cuts = map[string]string{}
	for k, v := range vars {
		// KUBESEARCH_TESTBED_CUT_KAFKA_3 is the proxy in front of kafka-3.
		if svc, ok := strings.CutPrefix(k, "KUBESEARCH_TESTBED_CUT_"); ok {
			e.Cuts[strings.ReplaceAll(strings.ToLower(svc), "_", "-")] = v
		}
	}
	if v := vars["KUBESEARCH_TESTBED_KAFKA_SASL_SSL"]; v != "" {
		e.KafkaSecure = strings.Split(v, ",")
	}
	if e.Kubectl == "" {
		e.Kubectl = "kubectl"
	}
	if len(e.Clusters) == 0 {
		cfg, err := clientcmd.LoadFromFile(e.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("testbed: read kubeconfig %s: %w", e.Kubeconfig, err)
		}
		for name := range cfg.Contexts {
			e.Clusters = append(e.Clusters, name)
		}
	}
	for k, v := range vars {
		if c, ok := strings.CutPrefix(k, "KUBESEARCH_TESTBED_ETCD_"); ok {
			e.etcd[c] = v
		}
	}
	return e, nil
}

// parseEnvFile reads the `export K=V` lines up.sh writes (values optionally double-quoted).
func parseEnvFile(r io.Reader) (map[string]string, error) {
	vars := map[string]string{}
	s := bufio.NewScanner(r)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if !ok {
			return nil, fmt.Errorf("not K=V: %q", line)
		}
		vars[k] = strings.Trim(v, `"`)
	}
	return vars, s.Err()
}

// Main runs a test package against the test bed: it reuses a running one, or starts one (up.sh) and
// stops it (down.sh) when the tests are done. Use it from TestMain: os.Exit(testbed.Main(m)).
func Main(m *testing.M) int {
	started := false
	if e, err := Load(); err != nil || !pingPatiently(e) {
		fmt.Fprintln(os.Stderr, "testbed: none running, starting one with tests/testbed/up.sh")
		cmd := exec.Command("bash", filepath.Join(Root(), "tests/testbed/up.sh"))
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "testbed: up.sh: %v\n", err)
			return 1
		}
		started = true
	}
	code := m.Run()
	if started && os.Getenv("KUBESEARCH_TESTBED_KEEP") == "" {
		cmd := exec.Command("bash", filepath.Join(Root(), "tests/testbed/down.sh"))
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "testbed: down.sh: %v\n", err)
		}
	}
	return code
}

// pingPatiently says whether a recorded test bed answers, waiting out a service another test run is
// restarting (a member kube-apiserver, Kafka): up.sh starts over from down.sh, which would stop the
// test bed under that other run.
func pingPatiently(e *Env) bool {
	deadline := time.Now().Add(90 * time.Second)
	for {
		err := e.Ping(context.Background())
		if err == nil {
			return true
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "testbed: the recorded test bed does not answer: %v\n", err)
			return false
		}
		time.Sleep(2 * time.Second)
	}
}

// Get returns the running test bed and, if the test fails, prints the tail of every service's log.
func Get(t testing.TB) *Env {
	t.Helper()
	e, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Ping(t.Context()); err != nil {
		t.Fatalf("testbed: not healthy: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			e.dumpLogs(t)
		}
	})
	return e
}

// Ping checks that every service answers.
func (e *Env) Ping(ctx context.Context) error {
	var errs []error
	for _, c := range e.Clusters {
		if err := e.apiserverReady(ctx, c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := kafkaReady(ctx, e.KafkaBrokers[0]); err != nil {
		errs = append(errs, err)
	}
	if err := openSearchReady(ctx, e.OpenSearchURL); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// RESTConfig is the admin client configuration of one member.
func (e *Env) RESTConfig(t testing.TB, cluster string) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: e.Kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: cluster}).ClientConfig()
	if err != nil {
		t.Fatalf("testbed: client config of %s: %v", cluster, err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	return cfg
}

// KubectlRun runs kubectl against one member and returns its standard output.
func (e *Env) KubectlRun(t testing.TB, cluster string, stdin []byte, args ...string) []byte {
	t.Helper()
	out, err := e.KubectlOutput(t.Context(), cluster, stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// KubectlOutput runs kubectl against one member and returns its stdout, or an error carrying its stderr.
func (e *Env) KubectlOutput(ctx context.Context, cluster string, stdin []byte, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, e.Kubectl, append([]string{"--kubeconfig", e.Kubeconfig, "--context", cluster}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(stdin), &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("kubectl --context %s %s: %w\n%s", cluster, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// Service names: "<member>-etcd", "<member>-apiserver", "<member>-controller-manager",
// "<member>-scheduler", "<member>-kwok", "kafka", "opensearch".

// Stop stops a service gracefully (SIGTERM, a bounded wait, then SIGKILL).
func (e *Env) Stop(t testing.TB, service string) { e.svc(t, "stop", service) }

// Kill sends SIGKILL to a service.
func (e *Env) Kill(t testing.TB, service string) { e.svc(t, "kill", service) }

// Pause sends SIGSTOP to a service.
func (e *Env) Pause(t testing.TB, service string) { e.svc(t, "pause", service) }

// Resume sends SIGCONT to a paused service.
func (e *Env) Resume(t testing.TB, service string) { e.svc(t, "resume", service) }

// Cut partitions a service from everything else while it runs: its partition proxy stops carrying
// the connections to it (and, for a broker, from it to the other controllers). mode is "blackhole"
// (existing connections carry nothing, new ones are accepted and go nowhere, as behind a network
// that drops packets) or "reset" (every connection closed, new ones refused).
func (e *Env) Cut(t testing.TB, service, mode string) { e.cut(t, service, "cut?mode="+mode) }

// Heal ends a Cut: held connections carry their bytes again and new ones reach the service.
func (e *Env) Heal(t testing.TB, service string) { e.cut(t, service, "heal") }

func (e *Env) cut(t testing.TB, service, action string) {
	t.Helper()
	u, ok := e.Cuts[service]
	if !ok {
		t.Fatalf("testbed: no partition proxy in front of %s (the HA test bed has one for %v)", service, slices.Sorted(maps.Keys(e.Cuts)))
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u+"/"+action, nil)
	if err != nil {
		t.Fatalf("testbed: %s %s: %v", action, service, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("testbed: %s %s: %v", action, service, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("testbed: %s %s: %s: %s", action, service, resp.Status, body)
	}
}

// Start starts a stopped or killed service with its original command and waits until it is ready.
func (e *Env) Start(t testing.TB, service string) {
	t.Helper()
	e.svc(t, "start", service)
	// Not t.Context() alone: it is done already when a cleanup restarts what a test stopped.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 3*time.Minute)
	defer cancel()
	if err := e.waitReady(ctx, service); err != nil {
		t.Fatalf("testbed: %s not ready after restart: %v", service, err)
	}
}

// Restart stops a service gracefully and starts it again.
func (e *Env) Restart(t testing.TB, service string) {
	t.Helper()
	e.Stop(t, service)
	e.Start(t, service)
}

func (e *Env) svc(t testing.TB, action, service string) {
	t.Helper()
	if e.Dir == "" {
		t.Fatalf("testbed: cannot %s %s: the services are not the project's own test bed", action, service)
	}
	cmd := exec.Command("bash", filepath.Join(e.root, "tests/testbed/svc.sh"), action, service)
	cmd.Env = append(os.Environ(), "KUBESEARCH_TESTBED_DIR="+e.Dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testbed: svc.sh %s %s: %v\n%s", action, service, err, out)
	}
}

func (e *Env) waitReady(ctx context.Context, service string) error {
	var check func(context.Context) error
	switch {
	case service == "kafka":
		check = func(ctx context.Context) error { return kafkaReady(ctx, e.KafkaBrokers[0]) }
	case strings.HasPrefix(service, "kafka-"):
		n, err := strconv.Atoi(strings.TrimPrefix(service, "kafka-"))
		if err != nil || n < 1 || n > len(e.KafkaBrokers) {
			return fmt.Errorf("no broker %s", service)
		}
		check = func(ctx context.Context) error { return kafkaReady(ctx, e.KafkaBrokers[n-1]) }
	case service == "opensearch":
		check = func(ctx context.Context) error { return openSearchReady(ctx, e.OpenSearchURL) }
	case strings.HasPrefix(service, "opensearch-"):
		n, err := strconv.Atoi(strings.TrimPrefix(service, "opensearch-"))
		if err != nil || n < 1 || n > len(e.OpenSearchURLs) {
			return fmt.Errorf("no OpenSearch node %s", service)
		}
		check = func(ctx context.Context) error { return openSearchReady(ctx, e.OpenSearchURLs[n-1]) }
	case strings.HasSuffix(service, "-apiserver"):
		member := strings.TrimSuffix(service, "-apiserver")
		check = func(ctx context.Context) error { return e.apiserverReady(ctx, member) }
	case strings.HasSuffix(service, "-etcd"):
		member := strings.TrimSuffix(service, "-etcd")
		check = func(ctx context.Context) error {
			_, err := e.etcdPost(ctx, member, "/health", nil)
			return err
		}
	default: // controllers and kwok have no dependency-free readiness signal; they retry on their own
		return nil
	}
	var err error
	for {
		if err = check(ctx); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (e *Env) apiserverReady(ctx context.Context, cluster string) error {
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: e.Kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: cluster}).ClientConfig()
	if err != nil {
		return fmt.Errorf("%s: %w", cluster, err)
	}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", cluster, err)
	}
	return httpOK(ctx, client, strings.TrimRight(cfg.Host, "/")+"/readyz")
}

func openSearchReady(ctx context.Context, url string) error {
	return httpOK(ctx, http.DefaultClient, url+"/_cluster/health?wait_for_status=yellow&timeout=1s")
}

// kafkaReady dials the broker; the Kafka client tests then prove the protocol works.
func kafkaReady(ctx context.Context, broker string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", broker)
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	return c.Close()
}

func httpOK(ctx context.Context, client *http.Client, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return nil
}

// CompactEtcd compacts a member's etcd at its current revision, so every older resourceVersion is
// gone: a watch resuming from one gets "too old resource version" and must re-list.
func (e *Env) CompactEtcd(t testing.TB, cluster string) int64 {
	t.Helper()
	// etcd's gRPC gateway speaks JSON over HTTP; keys are base64. Any key works: the response header
	// carries the store's current revision.
	out, err := e.etcdPost(t.Context(), cluster, "/v3/kv/range", map[string]any{"key": base64.StdEncoding.EncodeToString([]byte("/"))})
	if err != nil {
		t.Fatalf("testbed: etcd revision of %s: %v", cluster, err)
	}
	var r struct {
		Header struct {
			Revision int64 `json:"revision,string"`
		} `json:"header"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("testbed: etcd revision of %s: %v: %s", cluster, err, out)
	}
	if _, err := e.etcdPost(t.Context(), cluster, "/v3/kv/compaction", map[string]any{"revision": r.Header.Revision, "physical": true}); err != nil {
		t.Fatalf("testbed: compact etcd of %s: %v", cluster, err)
	}
	return r.Header.Revision
}

// BackupEtcd takes a cold backup of a member's etcd: it stops etcd (the member's kube-apiserver
// retries meanwhile), copies its data folder, and starts it again. It returns the backup's folder.
func (e *Env) BackupEtcd(t testing.TB, cluster string) string {
	t.Helper()
	data := e.etcdData(t, cluster)
	backup := filepath.Join(t.TempDir(), "etcd-backup")
	e.Stop(t, cluster+"-etcd")
	err := exec.Command("cp", "-a", data, backup).Run()
	e.Start(t, cluster+"-etcd")
	if err != nil {
		t.Fatalf("testbed: back up %s: %v", data, err)
	}
	return backup
}

// RestoreEtcd restores a member's etcd from a backup as an operator does: every control plane
// component of the member stopped, the data folder replaced, everything started again. Without
// etcdutl's --bump-revision, the member's resourceVersions go back to the backup's.
func (e *Env) RestoreEtcd(t testing.TB, cluster, backup string) {
	t.Helper()
	data := e.etcdData(t, cluster)
	components := []string{"kwok", "scheduler", "controller-manager", "apiserver", "etcd"}
	for _, c := range components {
		e.Stop(t, cluster+"-"+c)
	}
	if err := os.RemoveAll(data); err != nil {
		t.Fatalf("testbed: remove %s: %v", data, err)
	}
	if out, err := exec.Command("cp", "-a", backup, data).CombinedOutput(); err != nil {
		t.Fatalf("testbed: restore %s: %v: %s", data, err, out)
	}
	for _, c := range slices.Backward(components) {
		e.Start(t, cluster+"-"+c)
	}
}

func (e *Env) etcdData(t testing.TB, cluster string) string {
	t.Helper()
	if e.Dir == "" {
		t.Fatalf("testbed: cannot reach %s's etcd data: the services are not the project's own test bed", cluster)
	}
	return filepath.Join(e.Dir, cluster, "etcd")
}

func (e *Env) etcdPost(ctx context.Context, cluster, path string, body any) ([]byte, error) {
	base, ok := e.etcd[cluster]
	if !ok {
		return nil, fmt.Errorf("no etcd known for %s", cluster)
	}
	method, rd := http.MethodGet, io.Reader(nil)
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		method, rd = http.MethodPost, bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, out)
	}
	return out, nil
}

// dumpLogs prints the last lines of every service's log, so a failure in CI can be diagnosed.
func (e *Env) dumpLogs(t testing.TB) {
	if e.Logs == "" {
		return
	}
	files, _ := filepath.Glob(filepath.Join(e.Logs, "*.log"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 25 {
			lines = lines[len(lines)-25:]
		}
		t.Logf("---- tail of %s ----\n%s", f, strings.Join(lines, "\n"))
	}
}
