package stream

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

func TestSecurityResolve(t *testing.T) {
	dir := t.TempDir()
	write := func(name, v string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	user, pass, notPEM := write("user", "collector\n"), write("pass", "s3cret\n"), write("ca", "not a certificate")
	c, err := Security{SASLMechanism: "scram-sha-512", UsernameFile: user, PasswordFile: pass, InsecureSkipVerify: true}.Resolve()
	if err != nil || c.SASL == nil || c.SASL.Name() != "SCRAM-SHA-512" || c.TLS == nil || !c.TLS.InsecureSkipVerify {
		t.Fatalf("scram over TLS: %+v, %v", c, err)
	}
	if c, err := (Security{}).Resolve(); err != nil || c.TLS != nil || c.SASL != nil {
		t.Fatalf("plaintext: %+v, %v", c, err)
	}
	// Every bad file is reported at once, each by its flag.
	_, err = Security{CAFile: notPEM, SASLMechanism: "plain", UsernameFile: "/nonexistent/u", PasswordFile: pass}.Resolve()
	for _, want := range []string{"--kafka-ca-file:", "no PEM certificate", "--kafka-username-file:"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("bad files: %v; want %q", err, want)
		}
	}
}

func TestSecurityCheck(t *testing.T) {
	for _, tt := range []struct {
		s    Security
		want string
	}{
		{Security{SASLMechanism: "gssapi"}, `--kafka-sasl-mechanism: want plain, scram-sha-256 or scram-sha-512, got "gssapi"`},
		{Security{SASLMechanism: "plain"}, "both required with --kafka-sasl-mechanism plain"},
		{Security{UsernameFile: "u"}, "need --kafka-sasl-mechanism"},
	} {
		errs := tt.s.Check()
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), tt.want) {
			t.Errorf("%+v: %v; want %q", tt.s, errs, tt.want)
		}
	}
	if errs := (Security{SASLMechanism: "plain", UsernameFile: "u", PasswordFile: "p"}).Check(); len(errs) != 0 {
		t.Errorf("complete options refused: %v", errs)
	}
}

// Creating a topic is idempotent: the second collector or indexer to start finds it there.
func TestEnsureTopicIsIdempotent(t *testing.T) {
	c := newTestClient(t)
	topic := Topic{Name: "events", Partitions: DefaultPartitions, Config: MaxMessageBytes(DefaultMaxMessageBytes)}
	for range 2 {
		if err := c.EnsureTopic(t.Context(), topic); err != nil {
			t.Fatal(err)
		}
	}
	ps, err := c.Partitions(t.Context(), "events")
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != DefaultPartitions {
		t.Fatalf("partitions: %v", ps)
	}
	limit, err := c.TopicMaxMessageBytes(t.Context(), "events")
	if err != nil || limit != DefaultMaxMessageBytes {
		t.Fatalf("max.message.bytes: %d, %v", limit, err)
	}
}

// newTestClient is a client of an in-process Kafka (kfake) with one broker.
func newTestClient(t testing.TB, opts ...kfake.Opt) *Client {
	t.Helper()
	kc, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	c := NewClient(kc.ListenAddrs(), Connection{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(c.Close)
	return c
}

// TestReplication: a topic is replicated as far as the cluster allows, up to 3 with 2 in sync.
func TestReplication(t *testing.T) {
	for brokers, want := range map[int][2]int{0: {1, 1}, 1: {1, 1}, 2: {2, 1}, 3: {3, 2}, 7: {3, 2}} {
		if f, m := Replication(brokers); f != want[0] || m != want[1] {
			t.Errorf("Replication(%d) = %d, %d; want %d, %d", brokers, f, m, want[0], want[1])
		}
	}
}
