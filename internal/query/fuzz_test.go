package query

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// FuzzSelectors feeds label and field selectors through Parse alone, each repeated n times (so
// inputs reach the requirement and length limits). Every selector either parses into
// requirements within the limits that, written back as a selector, parse to the same
// requirements, or is rejected with errors that each name its parameter — the errors of one
// selector exactly those it gets when given alone.
// Run longer with: go test -fuzz FuzzSelectors ./internal/query/
func FuzzSelectors(f *testing.F) {
	for _, seed := range []struct {
		label, field string
		n            uint16
	}{
		{"app.kubernetes.io/name=web", "status.phase!=Running", 1},
		{"env in (prod,staging),!canary,tier", "spec.nodeName=", 1},
		{"app==web,version notin (v1, v2),team!=ops", "metadata.namespace==shop,metadata.name=web-0", 1},
		{"example.com/owner", `metadata.annotations.example.com/a\,b=c\=d\\`, 1},
		{"app=web", "status.phase=Running", 51},                                            // one past MaxRequirements
		{"key-with-sixty-three-characters-is-the-longest-a-label-may-have=x", "a=b", 1100}, // past MaxSelectorLength
		{"replicas>3", "metadata..name=x", 1},
		{"-bad-key-=x", "status.phase", 1},
		{"a in (", `a=\q`, 1},
		{"a=b,,c=d", "a=b,,c=d", 2},
		{"", "", 1},
		{"x in (" + repeat(MaxListValues+1, ",", func(i int) string { return fmt.Sprint("v", i) }) + ")", "", 1},
	} {
		f.Add(seed.label, seed.field, seed.n)
	}
	f.Fuzz(func(t *testing.T, label, field string, n uint16) {
		reps := 1 + int(n)%1200
		lsel := repeatJoined(label, reps)
		fsel := repeatJoined(field, reps)
		both := url.Values{}
		if lsel != "" {
			both.Set(ParamLabelSelector, lsel)
		}
		if fsel != "" {
			both.Set(ParamFieldSelector, fsel)
		}
		q, err := Parse(both, now)
		errs := paramErrors(t, err)
		_, errL := Parse(url.Values{ParamLabelSelector: {lsel}}, now)
		_, errF := Parse(url.Values{ParamFieldSelector: {fsel}}, now)
		alone := append(paramErrors(t, errL), paramErrors(t, errF)...)
		if !slices.Equal(sortedErrors(errs), sortedErrors(alone)) {
			t.Fatalf("errors together %v differ from errors alone %v", errs, alone)
		}
		for _, e := range errs {
			if e.Param != ParamLabelSelector && e.Param != ParamFieldSelector {
				t.Fatalf("error %q names parameter %q, which was not given", e.Message, e.Param)
			}
		}
		for param, s := range map[string]string{ParamLabelSelector: lsel, ParamFieldSelector: fsel} {
			if len(s) > MaxSelectorLength && !slices.ContainsFunc(errs, func(e Error) bool {
				return e.Param == param && strings.Contains(e.Message, "longer than")
			}) {
				t.Fatalf("%s of %d bytes (limit %d): errors %v do not say it is too long", param, len(s), MaxSelectorLength, errs)
			}
		}
		if err != nil {
			return
		}
		checkLabels(t, q.Labels)
		checkFields(t, q.Fields)

		// Written back, the requirements select the same.
		again, err := Parse(url.Values{
			ParamLabelSelector: {renderLabels(t, q.Labels)},
			ParamFieldSelector: {renderFields(q.Fields)},
		}, now)
		if err != nil {
			t.Fatalf("requirements of %q / %q written back do not parse: %v", lsel, fsel, err)
		}
		if !slices.EqualFunc(q.Labels, again.Labels, equalRequirement) {
			t.Fatalf("labels %q: %v, written back %v", lsel, q.Labels, again.Labels)
		}
		if !slices.EqualFunc(sortedRequirements(q.Fields), sortedRequirements(again.Fields), equalRequirement) {
			t.Fatalf("fields %q: %v, written back %v", fsel, q.Fields, again.Fields)
		}
	})
}

