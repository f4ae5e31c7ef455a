package main

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubesearch/kubesearch/search"
)

// TestFlags holds what each command line becomes in search.Options, and the exit codes.
func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		want   func(*search.Options)
		code   int
		stderr string
	}{
		{"defaults", nil, func(*search.Options) {}, 0, ""},
		{"the issue's example", []string{"pods", "-l", "app=web", "--clusters", "a,b", "--image", "nginx", "--text", "crashloop"}, func(o *search.Options) {
			o.Resources = []string{"pods"}
			o.LabelSelector, o.Clusters, o.Image, o.Text = "app=web", []string{"a", "b"}, "nginx", "crashloop"
		}, 0, ""},
		{"kubectl's flags", []string{"deploy,po", "cm", "--kubeconfig", "k", "--context", "c", "-n", "a,b", "--field-selector", "status.phase!=Running",
			"-o", "wide", "--no-headers", "--limit", "5", "--chunk-size", "2", "--request-timeout", "3s"}, func(o *search.Options) {
			o.Resources = []string{"deploy,po", "cm"}
			o.Kubeconfig, o.Context, o.Namespaces, o.FieldSelector = "k", "c", []string{"a", "b"}, "status.phase!=Running"
			o.Output, o.NoHeaders, o.Limit, o.ChunkSize, o.RequestTimeout = "wide", true, 5, 2, 3e9
		}, 0, ""},
		{"count by", []string{"--count-by", "cluster,kind", "-A"}, func(o *search.Options) {
			o.CountBy, o.AllNamespaces = []string{"cluster", "kind"}, true
		}, 0, ""},
		{"an unknown flag", []string{"--bogus"}, nil, 2, "error: unknown flag: --bogus\nSee 'kubectl search --help' for usage.\n"},
		{"invalid options, every one named", []string{"-n", "a", "-A", "-o", "jsonpath"}, nil, 2,
			"error: -n/--namespace and -A/--all-namespaces: give one or the other\n-o/--output \"jsonpath\": unknown format; one of wide, json, yaml, name\nSee 'kubectl search --help' for usage.\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			var got *search.Options
			cmd := newCommand(&stdout, &stderr, func(_ context.Context, o search.Options) error { got = &o; return nil })
			cmd.SetArgs(tc.args)
			code := exitCode(cmd.ExecuteContext(t.Context()), &stderr)
			if code != tc.code || stderr.String() != tc.stderr {
				t.Fatalf("exit %d, stderr %q; want %d, %q", code, stderr.String(), tc.code, tc.stderr)
			}
			if tc.want == nil {
				if got != nil {
					t.Error("searched anyway")
				}
				return
			}
			want := search.Options{ChunkSize: 500, Out: &stdout, ErrOut: &stderr}
			tc.want(&want)
			if got == nil || !reflect.DeepEqual(*got, want) {
				t.Errorf("options %+v\nwant    %+v", got, want)
			}
		})
	}
}

func TestExitCodes(t *testing.T) {
	var stderr bytes.Buffer
	err := &search.ServerError{Status: metav1.Status{Reason: metav1.StatusReasonBadRequest, Message: "fieldSelector: x"}}
	if code := exitCode(err, &stderr); code != 1 || stderr.String() != "Error from server (BadRequest): fieldSelector: x\n" {
		t.Errorf("a Status: %d, %q", code, stderr.String())
	}
	stderr.Reset()
	if code := exitCode(errors.New("kubeconfig: no context"), &stderr); code != 1 || !strings.HasPrefix(stderr.String(), "error: kubeconfig") {
		t.Errorf("an error: %d, %q", code, stderr.String())
	}
}
