package search

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Output formats of -o.
const (
	OutputTable = ""
	OutputWide  = "wide"
	OutputJSON  = "json"
	OutputYAML  = "yaml"
	OutputName  = "name"
)

// Dimensions of --count-by, as the user writes them; "kind" is the REST search's facet "resource".
var countByDimensions = []string{"cluster", "namespace", "kind", "resource", "labels", "label:<key>"}

// MaxChunkSize is the REST search's largest page (its limit parameter).
const MaxChunkSize = 1000

// Options are a kubectl search command line.
type Options struct {
	// Kubeconfig and Context select the kubeconfig and its context as kubectl's flags do; empty means
	// KUBECONFIG or ~/.kube/config, and its current context.
	Kubeconfig, Context string
	// Resources are the kinds as typed (pods, po, deployments.apps, "pods,deploy"); none searches every
	// kind the fleet caches.
	Resources []string
	// LabelSelector and FieldSelector have Kubernetes' grammar; the field selector takes any dotted
	// path of the object (the REST search's semantics).
	LabelSelector, FieldSelector string
	// Clusters, Namespaces: any of these; empty means all. A one-cluster context (kubesearch-<member>)
	// makes its member the default of Clusters.
	Clusters, Namespaces []string
	// AllNamespaces is -A: kubectl's habit, and the default here (a search asks "where"); it only
	// conflicts with Namespaces.
	AllNamespaces bool
	// Image matches a container's image exactly as the spec writes it (nginx:1.27): a field selector
	// requirement on the image path of the kinds searched.
	Image string
	// Text is free text: every word matches a name, label value, image, container or node name.
	Text string
	// Limit is the most objects printed; 0 prints every match.
	Limit int
	// ChunkSize is the page size asked of the REST search, as kubectl's --chunk-size; the pages of
	// one search are one snapshot (the continue token carries it).
	ChunkSize int
	// Output is "", wide, json, yaml or name.
	Output string
	// CountBy prints counts per value of these dimensions instead of objects.
	CountBy []string
	// NoHeaders leaves the header row out of tables.
	NoHeaders bool
	// RequestTimeout bounds each HTTP request; 0 means none beyond the context's.
	RequestTimeout time.Duration

	// Out and ErrOut receive the output and the server's warnings.
	Out, ErrOut io.Writer
	// Now is the instant ages are computed from; nil means time.Now.
	Now func() time.Time
}

// Validate says everything wrong with the options at once, each naming its flag.
func (o *Options) Validate() error {
	var errs []error
	if len(o.Namespaces) > 0 && o.AllNamespaces {
		errs = append(errs, errors.New("-n/--namespace and -A/--all-namespaces: give one or the other"))
	}
	for _, r := range o.resourceArgs() {
		if r == "" {
			errs = append(errs, fmt.Errorf("resource %q: empty name in the list", strings.Join(o.Resources, " ")))
			break
		}
	}
	for _, f := range []struct {
		flag string
		vals []string
	}{{"--clusters", o.Clusters}, {"-n/--namespace", o.Namespaces}} {
		if slices.Contains(f.vals, "") {
			errs = append(errs, fmt.Errorf("%s %q: empty entry", f.flag, strings.Join(f.vals, ",")))
		}
	}
	switch o.Output {
	case OutputTable, OutputWide, OutputJSON, OutputYAML, OutputName:
	default:
		errs = append(errs, fmt.Errorf("-o/--output %q: unknown format; one of wide, json, yaml, name", o.Output))
	}
	if o.Limit < 0 {
		errs = append(errs, fmt.Errorf("--limit %d: 0 (every match) or more", o.Limit))
	}
	if o.ChunkSize < 1 || o.ChunkSize > MaxChunkSize {
		errs = append(errs, fmt.Errorf("--chunk-size %d: between 1 and %d", o.ChunkSize, MaxChunkSize))
	}
	for _, d := range o.CountBy {
		if _, ok := facetOf(d); !ok {
			errs = append(errs, fmt.Errorf("--count-by %q: one of %s", d, strings.Join(countByDimensions, ", ")))
		}
	}
	if len(o.CountBy) > 0 && (o.Output == OutputWide || o.Output == OutputName) {
		errs = append(errs, fmt.Errorf("--count-by with -o %s: counts print as a table, json or yaml", o.Output))
	}
	if o.Image != "" && len(o.resourceArgs()) == 0 {
		errs = append(errs, errors.New("--image: name the kinds to search (pods, deployments, ...): each keeps its images at its own path"))
	}
	return errors.Join(errs...)
}

// resourceArgs splits the positional kinds, which kubectl lets you give as "pods,deploy" or as
// separate arguments.
func (o *Options) resourceArgs() []string {
	var out []string
	for _, r := range o.Resources {
		out = append(out, strings.Split(r, ",")...)
	}
	return out
}

// facetOf maps a --count-by dimension to the REST search's facet name.
func facetOf(dimension string) (string, bool) {
	switch {
	case dimension == "cluster", dimension == "namespace", dimension == "labels":
		return dimension, true
	case dimension == "kind", dimension == "resource":
		return "resource", true
	case strings.HasPrefix(dimension, "label:") && len(dimension) > len("label:"):
		return dimension, true
	}
	return "", false
}
