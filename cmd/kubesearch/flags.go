package main

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

const (
	// groupAnnotation names, on a flag, the heading its command's help lists it under.
	groupAnnotation = "kubesearch.io/flag-group"
	// groupsAnnotation lists, on a command, its flag headings in the order its help shows them.
	groupsAnnotation = "kubesearch.io/flag-groups"
	// generalGroup holds the flags every subcommand has, and cobra's --help; shown last.
	generalGroup = "General"
)

// flagGroups adds a command's flags under the headings its help shows them in.
type flagGroups struct{ cmd *cobra.Command }

// add registers flags under heading; a heading added twice keeps its first place.
func (g flagGroups) add(heading string, register func(fs *pflag.FlagSet)) {
	group := pflag.NewFlagSet(heading, pflag.ContinueOnError)
	register(group)
	group.VisitAll(func(f *pflag.Flag) {
		if f.Annotations == nil {
			f.Annotations = map[string][]string{}
		}
		f.Annotations[groupAnnotation] = []string{heading}
		g.cmd.Flags().AddFlag(f)
	})
	if g.cmd.Annotations == nil {
		g.cmd.Annotations = map[string]string{}
	}
	headings := strings.Split(g.cmd.Annotations[groupsAnnotation], "\n")
	if !slices.Contains(headings, heading) {
		g.cmd.Annotations[groupsAnnotation] = strings.TrimPrefix(g.cmd.Annotations[groupsAnnotation]+"\n"+heading, "\n")
	}
}

// groupedUsage is a subcommand's usage: the command line, the examples, then its flags under their
// headings, the general ones last, and where else flags can be set.
func groupedUsage(c *cobra.Command) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage:\n  %s\n", c.UseLine())
	if c.HasExample() {
		fmt.Fprintf(&b, "\nExamples:\n%s\n", strings.TrimRight(c.Example, "\n"))
	}
	headings := strings.Split(c.Annotations[groupsAnnotation], "\n")
	headings = append(slices.DeleteFunc(headings, func(h string) bool { return h == "" || h == generalGroup }), generalGroup)
	for _, heading := range headings {
		group := pflag.NewFlagSet(heading, pflag.ContinueOnError)
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			h := generalGroup
			if v := f.Annotations[groupAnnotation]; len(v) == 1 {
				h = v[0]
			}
			if h == heading {
				group.AddFlag(f)
			}
		})
		if group.HasAvailableFlags() {
			fmt.Fprintf(&b, "\n%s flags:\n%s", heading, group.FlagUsages())
		}
	}
	fmt.Fprintf(&b, "\nEvery flag can also be set as a key of the --config file (YAML, e.g. listen: 127.0.0.1:8080)\n"+
		"or as an environment variable KUBESEARCH_<FLAG> (e.g. KUBESEARCH_LOG_LEVEL=debug):\n"+
		"the command line wins over the environment, which wins over the file.\n")
	_, err := io.WriteString(c.OutOrStderr(), b.String())
	return err
}

// stringList is a comma-separated flag value; each use replaces the list.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }
func (s *stringList) Type() string   { return "strings" }
func (s *stringList) Set(v string) error {
	*s = nil
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*s = append(*s, p)
		}
	}
	return nil
}

// levelValue is a log level flag: debug, info, warn, error (or a level such as info+2).
type levelValue struct{ level *slog.Level }

func (v levelValue) String() string     { return v.level.String() }
func (v levelValue) Type() string       { return "level" }
func (v levelValue) Set(s string) error { return v.level.UnmarshalText([]byte(s)) }

// funcValue is a flag whose value is parsed by a function; typ is the value's name in the help.
type funcValue struct {
	typ   string
	value string
	set   func(string) error
}

func (v *funcValue) String() string { return v.value }
func (v *funcValue) Type() string   { return v.typ }
func (v *funcValue) Set(s string) error {
	if err := v.set(s); err != nil {
		return err
	}
	v.value = s
	return nil
}
