package queryapi

import (
	"strings"
	"testing"
)

// TestFleetListWarnsOfRepeatedNames: informers and controller-runtime key objects by namespace
// and name, so a fleet list whose page holds one name from two clusters is merged by them without a
// word; the page says so, pointing at the qualified view. Tables (kubectl get, with its CLUSTER
// column), the qualified and one-cluster views, and pages without repeats carry no such Warning.
func TestFleetListWarnsOfRepeatedNames(t *testing.T) {
	srv := newFacadeServer(t, &fakeStore{objects: fleetObjects()})
	warned := func(path, accept string) string {
		t.Helper()
		code, h, body := fetch(t, "GET", srv.URL+path, accept)
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
	if w := warned("/api/v1/namespaces/shop/pods?limit=500", ""); !strings.Contains(w, "shop/web-0000 in member1 and member2") || !strings.Contains(w, ContextQualified) {
		t.Errorf("a fleet page with web-0000 of both members: Warning %q", w)
	}
	for _, c := range []struct{ path, accept string }{
		{"/api/v1/namespaces/shop/pods?limit=500", "application/json;as=Table;v=v1;g=meta.k8s.io"},
		{"/qualified/api/v1/namespaces/shop/pods?limit=500", ""},
		{"/clusters/member1/api/v1/namespaces/shop/pods?limit=500", ""},
		{"/api/v1/namespaces/web/pods", ""}, // only member2 has it
	} {
		if w := warned(c.path, c.accept); w != "" {
			t.Errorf("%s (%s): Warning %q, want none", c.path, c.accept, w)
		}
	}
}