func repeatJoined(s string, n int) string {
	if s == "" {
		return ""
	}
	return strings.Repeat(s+",", n-1) + s
}

// paramErrors are err's parameter errors; err must be nil or Errors of named, explained
// parameters.
func paramErrors(t *testing.T, err error) []Error {
	t.Helper()
	if err == nil {
		return nil
	}
	var errs Errors
	if !errors.As(err, &errs) || len(errs) == 0 {
		t.Fatalf("error %v (%T) is not a list of parameter errors", err, err)
	}
	for _, e := range errs {
		if e.Param == "" || e.Message == "" {
			t.Fatalf("an error without parameter or message: %+v", e)
		}
	}
	return errs
}

func sortedErrors(errs []Error) []Error {
	out := slices.Clone(errs)
	slices.SortFunc(out, func(a, b Error) int {
		return cmp.Or(cmp.Compare(a.Param, b.Param), cmp.Compare(a.Message, b.Message))
	})
	return out
}

func checkLabels(t *testing.T, reqs []Requirement) {
	t.Helper()
	if len(reqs) > MaxRequirements {
		t.Fatalf("%d label requirements; the limit is %d", len(reqs), MaxRequirements)
	}
	for _, r := range reqs {
		want := map[Op][2]int{Equals: {1, 1}, NotEquals: {1, 1}, In: {1, MaxListValues}, NotIn: {1, MaxListValues},
			Exists: {0, 0}, NotExists: {0, 0}}
		bounds, ok := want[r.Op]
		if !ok || len(r.Values) < bounds[0] || len(r.Values) > bounds[1] {
			t.Fatalf("label requirement %+v: operator or number of values out of bounds", r)
		}
		if !slices.IsSorted(r.Values) {
			t.Fatalf("label requirement %+v: values not sorted", r)
		}
	}
}

func checkFields(t *testing.T, reqs []Requirement) {
	t.Helper()
	if len(reqs) > MaxRequirements {
		t.Fatalf("%d field requirements; the limit is %d", len(reqs), MaxRequirements)
	}
	for _, r := range reqs {
		if (r.Op != Equals && r.Op != NotEquals) || len(r.Values) != 1 {
			t.Fatalf("field requirement %+v: operator or number of values out of bounds", r)
		}
		if bad := badPath(r.Key); bad != "" {
			t.Fatalf("field requirement %+v: %s", r, bad)
		}
	}
}

var labelOps = map[Op]selection.Operator{Equals: selection.Equals, NotEquals: selection.NotEquals,
	In: selection.In, NotIn: selection.NotIn, Exists: selection.Exists, NotExists: selection.DoesNotExist}

func renderLabels(t *testing.T, reqs []Requirement) string {
	t.Helper()
	out := make([]string, 0, len(reqs))
	for _, r := range reqs {
		req, err := labels.NewRequirement(r.Key, labelOps[r.Op], r.Values)
		if err != nil {
			t.Fatalf("parsed label requirement %+v is not valid: %v", r, err)
		}
		out = append(out, req.String())
	}
	return strings.Join(out, ",")
}

func renderFields(reqs []Requirement) string {
	out := make([]string, 0, len(reqs))
	for _, r := range reqs {
		out = append(out, r.Key+string(r.Op)+fields.EscapeValue(r.Values[0]))
	}
	return strings.Join(out, ",")
}

func sortedRequirements(reqs []Requirement) []Requirement {
	out := slices.Clone(reqs)
	slices.SortFunc(out, func(a, b Requirement) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Op, b.Op), slices.Compare(a.Values, b.Values))
	})
	return out
}

func equalRequirement(a, b Requirement) bool {
	return a.Key == b.Key && a.Op == b.Op && slices.Equal(a.Values, b.Values)
}
