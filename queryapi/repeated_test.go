package queryapi

import (
	"strings"
	"testing"

	"github.com/kubesearch/kubesearch/internal/store"
)

// TestFleetListWarnsOfRepeatedNames: informers and controller-runtime key objects by namespace
// and name, so a fleet list whose page holds one name from two clusters is merged by them without a
// word; the page says so, pointing at the qualified view. Tables (kubectl get, with its CLUSTER
// column), the qualified and one-cluster views, and pages without repeats carry no such Warning. A
// watch's initial events are such a list.
func TestFleetListWarnsOfRepeatedNames(t *testing.T) {
	base, s := newFacadeServerWithCache(t, &fakeStore{objects: fleetObjects()})
	// The stream has reached the watermarks, so the watches' initial events start at once.
	s.cache.head[store.Pair{Cluster: "member1", Resource: "pods"}] = 500
	s.cache.head[store.Pair{Cluster: "member2", Resource: "pods"}] = 700
	warned := func(path, accept string) string {
		t.Helper()
		code, h, body := fetch(t, "GET", base+path, accept)
		if code != 200 {
			t.Fatalf("%s: %d %s", path, code, body)
		}
		for _, w := range h.Values("Warning") {
			if strings.Contains(w, "names repeat across clusters") {
				return w
			}
		}
		return ""
	}
	for _, path := range []string{
		"/api/v1/namespaces/shop/pods?limit=500",
		// client-go's informers (controller-runtime's cache among them) stream their list: the
		// first page of the initial events warns as a LIST's does.
		"/api/v1/namespaces/shop/pods?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&resourceVersion=0&timeoutSeconds=1",
		"/api/v1/namespaces/shop/pods?watch=1&timeoutSeconds=1", // no resourceVersion: initial events too
	} {
		if w := warned(path, ""); !strings.Contains(w, "shop/web-0000 in member1 and member2") || !strings.Contains(w, ContextQualified) {
			t.Errorf("%s, a fleet page with web-0000 of both members: Warning %q", path, w)
		}
	}
	for _, c := range []struct{ path, accept string }{
		{"/api/v1/namespaces/shop/pods?limit=500", "application/json;as=Table;v=v1;g=meta.k8s.io"},
		{"/qualified/api/v1/namespaces/shop/pods?limit=500", ""},
		{"/clusters/member1/api/v1/namespaces/shop/pods?limit=500", ""},
		{"/api/v1/namespaces/web/pods", ""}, // only member2 has it
		{"/qualified/api/v1/namespaces/shop/pods?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&resourceVersion=0&timeoutSeconds=1", ""},
	} {
		if w := warned(c.path, c.accept); w != "" {
			t.Errorf("%s (%s): Warning %q, want none", c.path, c.accept, w)
		}
	}
}
