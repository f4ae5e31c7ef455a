package indexer

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/internal/osstore"
)

func validOptions() Options {
	o := Options{Brokers: []string{"127.0.0.1:9092"}, OpenSearchAddresses: []string{"http://127.0.0.1:9200"}}
	o.SetDefaults()
	return o
}

func TestOptionsDefaults(t *testing.T) {
	o := Options{Topic: "events"}
	o.SetDefaults()
	if o.DeadLetterTopic != "events.dlq" || o.GroupID != "kubesearch-indexer" || o.FetchMaxBytes < 4<<20 {
		t.Errorf("defaults: %+v", o)
	}
	v := validOptions()
	if err := v.Validate(); err != nil {
		t.Errorf("defaults with brokers and addresses: %v", err)
	}
}

// TestOptionsValidate: every invalid option is reported at once, each named by its flag.
func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(o *Options)
		want   []string
	}{
		{"nothing to connect to", func(o *Options) { o.Brokers, o.OpenSearchAddresses = nil, nil },
			[]string{"--kafka-brokers: required", "--opensearch-addresses: required unless --registry"}},
		{"registry instead of addresses", func(o *Options) { o.OpenSearchAddresses, o.Registry = nil, "regs/" }, nil},
		{"bad addresses", func(o *Options) {
			o.OpenSearchAddresses = []string{"localhost:9200", "https://user:pw@os:9200", "ftp://os"}
		},
			[]string{`--opensearch-addresses: "localhost:9200"`, `--opensearch-addresses: "https://user:xxxxx@os:9200": credentials belong`, `--opensearch-addresses: "ftp://os"`}},
		{"small fetch", func(o *Options) { o.FetchMaxBytes = 1 << 20 }, []string{"--kafka-fetch-max-bytes: must be at least 4 MiB"}},
		{"dead letters into the stream", func(o *Options) { o.DeadLetterTopic = o.Topic }, []string{"--dlq-topic: must differ from --topic"}},
		{"half the credentials", func(o *Options) { o.OpenSearch.UsernameFile = "u" }, []string{"--opensearch-username-file, --opensearch-password-file: give both or neither"}},
		{"two sources of credentials", func(o *Options) {
			o.OpenSearch.UsernameFile, o.OpenSearch.PasswordFile, o.OpenSearch.SecretDir = "u", "p", "d"
		}, []string{"--opensearch-secret-dir: not together"}},
		{"sasl without credentials", func(o *Options) { o.Kafka.SASLMechanism = "scram-sha-512" }, []string{"--kafka-username-file, --kafka-password-file: both required"}},
		{"unknown sasl", func(o *Options) { o.Kafka.SASLMechanism = "gssapi" }, []string{`--kafka-sasl-mechanism: want plain, scram-sha-256 or scram-sha-512, got "gssapi"`}},
		{"credentials without sasl", func(o *Options) { o.Kafka.UsernameFile = "u" }, []string{"need --kafka-sasl-mechanism"}},
		{"index settings", func(o *Options) {
			o.Index.Prefix, o.Index.Shards, o.Index.Replicas, o.Index.RefreshInterval = "Team", -1, -2, 1500*time.Microsecond
		}, []string{"--index-prefix:", "--index-shards: must not be negative", "--index-replicas: must be auto or a number", "--index-refresh-interval: OpenSearch counts in whole milliseconds"}},
		{"batching", func(o *Options) {
			o.BatchSize, o.BatchBytes, o.BatchInterval, o.ShutdownTimeout = 0, 10, -time.Second, -1
		},
			[]string{"--batch-size: must be at least 1", "--batch-bytes: must be at least 1 KiB", "--batch-interval: must be positive", "--shutdown-timeout: must be positive"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := validOptions()
			tt.modify(&o)
			err := o.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tt.want)
			}
			got := strings.Split(err.Error(), "\n")
			if len(got) != len(tt.want) {
				t.Errorf("got %d errors, want %d:\n%v", len(got), len(tt.want), err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("missing %q in:\n%v", w, err)
				}
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

// TestNewReportsEveryFile: the backend reads the OpenSearch files and the indexer the Kafka ones,
// and New reports the problems of both at once, each naming its flag.
func TestNewReportsEveryFile(t *testing.T) {
	o := validOptions()
	o.OpenSearch = osstore.Security{UsernameFile: "/nonexistent/u", PasswordFile: "/nonexistent/p"}
	o.Kafka.CAFile = "/nonexistent/ca.pem"
	o.ListenAddr = ""
	_, err := New(o)
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range []string{"--opensearch-username-file:", "--opensearch-password-file:", "--kafka-ca-file:"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("missing %q in %v", w, err)
		}
	}
}

const registryWithBackend = `apiVersion: search.karmada.io/v1alpha1
kind: ResourceRegistry
metadata:
  name: %s
spec:
  targetCluster:
    clusterNames: [member1]
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
  backendStore:
    openSearch:
      addresses: [%s]
%s`

func TestRegistryBackend(t *testing.T) {
	reg := func(t *testing.T, docs ...string) string {
		dir := t.TempDir()
		for i, d := range docs {
			writeFile(t, dir, string(rune('a'+i))+".yaml", d)
		}
		return dir
	}
	secretRef := "      secretRef:\n        namespace: karmada-system\n        name: opensearch-credentials\n"
	tests := []struct {
		name    string
		regs    []string
		flag    []string
		secret  string
		want    string
		wantErr string
	}{
		{name: "addresses from the registry", regs: []string{fmt.Sprintf(registryWithBackend, "r1", "https://os-0:9200", "")}, want: "https://os-0:9200"},
		{name: "flag and registry agree", regs: []string{fmt.Sprintf(registryWithBackend, "r1", "https://os-0:9200", "")},
			flag: []string{"https://os-0:9200/"}, want: "https://os-0:9200"},
		{name: "flag and registry disagree", regs: []string{fmt.Sprintf(registryWithBackend, "r1", "https://os-0:9200", "")},
			flag: []string{"https://other:9200"}, wantErr: "--opensearch-addresses https://other:9200 conflicts with the OpenSearch backend"},
		{name: "two registries, two backends", regs: []string{
			fmt.Sprintf(registryWithBackend, "r1", "https://os-0:9200", ""), fmt.Sprintf(registryWithBackend, "r2", "https://os-1:9200", "")},
			wantErr: "name different OpenSearch backends"},
		{name: "secretRef not mounted", regs: []string{fmt.Sprintf(registryWithBackend, "r1", "https://os-0:9200", secretRef)},
			wantErr: "--opensearch-secret-dir: the registries name secret karmada-system/opensearch-credentials"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := validOptions()
			o.OpenSearchAddresses, o.Registry = tt.flag, reg(t, tt.regs...)
			c, err := resolveConnection(&o)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(c.addresses, ",") != tt.want {
				t.Errorf("addresses: got %v, want %s", c.addresses, tt.want)
			}
		})
	}
}
