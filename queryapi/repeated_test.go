package queryapi

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/kubesearch/kubesearch/internal/envelope"
)

// TestFleetListWarnsOfRepeatedNames: informers and controller-runtime key objects by namespace
// and name, so a fleet list whose page holds one name from two clusters is merged by them without a
// word; the page says so, pointing at the qualified view. Tables (kubectl get, with its CLUSTER
// column), the qualified and one-cluster views, and pages without repeats carry no such Warning.
func TestFleetListWarnsOfRepeatedNames(t *testing.T) {
	srv := newFacadeServer(t, &fakeStore{objects: fleetObjects()})
	warned := func(path, accept string) string { return repeatWarning(t, srv.URL+path, accept) }
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

// TestFleetWatchWarnsOfRepeatedNames: a streaming list (client-go's default since 1.35) sends no
// LIST, so the watch that carries its initial events says what the LIST would have said; a
// watch resumed from a resourceVersion (its client listed first, and was told then) and the
// qualified view say nothing.
func TestFleetWatchWarnsOfRepeatedNames(t *testing.T) {
	url, s := newFacadeServerWithCache(t, &fakeStore{objects: fleetObjects()})
	// The stream is where the index's watermarks are (500 and 700).
	for cl, rv := range map[string]int{"member1": 500, "member2": 700} {
		obj := fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"seed","namespace":"shop","uid":"uid-seed-%s","resourceVersion":"%d"}}`, cl, rv)
		cacheOf(s).Apply(&envelope.Event{V: envelope.Version, Type: envelope.Added, Cluster: cl, Version: "v1", Resource: "pods", Kind: "Pod",
			Namespace: "shop", Name: "seed", UID: "uid-seed-" + cl, ResourceVersion: fmt.Sprint(rv), Epoch: 1, Object: json.RawMessage(obj)})
	}
	warned := func(path string) string { return repeatWarning(t, url+path, "") }
	const streaming = "?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1"
	for _, path := range []string{"/api/v1/namespaces/shop/pods" + streaming, "/api/v1/pods?watch=1&timeoutSeconds=1"} {
		if w := warned(path); !strings.Contains(w, "watch's initial events (shop/web-0000 in member1 and member2)") || !strings.Contains(w, ContextQualified) {
			t.Errorf("%s: Warning %q", path, w)
		}
	}
	for _, path := range []string{
		"/qualified/api/v1/namespaces/shop/pods" + streaming,
		"/api/v1/namespaces/web/pods" + streaming, // only member2 has it
		"/api/v1/namespaces/shop/pods?watch=1&timeoutSeconds=1&resourceVersion=" + rvVector{"member1": 500, "member2": 700}.encode(view{}),
	} {
		if w := warned(path); w != "" {
			t.Errorf("%s: Warning %q, want none", path, w)
		}
	}
}

// repeatWarning is the Warning of names repeated across clusters of a GET of url, "" if none.
func repeatWarning(t *testing.T, url, accept string) string {
	t.Helper()
	code, h, body := fetch(t, "GET", url, accept)
	if code != 200 {
		t.Fatalf("%s: %d %s", url, code, body)
	}
	for _, w := range h.Values("Warning") {
		if strings.Contains(w, "names repeat across clusters") {
			return w
		}
	}
	return ""
}
