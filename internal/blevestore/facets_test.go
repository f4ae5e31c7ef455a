package blevestore

import (
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/kubesearch/kubesearch/internal/store"
)

// TestFacetsFromTermsAgree: the namespace facets counted from the terms are those counted from
// every match's doc values, across segments holding deleted and overwritten documents, under
// selectors, in orders that read the namespace and orders that do not, beside the facets always
// counted per match.
func TestFacetsFromTermsAgree(t *testing.T) {
	s := newStore(t, t.TempDir())
	defer s.Close()
	ops := fleet(t)
	for _, o := range ops {
		write(t, s, o) // a segment each
	}
	for i := range 30 {
		o := pod([]string{"east", "west", "north"}[i%3], fmt.Sprintf("team-%d", i%4), fmt.Sprintf("api-%d", i), int64(200+i),
			map[string]string{"app": "api"}, fmt.Sprintf("node-%d", i%2), "Running", "api:1").op(t)
		write(t, s, o)
		if i%7 == 0 {
			o.Delete, o.Doc, o.Version = true, nil, o.Version+1
			write(t, s, o)
		}
	}
	over := ops[0]
	over.Epoch = 2
	write(t, s, over)
	defer func(v uint64) { termsPerMatch = v }(termsPerMatch)
	for _, params := range []string{
		"facets=cluster,namespace,resource,labels",
		"facets=cluster,namespace,resource,labels&sort=creationTimestamp:desc",
		"facets=namespace,cluster&resources=pods&fieldSelector=spec.nodeName=node-1&sort=name",
		"facets=cluster,namespace,label:app&labelSelector=app&facetSize=2&sort=cluster",
		"facets=namespace&clusters=west&namespaces=team-1,shop&sort=lastChangedAt",
		"facets=cluster,namespace&names=nothing-has-this-name&sort=name",
	} {
		answer := func(perMatch uint64) []store.FacetResult {
			termsPerMatch = perMatch
			q := parse(t, params)
			q.Limit = 1
			res, err := s.Search(t.Context(), q)
			if err != nil {
				t.Fatal(err)
			}
			s.Release(t.Context(), res.Continue)
			return res.Facets
		}
		terms, docValues := answer(0), answer(math.MaxUint64)
		if !reflect.DeepEqual(terms, docValues) || len(terms) == 0 {
			t.Errorf("?%s: from the terms %+v, from the doc values %+v", params, terms, docValues)
		}
	}
}
