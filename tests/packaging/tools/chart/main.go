// Command chart runs `helm lint` and `helm template` on a chart through Helm's Go library (no helm
// binary needed):
//
//	go run ./chart lint --chart ../../../charts/kubesearch -f values.yaml
//	go run ./chart template --chart ../../../charts/kubesearch --release ks --namespace search -f values.yaml --set a.b=c
//	go run ./chart notes --chart ../../../charts/kubesearch -f values.yaml
//
// lint prints every message and fails on a warning or an error (`helm lint --strict`), the values
// schema included. template prints the manifests as `helm template` does; notes prints the
// rendered NOTES.txt, which helm install would print.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/strvals"
)

// kubeVersion is the test bed's Kubernetes, the version the rendered manifests are checked against.
const kubeVersion = "v1.37.2"

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "chart:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 || (args[0] != "lint" && args[0] != "template" && args[0] != "notes") {
		return errors.New("usage: chart lint|template|notes --chart DIR [-f values.yaml]... [--set k=v]...")
	}
	fs := flag.NewFlagSet("chart "+args[0], flag.ContinueOnError)
	var files, sets listFlag
	dir := fs.String("chart", "", "chart folder (required)")
	release := fs.String("release", "kubesearch", "release name")
	namespace := fs.String("namespace", "kubesearch", "release namespace")
	fs.Var(&files, "f", "values file (repeatable; later ones win)")
	fs.Var(&sets, "set", "a value, as helm's --set (repeatable)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("--chart: required")
	}
	vals, err := values(files, sets)
	if err != nil {
		return err
	}
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		return err
	}
	if args[0] == "lint" {
		return lint(*dir, *namespace, kv, vals)
	}
	return template(*dir, *release, *namespace, kv, vals, args[0] == "notes")
}

func values(files, sets []string) (map[string]any, error) {
	vals := map[string]any{}
	for _, f := range files {
		v, err := chartutil.ReadValuesFile(f)
		if err != nil {
			return nil, fmt.Errorf("-f %s: %w", f, err)
		}
		vals = merge(vals, v.AsMap())
	}
	for _, s := range sets {
		if err := strvals.ParseInto(s, vals); err != nil {
			return nil, fmt.Errorf("--set %s: %w", s, err)
		}
	}
	return vals, nil
}

// merge is helm's merge of values files: maps merge key by key, anything else is replaced.
func merge(a, b map[string]any) map[string]any {
	out := make(map[string]any, len(a))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		if bv, ok := v.(map[string]any); ok {
			if av, ok := out[k].(map[string]any); ok {
				out[k] = merge(av, bv)
				continue
			}
		}
		out[k] = v
	}
	return out
}

func lint(dir, namespace string, kv *chartutil.KubeVersion, vals map[string]any) error {
	l := action.NewLint()
	l.Strict, l.Namespace, l.KubeVersion = true, namespace, kv
	res := l.Run([]string{dir}, vals)
	for _, m := range res.Messages {
		fmt.Println(m.Error())
	}
	if len(res.Errors) > 0 {
		return fmt.Errorf("lint %s: %w", dir, errors.Join(res.Errors...))
	}
	return nil
}

func template(dir, release, namespace string, kv *chartutil.KubeVersion, vals map[string]any, notes bool) error {
	ch, err := loader.Load(dir)
	if err != nil {
		return fmt.Errorf("load chart %s: %w", dir, err)
	}
	install := action.NewInstall(&action.Configuration{})
	install.ClientOnly, install.DryRun, install.Replace, install.IncludeCRDs = true, true, true, true
	install.ReleaseName, install.Namespace, install.KubeVersion = release, namespace, kv
	rel, err := install.Run(ch, vals)
	if err != nil {
		return fmt.Errorf("template %s: %w", dir, err)
	}
	if notes {
		_, err = os.Stdout.WriteString(rel.Info.Notes + "\n")
		return err
	}
	var out strings.Builder
	out.WriteString(strings.TrimSpace(rel.Manifest))
	out.WriteString("\n")
	for _, h := range rel.Hooks {
		fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", h.Path, strings.TrimSpace(h.Manifest))
	}
	_, err = os.Stdout.WriteString(out.String())
	return err
}
