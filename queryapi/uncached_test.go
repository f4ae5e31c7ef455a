package queryapi

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// TestUncachedBuiltinLists: tools that list fixed kinds with typed clients (kubectl cluster-info
// dump) get an empty list, with a Warning that nothing is collected, for a built-in kind the view
// does not cache, and the namespaces holding cached objects for uncached Namespaces; a GET or a
// WATCH of such a kind, and a kind Kubernetes does not define, stay 404.
func TestUncachedBuiltinLists(t *testing.T) {
	srv := newFacadeServer(t, &fakeStore{objects: fleetObjects()})
	warning := func(h []string) string { return strings.Join(h, "\n") }
	for _, c := range []struct{ path, kind, apiVersion string }{
		{"/api/v1/services", "ServiceList", "v1"},
		{"/api/v1/namespaces/shop/replicationcontrollers", "ReplicationControllerList", "v1"},
		{"/apis/apps/v1/namespaces/shop/daemonsets", "DaemonSetList", "apps/v1"},
		{"/clusters/member2/apis/apps/v1/deployments", "DeploymentList", "apps/v1"}, // member1 caches them, member2 not
		{"/qualified/apis/batch/v1/jobs", "JobList", "batch/v1"},
	} {
		code, h, body := fetch(t, "GET", srv.URL+c.path, "")
		if code != 200 || gjson.GetBytes(body, "kind").Str != c.kind || gjson.GetBytes(body, "apiVersion").Str != c.apiVersion ||
			gjson.GetBytes(body, "items").Raw != "[]" || !strings.Contains(warning(h.Values("Warning")), "this list is empty because nothing is collected") {
			t.Errorf("%s: %d %v %s", c.path, code, h.Values("Warning"), body)
		}
	}
	for path, want := range map[string]string{
		"/api/v1/namespaces":                  `["shop","web"]`,
		"/clusters/member1/api/v1/namespaces": `["shop"]`,
		"/api/v1/namespaces?fieldSelector=metadata.name%3Dweb,status.phase%3DActive": `["web"]`,
		"/api/v1/namespaces?labelSelector=team":                                      `[]`,
	} {
		code, h, body := fetch(t, "GET", srv.URL+path, "")
		if code != 200 || gjson.GetBytes(body, "items.#.metadata.name").Raw != want || gjson.GetBytes(body, "kind").Str != "NamespaceList" ||
			!strings.Contains(warning(h.Values("Warning")), "the namespaces holding cached objects") {
			t.Errorf("%s: %d %v %s, want %s", path, code, h.Values("Warning"), body, want)
		}
	}
	code, _, body := fetch(t, "GET", srv.URL+"/api/v1/services", "application/json;as=Table;v=v1;g=meta.k8s.io")
	if code != 200 || gjson.GetBytes(body, "kind").Str != "Table" || gjson.GetBytes(body, "columnDefinitions.1.name").Str != "Name" {
		t.Errorf("Table of uncached services: %d %s", code, body)
	}
	for _, path := range []string{
		"/api/v1/namespaces/shop/services/web", "/api/v1/services?watch=1", "/apis/example.com/v1/gizmos",
		"/api/v1/namespaces/shop/nodes", "/api/v1/namespaces/shop/pods/web-0000/log",
	} {
		if code, _, body := fetch(t, "GET", srv.URL+path, ""); code != 404 {
			t.Errorf("%s: %d %s, want 404", path, code, body)
		}
	}
}
