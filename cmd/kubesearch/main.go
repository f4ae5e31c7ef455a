// Command kubesearch runs one of kubesearch's components: `kubesearch collector`, ... Each subcommand
// parses its flags into the component's Options and runs it until SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/kubesearch/kubesearch/internal/stream"
)

// command is one subcommand: it registers its flags, then runs with the parsed values.
type command struct {
	summary string
	setup   func(fs *flag.FlagSet) func(ctx context.Context, log *slog.Logger) error
}

var commands = map[string]command{
	"collector":  {"list/watch member clusters into Kafka", collectorCommand},
	"indexer":    {"consume the event stream into OpenSearch", indexerCommand},
	"queryapi":   {"serve REST search and the Kubernetes facade over the index", queryAPICommand},
	"kubeconfig": {"print a kubeconfig for the query API's Kubernetes facade", kubeconfigCommand},
	"version":    {"print the version, commit and Go version of this binary", versionCommand},
	"standalone": {"the whole pipeline in one process on an embedded store: REST search and the facade over every member", standaloneCommand},
}

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		return 2
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "kubesearch: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	fs := flag.NewFlagSet("kubesearch "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	level := new(slog.LevelVar)
	fs.TextVar(level, "log-level", level, "log level: debug, info, warn, error")
	logJSON := fs.Bool("log-json", false, "log as JSON lines instead of text")
	runFn := cmd.setup(fs)
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	var handler slog.Handler = slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})
	if *logJSON {
		handler = slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level})
	}
	logger := slog.New(handler)
	// client-go logs through klog; route it into the same structured log.
	klog.SetSlogLogger(logger.With("source", "client-go"))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := runFn(ctx, logger); err != nil {
		logger.Error("exiting", "command", args[0], "err", err)
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: kubesearch COMMAND [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun `kubesearch COMMAND -h` for a command's flags.")
}

// stringList is a comma-separated flag value.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error {
	*s = nil
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*s = append(*s, p)
		}
	}
	return nil
}

// kafkaSecurityFlags registers the Kafka TLS and SASL flags, the same for every component.
func kafkaSecurityFlags(fs *flag.FlagSet, s *stream.Security) {
	fs.BoolVar(&s.TLS, "kafka-tls", false, "connect to Kafka with TLS")
	fs.StringVar(&s.CAFile, "kafka-ca-file", "", "PEM CA certificates that sign the brokers' certificates (implies --kafka-tls)")
	fs.BoolVar(&s.InsecureSkipVerify, "kafka-insecure-skip-verify", false, "accept any broker certificate (implies --kafka-tls); for demos only")
	fs.StringVar(&s.SASLMechanism, "kafka-sasl-mechanism", "", "SASL mechanism: plain, scram-sha-256 or scram-sha-512")
	fs.StringVar(&s.UsernameFile, "kafka-username-file", "", "file holding the SASL username")
	fs.StringVar(&s.PasswordFile, "kafka-password-file", "", "file holding the SASL password")
}
