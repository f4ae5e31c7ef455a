// Command kubesearch runs one of kubesearch's components: `kubesearch collector`, ... Each subcommand
// parses its flags (from the command line, KUBESEARCH_* environment variables and a --config file)
// into the component's Options and runs it until SIGINT or SIGTERM.
//
// Exit codes: 0 done, 1 the component failed (logged), 2 a bad command line or configuration.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/kubesearch/kubesearch/internal/stream"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv))
}

// run runs the command line args and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, env lookupEnv) int {
	root := newRootCommand(stdout, stderr, env)
	if len(args) == 0 {
		// No command is a mistake, not a request for help: the usage goes to stderr, exit 2.
		root.InitDefaultHelpCmd()
		root.InitDefaultCompletionCmd()
		root.SetOut(stderr)
		_ = root.Usage()
		return 2
	}
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	var failed *runError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &failed):
		failed.log.Error("exiting", "command", failed.command, "err", failed.err)
		return 1
	default:
		path := root.Name()
		if cmd != nil {
			path = cmd.CommandPath()
		}
		fmt.Fprintf(stderr, "Error: %s\nSee '%s --help' for usage.\n", strings.TrimRight(err.Error(), "\n"), path)
		return 2
	}
}

// runError is a component's failure, to be logged with the component's logger.
type runError struct {
	command string
	log     *slog.Logger
	err     error
}

func (e *runError) Error() string { return e.command + ": " + e.err.Error() }
func (e *runError) Unwrap() error { return e.err }

const (
	componentsGroup = "components"
	toolsGroup      = "tools"
)

func newRootCommand(stdout, stderr io.Writer, env lookupEnv) *cobra.Command {
	root := &cobra.Command{
		Use:   "kubesearch",
		Short: "A searchable, always-fresh copy of the resources of a Kubernetes fleet",
		Long: `kubesearch keeps a searchable, always-fresh copy of the resources that Karmada-style
ResourceRegistry objects select in every cluster of a fleet, and serves REST search and a
read-only Kubernetes API (kubectl get/list/watch of the whole fleet) over it.

  member clusters --list/watch--> collector --Kafka--> indexer --> OpenSearch <-- queryapi <-- REST, kubectl

or all of it in one process on a laptop: kubesearch standalone.`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(flagError)
	root.AddGroup(&cobra.Group{ID: componentsGroup, Title: "Components:"}, &cobra.Group{ID: toolsGroup, Title: "Tools:"})
	root.SetHelpCommandGroupID(toolsGroup)
	root.SetCompletionCommandGroupID(toolsGroup)
	root.AddCommand(
		collectorCommand(env),
		indexerCommand(env),
		queryAPICommand(env),
		standaloneCommand(env),
		simulateCommand(env),
		kubeconfigCommand(env),
		versionCommand(env),
	)
	return root
}

// flagError points a single-dash long flag, which the standard library's flag package took, at
// its two-dash spelling.
func flagError(c *cobra.Command, err error) error {
	const prefix = "unknown shorthand flag: "
	msg := err.Error()
	if i := strings.Index(msg, " in -"); strings.HasPrefix(msg, prefix) && i >= 0 {
		name, _, _ := strings.Cut(msg[i+len(" in -"):], "=")
		if c.Flags().Lookup(name) != nil {
			return fmt.Errorf("%w (long flags take two dashes: --%s)", err, name)
		}
	}
	return err
}

// runFunc is what a subcommand does once its flags are set.
type runFunc func(ctx context.Context, log *slog.Logger) error

// subcommand completes a subcommand: setup registers its flags (under headings, see flagGroups) and
// returns what it runs; then come the general flags (--config, --log-level, --log-json), the
// environment and config file read before it runs, and the run itself with a logger and a context
// that SIGINT or SIGTERM cancels.
func subcommand(cmd *cobra.Command, env lookupEnv, setup func(g flagGroups) runFunc) *cobra.Command {
	g := flagGroups{cmd}
	runFn := setup(g)
	level := new(slog.Level)
	var logJSON bool
	g.add(generalGroup, func(fs *pflag.FlagSet) {
		fs.String("config", "", "YAML file of flag values, keys = flag names, e.g. listen: 127.0.0.1:8080 (env KUBESEARCH_CONFIG)")
		fs.Var(levelValue{level}, "log-level", "log level: debug, info, warn, error")
		fs.BoolVar(&logJSON, "log-json", false, "log as JSON lines instead of text")
	})
	completions(cmd)
	cmd.Args = func(c *cobra.Command, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("%q: %s takes flags only", args[0], c.CommandPath())
		}
		return nil
	}
	cmd.SetUsageFunc(groupedUsage)
	cmd.PreRunE = func(c *cobra.Command, _ []string) error { return resolveFlags(c, env) }
	cmd.RunE = func(c *cobra.Command, _ []string) error {
		opts := &slog.HandlerOptions{Level: level}
		var handler slog.Handler = slog.NewTextHandler(c.ErrOrStderr(), opts)
		if logJSON {
			handler = slog.NewJSONHandler(c.ErrOrStderr(), opts)
		}
		logger := slog.New(handler)
		// client-go logs through klog; route it into the same structured log.
		klog.SetSlogLogger(logger.With("source", "client-go"))

		ctx, stop := signal.NotifyContext(c.Context(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		if err := runFn(ctx, logger); err != nil {
			return &runError{command: c.Name(), log: logger, err: err}
		}
		return nil
	}
	return cmd
}

// completions tells the shell completion which flags take files or folders, and the values of the
// flags that take one of a few words.
func completions(cmd *cobra.Command) {
	files := map[string]bool{"kubeconfig": true, "clusters": true, "registry": true, "config": true,
		"certificate-authority": true, "client-certificate": true, "client-key": true, "authentication-kubeconfig": true}
	words := map[string][]string{
		"log-level":            {"debug", "info", "warn", "error"},
		"kafka-sasl-mechanism": {"plain", "scram-sha-256", "scram-sha-512"},
	}
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		switch {
		case files[f.Name] || strings.HasSuffix(f.Name, "-file"):
			_ = cmd.MarkFlagFilename(f.Name)
		case strings.HasSuffix(f.Name, "-dir"):
			_ = cmd.MarkFlagDirname(f.Name)
		case words[f.Name] != nil:
			_ = cmd.RegisterFlagCompletionFunc(f.Name, cobra.FixedCompletions(words[f.Name], cobra.ShellCompDirectiveNoFileComp))
		}
	})
}

// kafkaSecurityFlags registers the Kafka TLS and SASL flags, the same for every component.
func kafkaSecurityFlags(g flagGroups, s *stream.Security) {
	g.add("Kafka TLS and SASL", func(fs *pflag.FlagSet) {
		fs.BoolVar(&s.TLS, "kafka-tls", false, "connect to Kafka with TLS")
		fs.StringVar(&s.CAFile, "kafka-ca-file", "", "PEM CA certificates that sign the brokers' certificates (implies --kafka-tls)")
		fs.BoolVar(&s.InsecureSkipVerify, "kafka-insecure-skip-verify", false, "accept any broker certificate (implies --kafka-tls); for demos only")
		fs.StringVar(&s.SASLMechanism, "kafka-sasl-mechanism", "", "SASL mechanism: plain, scram-sha-256 or scram-sha-512")
		fs.StringVar(&s.UsernameFile, "kafka-username-file", "", "file holding the SASL username")
		fs.StringVar(&s.PasswordFile, "kafka-password-file", "", "file holding the SASL password")
	})
}
