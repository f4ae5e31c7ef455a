package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kubesearch/kubesearch/internal/serving"
)

// environ is a test's environment.
func environ(vars map[string]string) lookupEnv {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

// oldFlag is a flag the standard library's flag package took before cobra: name, a value to
// pass ("" for a boolean given alone) and the value it must read back as ("" for value, or true).
type oldFlag struct{ name, value, want string }

// kafkaSecurity are the Kafka TLS and SASL flags of every component.
var kafkaSecurity = []oldFlag{
	{"kafka-tls", "", ""}, {"kafka-ca-file", "ca.pem", ""}, {"kafka-insecure-skip-verify", "", ""},
	{"kafka-sasl-mechanism", "scram-sha-512", ""}, {"kafka-username-file", "user", ""}, {"kafka-password-file", "pass", ""},
}

// security are the query API's and the standalone mode's authentication, TLS and limit flags.
var security = []oldFlag{
	{"token-auth-file", "tokens.csv", ""}, {"client-ca-file", "clients.pem", ""}, {"authentication-kubeconfig", "auth.kubeconfig", ""},
	{"authorization-policy-file", "policy.yaml", ""}, {"rate-limit", "10.5", ""}, {"rate-burst", "20", ""},
	{"max-watches-per-subject", "30", ""}, {"tls-cert-file", "tls.crt", ""}, {"tls-private-key-file", "tls.key", ""},
}

// logging are the flags every subcommand took.
var logging = []oldFlag{{"log-level", "debug", "DEBUG"}, {"log-json", "", ""}}

func join(lists ...[]oldFlag) []oldFlag { return slices.Concat(lists...) }

// TestOldFlagsAccepted checks that every flag of the stdlib-flag command line still parses, with
// its value, on the command that had it.
func TestOldFlagsAccepted(t *testing.T) {
	commands := map[string][]oldFlag{
		"collector": join([]oldFlag{
			{"registry", "registry.yaml", ""}, {"clusters", "clusters.yaml", ""}, {"kubeconfig", "members.kubeconfig", ""},
			{"kafka-brokers", "a:9092,b:9092", ""}, {"topic", "events", ""}, {"topic-partitions", "3", ""},
			{"kafka-max-message-bytes", "1000000", ""}, {"publish-buffer", "10", ""}, {"publish-batch", "5", ""},
			{"page-size", "50", ""}, {"qps", "2.5", ""}, {"burst", "7", ""}, {"listen", "127.0.0.1:9001", ""},
			{"reload-interval", "5s", ""}, {"discovery-interval", "2m0s", ""}, {"shutdown-timeout", "3s", ""},
			{"name", "collector-a", ""},
		}, kafkaSecurity, logging),
		"indexer": join([]oldFlag{
			{"kafka-brokers", "a:9092", ""}, {"topic", "events", ""}, {"group", "ix", ""}, {"dlq-topic", "dead", ""},
			{"kafka-fetch-max-bytes", "9000000", ""}, {"kafka-max-message-bytes", "3000000", ""},
			{"opensearch-addresses", "https://os-0:9200,https://os-1:9200", ""}, {"registry", "registry.yaml", ""},
			{"opensearch-username-file", "user", ""}, {"opensearch-password-file", "pass", ""},
			{"opensearch-secret-dir", "/secrets", ""}, {"opensearch-ca-file", "ca.pem", ""},
			{"opensearch-insecure-skip-verify", "", ""}, {"index-prefix", "team-", ""}, {"index-shards", "3", ""},
			{"index-replicas", "2", ""}, {"index-refresh-interval", "30s", ""}, {"batch-size", "100", ""},
			{"batch-bytes", "1000", ""}, {"batch-interval", "1s", ""}, {"watermark-interval", "2s", ""},
			{"request-timeout", "1m0s", ""}, {"listen", ":8082", ""}, {"shutdown-timeout", "5s", ""},
		}, kafkaSecurity, logging),
		"queryapi": join([]oldFlag{
			{"listen", ":8080", ""}, {"opensearch-addresses", "http://os:9200", ""}, {"opensearch-username-file", "user", ""},
			{"opensearch-password-file", "pass", ""}, {"opensearch-secret-dir", "/secrets", ""}, {"opensearch-ca-file", "ca.pem", ""},
			{"opensearch-insecure-skip-verify", "", ""}, {"index-prefix", "team-", ""}, {"kafka-brokers", "a:9092", ""},
			{"topic", "events", ""}, {"indexer-group", "ix", ""}, {"watch-window", "256Mi", ""},
			{"collector-status-urls", "http://c-0/status,http://c-1/status", ""}, {"anonymous", "", ""},
			{"continue-key-file", "key", ""}, {"page-keep-alive", "1m0s", ""}, {"poll-interval", "1s", ""},
			{"stale-after", "1m0s", ""}, {"resource-version-wait", "2s", ""}, {"request-timeout", "5s", ""},
			{"shutdown-timeout", "1s", ""},
		}, kafkaSecurity, security, logging),
		"standalone": join([]oldFlag{
			{"kubeconfig", "members.kubeconfig", ""}, {"clusters", "clusters.yaml", ""}, {"registry", "registry.yaml", ""},
			{"data-dir", "/var/lib/kubesearch", ""}, {"listen", "127.0.0.1:9080", ""}, {"anonymous", "=false", "false"},
			{"page-size", "10", ""}, {"qps", "5", ""}, {"burst", "9", ""}, {"watch-window", "5000", ""},
		}, security, logging),
		"kubeconfig": join([]oldFlag{
			{"server", "https://kubesearch:8443", ""}, {"certificate-authority", "ca.pem", ""},
			{"insecure-skip-tls-verify", "", ""}, {"token-file", "token", ""}, {"client-certificate", "client.crt", ""},
			{"client-key", "client.key", ""},
		}, logging),
		"version": logging,
	}
	for command, flags := range commands {
		t.Run(command, func(t *testing.T) {
			args := []string{command}
			for _, f := range flags {
				switch {
				case f.value == "" || strings.HasPrefix(f.value, "="):
					args = append(args, "--"+f.name+f.value)
				default:
					args = append(args, "--"+f.name, f.value)
				}
			}
			var stderr bytes.Buffer
			root := newRootCommand(io.Discard, &stderr, environ(nil))
			sub, _, err := root.Find([]string{command})
			if err != nil {
				t.Fatal(err)
			}
			ran := false
			sub.RunE = func(*cobra.Command, []string) error { ran = true; return nil }
			root.SetArgs(args)
			if err := root.Execute(); err != nil || !ran {
				t.Fatalf("kubesearch %s: %v (ran: %v)", strings.Join(args, " "), err, ran)
			}
			for _, f := range flags {
				got := sub.Flags().Lookup(f.name)
				if got == nil {
					t.Errorf("--%s: gone", f.name)
					continue
				}
				want := f.want
				switch {
				case want != "":
				case f.value == "":
					want = "true"
				default:
					want = f.value
				}
				if !got.Changed || got.Value.String() != want {
					t.Errorf("--%s: %q (changed %v), want %q", f.name, got.Value.String(), got.Changed, want)
				}
			}
		})
	}
}

// parsed runs a subcommand's flag handling (command line, environment, config file) without
// running it, and returns the Options its flags set.
func parsed[O any](t *testing.T, setup func(flagGroups) func() O, env map[string]string, args ...string) (O, error) {
	t.Helper()
	cmd := &cobra.Command{Use: "test", SilenceErrors: true, SilenceUsage: true}
	var options func() O
	subcommand(cmd, environ(env), func(g flagGroups) runFunc {
		options = setup(g)
		return nil
	})
	cmd.RunE = func(*cobra.Command, []string) error { return nil }
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	err := cmd.Execute()
	return options(), err
}

func TestOptionsFromFlags(t *testing.T) {
	t.Run("collector defaults", func(t *testing.T) {
		o, err := parsed(t, collectorFlags, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(o.Brokers, []string{"127.0.0.1:9092"}) || o.ListenAddr != "127.0.0.1:8081" || o.QPS != 50 || o.Topic != "kubesearch.events" {
			t.Errorf("brokers %q listen %q qps %v topic %q", o.Brokers, o.ListenAddr, o.QPS, o.Topic)
		}
	})
	t.Run("collector lists and numbers", func(t *testing.T) {
		o, err := parsed(t, collectorFlags, nil, "--kafka-brokers", "a:9092, b:9092,", "--qps", "2.5", "--kafka-brokers", "c:9092,d:9092")
		if err != nil {
			t.Fatal(err)
		}
		// A list flag given twice: the last wins, as with the standard library's flag package.
		if !slices.Equal(o.Brokers, []string{"c:9092", "d:9092"}) || o.QPS != 2.5 {
			t.Errorf("brokers %q qps %v", o.Brokers, o.QPS)
		}
	})
	t.Run("indexer dead-letter topic follows the topic", func(t *testing.T) {
		o, err := parsed(t, indexerFlags, nil, "--opensearch-addresses", "http://a:9200,http://b:9200")
		if err != nil {
			t.Fatal(err)
		}
		if o.DeadLetterTopic != "" || o.Index.Shards != 1 || !slices.Equal(o.OpenSearchAddresses, []string{"http://a:9200", "http://b:9200"}) {
			t.Errorf("dlq %q shards %d addresses %q", o.DeadLetterTopic, o.Index.Shards, o.OpenSearchAddresses)
		}
	})
	t.Run("the change feed follows the topic", func(t *testing.T) {
		for _, tt := range []struct {
			args []string
			want string
		}{
			{[]string{"--topic", "team.events"}, "team.events.changes"},
			{nil, "kubesearch.events.changes"},
			{[]string{"--topic", "team.events", "--changes-topic", "none"}, "none"},
			{[]string{"--changes-topic", "feed"}, "feed"},
		} {
			ix, err := parsed(t, indexerFlags, nil, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			ix.SetDefaults()
			if ix.ChangesTopic != tt.want {
				t.Errorf("%q: indexer %q, want %q", tt.args, ix.ChangesTopic, tt.want)
			}
		}
		// The query API follows the feed of its --topic by default, parsed before the default.
		for _, tt := range []struct {
			args []string
			want string
		}{
			{[]string{"--topic", "team.events"}, "team.events.changes"},
			{[]string{"--changes-topic", "team.events.changes"}, "team.events.changes"},
			{[]string{"--changes-topic", "none"}, "none"},
		} {
			q, err := parsed(t, queryAPIFlags, nil, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			q.SetDefaults()
			q.SetDefaults() // twice, as the standalone mode and queryapi.New do
			if q.ChangesTopic != tt.want {
				t.Errorf("%q: query API %q, want %q", tt.args, q.ChangesTopic, tt.want)
			}
		}
	})
	t.Run("operational endpoints authenticate with the query API's flags", func(t *testing.T) {
		args := []string{"--token-auth-file", "tokens.csv", "--client-ca-file", "ca.pem", "--authentication-kubeconfig", "hub.kubeconfig",
			"--tls-cert-file", "tls.crt", "--tls-private-key-file", "tls.key"}
		c, err := parsed(t, collectorFlags, nil, args...)
		if err != nil {
			t.Fatal(err)
		}
		ix, err := parsed(t, indexerFlags, nil, args...)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range []serving.Options{c.Endpoints, ix.Endpoints} {
			a := e.Authentication
			if a.TokenAuthFile != "tokens.csv" || a.ClientCAFile != "ca.pem" || a.AuthenticationKubeconfig != "hub.kubeconfig" ||
				e.TLSCertFile != "tls.crt" || e.TLSKeyFile != "tls.key" || a.Anonymous {
				t.Errorf("endpoints %+v", e)
			}
		}
		q, err := parsed(t, queryAPIFlags, nil, "--collector-status-token-file", "status.token", "--collector-status-ca-file", "collectors.pem")
		if err != nil {
			t.Fatal(err)
		}
		if q.CollectorStatusTokenFile != "status.token" || q.CollectorStatusCAFile != "collectors.pem" {
			t.Errorf("collector status token file %q, CA file %q", q.CollectorStatusTokenFile, q.CollectorStatusCAFile)
		}
	})
	t.Run("simulate", func(t *testing.T) {
		o, err := parsed(t, simulateFlags, nil)
		if err != nil {
			t.Fatal(err)
		}
		if o.Clusters != 10 || o.Objects != 1000 || o.Seed != 1 || o.ClusterPrefix != "sim-" || o.Kinds != nil || o.ListenAddr != "" || o.Writers != 8 {
			t.Errorf("defaults %+v", o)
		}
		o, err = parsed(t, simulateFlags, map[string]string{"KUBESEARCH_SEED": "9"}, "--clusters", "0", "--kinds", "pods,events",
			"--churn-rate", "2.5", "--churn-duration", "1m", "--objects", "0")
		if err != nil {
			t.Fatal(err)
		}
		if o.Clusters != 0 || o.Objects != 0 || o.Seed != 9 || !slices.Equal(o.Kinds, []string{"pods", "events"}) || o.ChurnRate != 2.5 || o.ChurnDuration != time.Minute {
			t.Errorf("%+v", o)
		}
		// Zero objects of clusters is refused by name, not taken for the default.
		o.Clusters = 3
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--objects: must be at least 1, got 0") {
			t.Errorf("--objects 0: %v", err)
		}
	})
	t.Run("queryapi watch window", func(t *testing.T) {
		o, err := parsed(t, queryAPIFlags, nil, "--watch-window", "1000")
		if err != nil {
			t.Fatal(err)
		}
		if o.WatchWindowEvents != 1000 || o.WatchWindowBytes != 512<<20 || o.Authentication.Anonymous {
			t.Errorf("window %d events %d bytes, anonymous %v", o.WatchWindowEvents, o.WatchWindowBytes, o.Authentication.Anonymous)
		}
		if _, err := parsed(t, queryAPIFlags, nil, "--watch-window", "0"); err == nil {
			t.Error("--watch-window 0: no error")
		}
	})
	t.Run("ResourceRegistry objects of a Karmada control plane", func(t *testing.T) {
		q, err := parsed(t, queryAPIFlags, nil, "--karmada-kubeconfig", "karmada.kubeconfig")
		if err != nil || q.KarmadaKubeconfig != "karmada.kubeconfig" {
			t.Errorf("queryapi --karmada-kubeconfig: %q, %v", q.KarmadaKubeconfig, err)
		}
		o, err := parsed(t, standaloneFlags, map[string]string{"KUBESEARCH_KARMADA_REGISTRIES": "true"}, "--karmada-kubeconfig", "karmada.kubeconfig")
		if err != nil || !o.KarmadaRegistries || o.KarmadaKubeconfig != "karmada.kubeconfig" {
			t.Errorf("standalone KUBESEARCH_KARMADA_REGISTRIES: %v %q, %v", o.KarmadaRegistries, o.KarmadaKubeconfig, err)
		}
	})
}

// TestStandaloneAnonymous checks the standalone mode's rule: anonymous on loopback by default, off
// on a wider address unless --anonymous is given, wherever it is given.
func TestStandaloneAnonymous(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(config, []byte("anonymous: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want bool
	}{
		{"loopback default", nil, nil, true},
		{"localhost", nil, []string{"--listen", "localhost:8080"}, true},
		{"wide", nil, []string{"--listen", "0.0.0.0:8080"}, false},
		{"wide with --anonymous", nil, []string{"--listen", ":8080", "--anonymous"}, true},
		{"wide with KUBESEARCH_ANONYMOUS", map[string]string{"KUBESEARCH_ANONYMOUS": "true"}, []string{"--listen", ":8080"}, true},
		{"wide with the config file", nil, []string{"--listen", ":8080", "--config", config}, true},
		{"loopback with --anonymous=false", nil, []string{"--anonymous=false"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parsed(t, standaloneFlags, tc.env, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if got := o.QueryAPI.Authentication.Anonymous; got != tc.want {
				t.Errorf("anonymous %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPrecedence checks flag > environment > config file > default.
func TestPrecedence(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "collector.yaml")
	if err := os.WriteFile(config, []byte(`
listen: 127.0.0.1:7001
kafka-brokers: [file-0:9092, file-1:9092]
qps: 7
reload-interval: 1m
kafka-tls: true
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		env         map[string]string
		args        []string
		listen      string
		brokers     []string
		qps         float32
		reload      time.Duration
		tls         bool
		logLevelArg string
	}{
		{name: "defaults", listen: "127.0.0.1:8081", brokers: []string{"127.0.0.1:9092"}, qps: 50, reload: 10 * time.Second},
		{name: "file", args: []string{"--config", config},
			listen: "127.0.0.1:7001", brokers: []string{"file-0:9092", "file-1:9092"}, qps: 7, reload: time.Minute, tls: true},
		{name: "file named by KUBESEARCH_CONFIG", env: map[string]string{"KUBESEARCH_CONFIG": config},
			listen: "127.0.0.1:7001", brokers: []string{"file-0:9092", "file-1:9092"}, qps: 7, reload: time.Minute, tls: true},
		{name: "environment over file", args: []string{"--config", config},
			env:    map[string]string{"KUBESEARCH_LISTEN": "127.0.0.1:7002", "KUBESEARCH_KAFKA_BROKERS": "env:9092", "KUBESEARCH_KAFKA_TLS": "false", "KUBESEARCH_QPS": ""},
			listen: "127.0.0.1:7002", brokers: []string{"env:9092"}, qps: 7, reload: time.Minute, tls: false},
		{name: "flag over environment", args: []string{"--config", config, "--listen", "127.0.0.1:7003", "--kafka-tls=false"},
			env:    map[string]string{"KUBESEARCH_LISTEN": "127.0.0.1:7002", "KUBESEARCH_KAFKA_BROKERS": "env:9092"},
			listen: "127.0.0.1:7003", brokers: []string{"env:9092"}, qps: 7, reload: time.Minute, tls: false},
		{name: "flag over the environment's config file", args: []string{"--config", os.DevNull},
			env:    map[string]string{"KUBESEARCH_CONFIG": config},
			listen: "127.0.0.1:8081", brokers: []string{"127.0.0.1:9092"}, qps: 50, reload: 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parsed(t, collectorFlags, tc.env, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if o.ListenAddr != tc.listen || !slices.Equal(o.Brokers, tc.brokers) || o.QPS != tc.qps || o.ReloadInterval != tc.reload || o.Kafka.TLS != tc.tls {
				t.Errorf("listen %q brokers %q qps %v reload %v tls %v, want %q %q %v %v %v",
					o.ListenAddr, o.Brokers, o.QPS, o.ReloadInterval, o.Kafka.TLS, tc.listen, tc.brokers, tc.qps, tc.reload, tc.tls)
			}
		})
	}
}

// TestConfigListForStringSlices: pflag's string slices (--requestheader-*) take a YAML list in a
// config file, as the project's own list flags do.
func TestConfigListForStringSlices(t *testing.T) {
	config := filepath.Join(t.TempDir(), "queryapi.yaml")
	if err := os.WriteFile(config, []byte("requestheader-allowed-names: [front-proxy-client, aggregator]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := parsed(t, queryAPIFlags, nil, "--config", config)
	if err != nil {
		t.Fatal(err)
	}
	if got := o.Authentication.RequestHeader.AllowedNames; !slices.Equal(got, []string{"front-proxy-client", "aggregator"}) {
		t.Errorf("allowed names %q", got)
	}
}

func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name string
		file string
		env  map[string]string
		want []string
	}{
		{"unknown keys", write("unknown.yaml", "listen: :1\nkafka-broker: [a:9092]\nhelp: true\n"), nil,
			[]string{`unknown.yaml: unknown key "kafka-broker": not a flag of test`, `unknown.yaml: unknown key "help"`}},
		{"a key of another command", write("other.yaml", "opensearch-addresses: http://os:9200\n"), nil,
			[]string{`other.yaml: unknown key "opensearch-addresses"`}},
		{"a list for one value", write("list.yaml", "listen: [a, b]\n"), nil, []string{"list.yaml: listen: a list"}},
		{"a bad value", write("bad.yaml", "qps: fast\n"), nil, []string{`bad.yaml: qps: invalid argument "fast"`}},
		{"no value", write("null.yaml", "listen:\n"), nil, []string{"null.yaml: listen: no value"}},
		{"not a mapping", write("list-doc.yaml", "- listen\n"), nil, []string{"list-doc.yaml: want a mapping"}},
		{"a bad environment value", "", map[string]string{"KUBESEARCH_BURST": "many"}, []string{`KUBESEARCH_BURST: invalid argument "many" for "--burst"`}},
		{"a missing file", filepath.Join(dir, "missing.yaml"), nil, []string{"missing.yaml: no such file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var args []string
			if tc.file != "" {
				args = []string{"--config", tc.file}
			}
			_, err := parsed(t, collectorFlags, tc.env, args...)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name           string
		args           []string
		code           int
		stdout, stderr string
	}{
		{"no command prints the usage", nil, 2, "", "Components:"},
		{"help", []string{"--help"}, 0, "Components:", ""},
		{"help of a command", []string{"help", "indexer"}, 0, "OpenSearch flags:", ""},
		{"unknown command", []string{"indexr"}, 2, "", `unknown command "indexr"`},
		{"unknown flag", []string{"indexer", "--bogus"}, 2, "", "unknown flag: --bogus"},
		{"single-dash long flag", []string{"indexer", "-listen", ":1"}, 2, "", "long flags take two dashes: --listen"},
		{"bad value", []string{"collector", "--burst", "many"}, 2, "", `invalid argument "many" for "--burst"`},
		{"argument", []string{"queryapi", "search"}, 2, "", `"search": kubesearch queryapi takes flags only`},
		{"bad configuration is a usage error", []string{"version", "--config", os.DevNull + "/missing"}, 2, "", "--config"},
		{"a component's New fails", []string{"collector", "--kubeconfig", "members.kubeconfig"}, 1, "", "msg=exiting command=collector err=\"--registry: required"},
		{"JSON log", []string{"kubeconfig", "--log-json"}, 1, "", `"msg":"exiting","command":"kubeconfig","err":"--server: required"`},
		{"version", []string{"version"}, 0, "kubesearch ", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), tc.args, &stdout, &stderr, environ(nil))
			if code != tc.code || !strings.Contains(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("kubesearch %s: exit %d, want %d\nstdout (want %q):\n%s\nstderr (want %q):\n%s",
					strings.Join(tc.args, " "), code, tc.code, tc.stdout, stdout.String(), tc.stderr, stderr.String())
			}
		})
	}
}

// TestHelp checks what an operator reads in `kubesearch <command> --help`: grouped flags with
// two dashes, examples, and every flag listed once.
func TestHelp(t *testing.T) {
	for command, groups := range map[string][]string{
		"collector":  {"Members flags:", "Kafka flags:", "Kafka TLS and SASL flags:", "Tuning flags:", "Serving flags:", "General flags:"},
		"indexer":    {"Kafka flags:", "OpenSearch flags:", "Indices flags:", "Tuning flags:", "General flags:"},
		"queryapi":   {"OpenSearch flags:", "Kafka flags:", "Security flags:", "Limits flags:", "General flags:"},
		"standalone": {"Members flags:", "Security flags:", "General flags:"},
		"kubeconfig": {"Query API flags:", "Credentials flags:", "General flags:"},
		"simulate":   {"Fleet flags:", "Kafka flags:", "Kafka TLS and SASL flags:", "Tuning flags:", "Serving flags:", "Security flags:", "General flags:"},
	} {
		t.Run(command, func(t *testing.T) {
			var stdout bytes.Buffer
			if code := run(t.Context(), []string{command, "--help"}, &stdout, io.Discard, environ(nil)); code != 0 {
				t.Fatalf("exit %d", code)
			}
			help := stdout.String()
			for _, want := range append(groups, "Usage:\n  kubesearch "+command+" [flags]", "Examples:\n  ", "  -h, --help", "KUBESEARCH_") {
				if !strings.Contains(help, want) {
					t.Errorf("no %q in:\n%s", want, help)
				}
			}
			sub, _, _ := newRootCommand(io.Discard, io.Discard, environ(nil)).Find([]string{command})
			for _, name := range flagNames(sub) {
				n := 0
				for _, line := range strings.Split(help, "\n") {
					if strings.HasPrefix(line, "      --"+name+" ") || strings.HasPrefix(line, "  -h, --"+name+" ") {
						n++
					}
				}
				if n != 1 {
					t.Errorf("--%s listed %d times", name, n)
				}
			}
		})
	}
}

func flagNames(c *cobra.Command) []string {
	var names []string
	c.Flags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	return names
}

func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		t.Run(shell, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(t.Context(), []string{"completion", shell}, &stdout, &stderr, environ(nil)); code != 0 || stdout.Len() == 0 {
				t.Fatalf("exit %d, %d bytes\n%s", code, stdout.Len(), stderr.String())
			}
			if !strings.Contains(stdout.String(), "kubesearch") {
				t.Errorf("the script does not name kubesearch:\n%s", stdout.String())
			}
		})
	}
	// What the scripts ask the binary: subcommands, then a command's flags.
	var stdout bytes.Buffer
	run(t.Context(), []string{cobra.ShellCompRequestCmd, "que"}, &stdout, io.Discard, environ(nil))
	if !strings.Contains(stdout.String(), "queryapi") {
		t.Errorf("completing \"que\": %q", stdout.String())
	}
	stdout.Reset()
	run(t.Context(), []string{cobra.ShellCompRequestCmd, "collector", "--kafka-b"}, &stdout, io.Discard, environ(nil))
	if !strings.Contains(stdout.String(), "--kafka-brokers") {
		t.Errorf("completing \"collector --kafka-b\": %q", stdout.String())
	}
}
