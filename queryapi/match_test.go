package queryapi

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/internal/query"
)

func TestMatchesSelectors(t *testing.T) {
	obj := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-1","namespace":"shop",
		"labels":{"app.kubernetes.io/name":"web","tier":"front"},
		"annotations":{"example.com/owner":"team-a","big":"` + strings.Repeat("x", 33000) + `"}},
		"spec":{"nodeName":"","replicas":3,"containers":[{"name":"nginx","image":"nginx:1.27"},{"name":"envoy","image":"envoy:1.31"}]},
		"status":{"phase":"Running","ready":true}}`)
	cases := []struct {
		labels, fields string
		want           bool
	}{
		{"app.kubernetes.io/name=web", "", true},
		{"app.kubernetes.io/name in (db,web)", "", true},
		{"app.kubernetes.io/name notin (web)", "", false},
		{"app.kubernetes.io/name!=db", "", true},
		{"nosuch!=x", "", true},
		{"nosuch", "", false},
		{"!nosuch,tier", "", true},
		{"app=web", "", false}, // app and app.kubernetes.io/name never mix
		{"", "status.phase=Running", true},
		{"", "status.phase!=Running", false},
		{"", "spec.containers.image=envoy:1.31", true}, // any element
		{"", "spec.containers.image!=envoy:1.31", false},
		{"", "spec.nodeName=", true},                                          // empty
		{"", "spec.schedulerName=", true},                                     // missing
		{"", "spec.replicas=3", true},                                         // numbers as strings
		{"", "status.ready=true", true},                                       // booleans too
		{"", "metadata.annotations.example.com/owner=team-a", true},           // a key with dots and a slash
		{"", "metadata.annotations.big=" + strings.Repeat("x", 33000), false}, // too long to index
		{"tier=front", "metadata.name=web-1,metadata.namespace=shop", true},
		{"tier=back", "metadata.name=web-1", false},
	}
	for _, c := range cases {
		v := url.Values{}
		if c.labels != "" {
			v.Set(query.ParamLabelSelector, c.labels)
		}
		if c.fields != "" {
			v.Set(query.ParamFieldSelector, c.fields)
		}
		q, err := query.Parse(v, time.Now())
		if err != nil {
			t.Fatalf("%q %q: %v", c.labels, c.fields, err)
		}
		if got := matches(q, obj); got != c.want {
			t.Errorf("labels %q fields %.60q: matches = %v, want %v", c.labels, c.fields, got, c.want)
		}
	}
}
