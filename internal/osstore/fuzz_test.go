package osstore

import (
	"encoding/json"
	"errors"
	"net/url"
	"testing"

	"github.com/kubesearch/kubesearch/internal/query"
)

// FuzzParseCompile feeds arbitrary query strings through the parser and the compiler: every input
// either compiles to DSL that encodes as JSON and that OpenSearch's clause limit admits, or is
// rejected with errors that each name a parameter.
// Never a panic. Run longer with: go test -fuzz FuzzParseCompile ./internal/osstore/
func FuzzParseCompile(f *testing.F) {
	for _, seed := range []string{
		"", "resources=pods,deployments.apps&labelSelector=app.kubernetes.io/name%3Dweb",
		"labelSelector=env+in+(a,b),!tier,x!%3Dy&fieldSelector=status.phase!%3DRunning,spec.nodeName%3D",
		"fieldSelector=metadata.annotations.a\\,b%3Dc", "q=nginx:1.25&fuzzyName=ng*x?&namePrefix=web",
		"owner=ReplicaSet/web&createdSince=1h&createdBefore=2026-01-01T00:00:00Z&changedSince=7d",
		"sort=creationTimestamp:desc,name&limit=1000&facets=label:app.kubernetes.io/name,labels&facetSize=5",
		"limit=0&sort=size", "%zz", "labelSelector=%00", "facets=label:%22(.*)%22",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return // not a query string: the HTTP server never gets this far
		}
		q, err := query.Parse(v, now)
		if err != nil {
			var errs query.Errors
			if !errors.As(err, &errs) || len(errs) == 0 {
				t.Fatalf("Parse(%q) error %v is not a list of parameter errors", raw, err)
			}
			for _, e := range errs {
				if e.Param == "" || e.Message == "" {
					t.Fatalf("Parse(%q): error without parameter or message: %+v", raw, e)
				}
			}
			return
		}
		body := Compile(q)
		if _, err := json.Marshal(body); err != nil {
			t.Fatalf("Compile(%q) does not encode: %v", raw, err)
		}
		if n := clauses(t, body["query"]); n > maxClauseCount {
			t.Fatalf("Compile(%q) has %d clauses; OpenSearch refuses more than %d", raw, n, maxClauseCount)
		}
	})
}
