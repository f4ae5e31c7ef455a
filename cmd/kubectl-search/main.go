// Command kubectl-search is `kubectl search`, a kubectl plugin: on PATH, kubectl runs it for
// `kubectl search ...`. It searches the fleet through the kubesearch query API of the current
// kubeconfig context (a context of `kubesearch kubeconfig`) and prints as kubectl get does. The work
// is package search's; this parses the command line into search.Options and runs it until SIGINT.
//
// Exit codes: 0 done, 1 the search failed, 2 a bad command line.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/kubesearch/kubesearch/search"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// usageError is a bad command line: exit 2 and a pointer to --help.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// run runs the command line args and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newCommand(stdout, stderr, func(ctx context.Context, o search.Options) error { return search.Run(ctx, o) })
	cmd.SetArgs(args)
	return exitCode(cmd.ExecuteContext(ctx), stderr)
}

// exitCode prints err as kubectl would and returns the exit code.
func exitCode(err error, stderr io.Writer) int {
	var usage usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "error: %s\nSee 'kubectl search --help' for usage.\n", strings.TrimRight(err.Error(), "\n"))
		return 2
	case search.IsServerError(err):
		fmt.Fprintln(stderr, err) // "Error from server (BadRequest): ...", as kubectl prints a Status
		return 1
	default:
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
}

// newCommand builds the command line; runSearch is search.Run, replaced in tests.
func newCommand(stdout, stderr io.Writer, runSearch func(context.Context, search.Options) error) *cobra.Command {
	o := search.Options{Out: stdout, ErrOut: stderr}
	cmd := &cobra.Command{
		Use:   "kubectl search [TYPE[,TYPE...]...] [flags]",
		Short: "Search every cluster of the fleet through kubesearch",
		Long: `Search every cluster of the fleet through the kubesearch query API that the current kubeconfig
context reaches (a context written by 'kubesearch kubeconfig'), with the context's credentials, and
print the matches as kubectl get does: a table per kind with a CLUSTER column, or -o wide, json,
yaml or name; --count-by prints counts per cluster, namespace or kind instead.

Every namespace is searched unless -n names some. A one-cluster context (kubesearch-<member>)
searches its member unless --clusters says otherwise. TYPE is what kubectl get takes: pods, po,
deployments.apps, deploy; none searches every kind the fleet caches. -o name prints
kind/<name>_<cluster>, the name the qualified context (kubesearch-qualified) gets and describes.`,
		Example: `  # pods labelled app=web in two clusters, using image nginx:1.27, with "crashloop" in their text
  kubectl search pods -l app=web --clusters member1,member2 --image nginx:1.27 --text crashloop

  # where does app web run? one line per cluster with a count
  kubectl search deployments -l app.kubernetes.io/name=web --count-by cluster

  # what is not Running, with nodes and IPs; as a List; as names for the qualified context
  kubectl search pods --field-selector status.phase!=Running -o wide
  kubectl search pods -n shop -o yaml
  kubectl search deploy,po -l app=web -o name`,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				o.Resources = args
			}
			if err := o.Validate(); err != nil {
				return usageError{err}
			}
			return runSearch(cmd.Context(), o)
		},
	}
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	fs := cmd.Flags()
	fs.SortFlags = false
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: KUBECONFIG, else ~/.kube/config)")
	fs.StringVar(&o.Context, "context", "", "the kubeconfig context to use (default: its current context)")
	fs.StringVarP(&o.LabelSelector, "selector", "l", "", "label selector, as kubectl's (-l 'app in (web,api)')")
	fs.StringVar(&o.FieldSelector, "field-selector", "", "field selector on any dotted path of the object (status.phase!=Running, spec.nodeName=n1)")
	fs.StringSliceVar(&o.Clusters, "clusters", nil, "search only these member clusters (comma-separated)")
	fs.StringSliceVarP(&o.Namespaces, "namespace", "n", nil, "search only these namespaces (comma-separated; default every namespace)")
	fs.BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "every namespace (the default; kept for kubectl's habit)")
	fs.StringVar(&o.Image, "image", "", "a container image exactly as the spec writes it (nginx:1.27); for part of one use --text")
	fs.StringVar(&o.Text, "text", "", "free text: every word must match a name, label value, image, container or node name")
	fs.IntVar(&o.Limit, "limit", 0, "print at most this many objects (0: every match)")
	fs.IntVar(&o.ChunkSize, "chunk-size", 500, fmt.Sprintf("objects per request, 1 to %d; the pages are one snapshot", search.MaxChunkSize))
	fs.StringVarP(&o.Output, "output", "o", "", "output format: wide, json, yaml or name (default a table)")
	fs.StringSliceVar(&o.CountBy, "count-by", nil, "print counts per value instead of objects: cluster, namespace, kind, labels or label:<key> (comma-separated)")
	fs.BoolVar(&o.NoHeaders, "no-headers", false, "leave the header row out of tables")
	fs.DurationVar(&o.RequestTimeout, "request-timeout", 0, "bound on each request (0: none)")
	return cmd
}
