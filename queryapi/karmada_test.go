package queryapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// TestKarmadaProxyIsTheFleetView: Karmada's proxy path answers every request as the fleet view
// at the root does, byte for byte: lists (the fleet's multi-cluster resourceVersion, written here,
// without positions sealed, as Karmada writes it), a GET, the 409 of a name in two clusters,
// discovery and errors.
func TestKarmadaProxyIsTheFleetView(t *testing.T) {
	srv := newFacadeServer(t, &fakeStore{objects: fleetObjects()})
	for _, accept := range []string{"application/json;as=Table;g=meta.k8s.io;v=v1", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"} {
		for _, p := range []string{"/api/v1/namespaces/shop/pods?limit=3", "/api"} {
			code, _, want := fetch(t, "GET", srv.URL+p, accept)
			got, _, body := fetch(t, "GET", srv.URL+KarmadaProxyPath+p, accept)
			if got != code || string(body) != string(want) {
				t.Errorf("%s (%s) through Karmada's proxy: %d %s\nthe facade: %d %s", p, accept, got, body, code, want)
			}
		}
	}
	for _, p := range []string{
		"/api/v1/pods?limit=5",
		"/api/v1/namespaces/shop/pods?limit=3&labelSelector=app.kubernetes.io/name%3Dweb",
		"/api/v1/namespaces/web/pods/only-here",
		"/api/v1/namespaces/shop/pods/web-0001",
		"/api/v1/namespaces/shop/pods?fieldSelector=spec.nodNames%3Dx",
		"/api/v1",
		"/apis/apps/v1",
		"/api/v1/namespaces/shop/pods/web-0001/exec",
	} {
		code, _, want := fetch(t, "GET", srv.URL+p, "")
		got, _, body := fetch(t, "GET", srv.URL+KarmadaProxyPath+p, "")
		if got != code || string(body) != string(want) {
			t.Errorf("%s through Karmada's proxy: %d %s\nthe facade: %d %s", p, got, body, code, want)
		}
	}
	// The answers Karmada's clients rely on, checked on their own too.
	code, _, body := fetch(t, "GET", srv.URL+KarmadaProxyPath+"/api/v1/namespaces/shop/pods/web-0001", "")
	if code != http.StatusConflict || !strings.Contains(gjson.GetBytes(body, "message").Str, "member1, member2") {
		t.Errorf("a name in two clusters: %d %s", code, body)
	}
	code, _, body = fetch(t, "GET", srv.URL+KarmadaProxyPath+"/api/v1/namespaces/web/pods/only-here", "")
	if code != http.StatusOK || gjson.GetBytes(body, `metadata.annotations.resource\.karmada\.io/cached-from-cluster`).Str != "member2" {
		t.Errorf("a name in one cluster: %d %s", code, body)
	}
	_, _, body = fetch(t, "GET", srv.URL+KarmadaProxyPath+"/api/v1/pods?limit=5", "")
	if v, err := parseRV(gjson.GetBytes(body, "metadata.resourceVersion").Str, view{}); err != nil || v["member1"] == 0 || v["member2"] == 0 {
		t.Errorf("list resourceVersion %q: %v %v, want a vector of member1 and member2", gjson.GetBytes(body, "metadata.resourceVersion").Str, v, err)
	}
	// Any proxy name, as karmada-search ignores it.
	if code, _, body := fetch(t, "GET", srv.URL+"/apis/search.karmada.io/v1alpha1/proxying/other/proxy/api/v1/namespaces/web/pods/only-here", ""); code != http.StatusOK {
		t.Errorf("another proxy name: %d %s", code, body)
	}
	if code, _, body := fetch(t, "DELETE", srv.URL+KarmadaProxyPath+"/api/v1/namespaces/web/pods/only-here", ""); code != http.StatusMethodNotAllowed || gjson.GetBytes(body, "kind").Str != "Status" {
		t.Errorf("a write through the proxy: %d %s", code, body)
	}
}

// TestKarmadaCacheSearch: the cache search lists the fleet's objects; a name lists every
// member's object of that name (Karmada's answer), where the proxy answers 409.
func TestKarmadaCacheSearch(t *testing.T) {
	srv := newFacadeServer(t, &fakeStore{objects: fleetObjects()})
	code, _, body := fetch(t, "GET", srv.URL+KarmadaCachePath+"/api/v1/namespaces/shop/pods/web-0001", "")
	if code != http.StatusOK || gjson.GetBytes(body, "kind").Str != "PodList" ||
		gjson.GetBytes(body, `items.#.metadata.annotations.resource\.karmada\.io/cached-from-cluster`).String() != `["member1","member2"]` {
		t.Errorf("cache search of a name in two clusters: %d %s", code, body)
	}
	code, _, body = fetch(t, "GET", srv.URL+KarmadaCachePath+"/api/v1/pods?limit=2000&fieldSelector=metadata.namespace%3Dweb", "")
	if code != http.StatusOK || gjson.GetBytes(body, "items.#.metadata.name").String() != `["only-here"]` {
		t.Errorf("cache search with a field selector: %d %s", code, body)
	}
	code, _, body = fetch(t, "GET", srv.URL+KarmadaCachePath+"/api/v1/pods?limit=5", "")
	if code != http.StatusOK || gjson.GetBytes(body, "items.#").Int() != 5 {
		t.Errorf("cache search list: %d %s", code, body)
	}
	for _, c := range []struct {
		method, path string
		code         int
		says         string
	}{
		{"GET", KarmadaCachePath + "/api/v1/pods?watch=true", http.StatusBadRequest, "watch through " + KarmadaProxyPath + "/api/v1/pods"},
		{"GET", KarmadaCachePath + "/api/v1", http.StatusNotFound, "the cache search serves resources"},
		{"GET", KarmadaCachePath + "/api/v1/namespaces/shop/pods/web-0001/log", http.StatusNotFound, "the cache search serves resources"},
		{"GET", KarmadaCachePath + "/api/v1/namespaces/shop/pods/a,b", http.StatusOK, ""},
		{"GET", "/apis/search.karmada.io/v1alpha1/search/opensearch/api/v1/pods", http.StatusNotFound, "not Karmada's other search backends"},
		{"POST", KarmadaCachePath + "/api/v1/namespaces/shop/pods", http.StatusMethodNotAllowed, "read-only"},
	} {
		code, _, body := fetch(t, c.method, srv.URL+c.path, "")
		if code != c.code || gjson.GetBytes(body, "kind").Str != "Status" && code != http.StatusOK || !strings.Contains(gjson.GetBytes(body, "message").Str, c.says) {
			t.Errorf("%s %s: %d %s, want %d saying %q", c.method, c.path, code, body, c.code, c.says)
		}
	}
	// A name that is no name matches nothing (its commas do not split the selector).
	if _, _, body := fetch(t, "GET", srv.URL+KarmadaCachePath+"/api/v1/namespaces/shop/pods/web-0001,metadata.namespace=shop", ""); gjson.GetBytes(body, "items.#").Int() != 0 {
		t.Errorf("a name holding a selector: %s", body)
	}
}

// TestKarmadaDiscovery: the group is discovered at the root, as an aggregation layer and kubectl
// look for it, with the resources karmada-search lists; what kubesearch does not serve of it is
// a 404 Status saying so.
func TestKarmadaDiscovery(t *testing.T) {
	srv := newFacadeServer(t, &fakeStore{})
	code, _, body := fetch(t, "GET", srv.URL+"/apis/search.karmada.io/v1alpha1", "")
	if code != http.StatusOK || gjson.GetBytes(body, "kind").Str != "APIResourceList" || gjson.GetBytes(body, "groupVersion").Str != "search.karmada.io/v1alpha1" ||
		gjson.GetBytes(body, "resources.#.name").String() != `["proxying","resourceregistries","search"]` {
		t.Errorf("group version: %d %s", code, body)
	}
	code, _, body = fetch(t, "GET", srv.URL+"/apis/search.karmada.io", "")
	if code != http.StatusOK || gjson.GetBytes(body, "preferredVersion.groupVersion").Str != "search.karmada.io/v1alpha1" {
		t.Errorf("group: %d %s", code, body)
	}
	_, _, body = fetch(t, "GET", srv.URL+"/apis", "application/json")
	if gjson.GetBytes(body, `groups.#(name=="search.karmada.io").versions.0.version`).Str != "v1alpha1" {
		t.Errorf("legacy /apis: %s", body)
	}
	_, _, body = fetch(t, "GET", srv.URL+"/apis", aggregatedContentType)
	if got := gjson.GetBytes(body, `items.#(metadata.name=="search.karmada.io").versions.0.resources.#.resource`).String(); got != `["proxying","resourceregistries","search"]` {
		t.Errorf("aggregated /apis: %s", body)
	}
	// Only the root lists it: the views are the members' APIs.
	for _, p := range []string{"/clusters/member1/apis", "/qualified/apis", KarmadaProxyPath + "/apis"} {
		if _, _, body := fetch(t, "GET", srv.URL+p, ""); strings.Contains(string(body), "search.karmada.io") {
			t.Errorf("%s lists Karmada's group: %s", p, body)
		}
	}
	for _, c := range []struct{ path, says string }{
		{"/apis/search.karmada.io/v1alpha1/resourceregistries", "does not serve ResourceRegistry objects"},
		{"/apis/search.karmada.io/v1beta1", "serves /apis/search.karmada.io/v1alpha1"},
		{"/apis/search.karmada.io/v1alpha1/proxying", "not a path of Karmada's search API"},
		{KarmadaProxyPath, "could not find the requested resource"},
	} {
		code, _, body := fetch(t, "GET", srv.URL+c.path, "")
		if code != http.StatusNotFound || gjson.GetBytes(body, "kind").Str != "Status" || !strings.Contains(gjson.GetBytes(body, "message").Str, c.says) {
			t.Errorf("%s: %d %s, want a 404 Status saying %q", c.path, code, body, c.says)
		}
	}
}

// TestKarmadaProxyAuthorizesAsTheFacade: a restricted subject gets through Karmada's proxy
// exactly what the facade gives it, 403s included.
func TestKarmadaProxyAuthorizesAsTheFacade(t *testing.T) {
	url, _ := tenantWorld(t, true, tenantPolicy)
	for _, p := range []string{
		"/api/v1/pods?resourceVersion=0",
		"/api/v1/namespaces/shop/pods/web-1",
		"/api/v1/namespaces/kube-system/pods",
		"/apis/apps/v1/deployments",
		"/api",
	} {
		code, head, want := ask(t, url+p, "alice-token", "")
		gotCode, gotHead, got := ask(t, url+KarmadaProxyPath+p, "alice-token", "")
		if gotCode != code || gotHead != head || got != want {
			t.Errorf("alice's %s through Karmada's proxy: %d %s %s\nthe facade: %d %s %s", p, gotCode, gotHead, got, code, head, want)
		}
	}
	// OpenAPI links carry the proxy's path, as the views' carry theirs: clients strip their server
	// URL's path from them.
	code, _, body := ask(t, url+KarmadaProxyPath+"/openapi/v3", "alice-token", "")
	if rel := gjson.Get(body, `paths.api/v1.serverRelativeURL`).Str; code != http.StatusOK || !strings.HasPrefix(rel, KarmadaProxyPath+"/openapi/v3/api/v1?hash=") {
		t.Errorf("alice's OpenAPI index through the proxy: %d %s", code, body)
	}
	code, _, body = ask(t, url+KarmadaCachePath+"/api/v1/pods?resourceVersion=0", "alice-token", "")
	if code != http.StatusOK || gjson.Get(body, `items.#.metadata.annotations.resource\.karmada\.io/cached-from-cluster`).String() != `["member1","member1","member1"]` {
		t.Errorf("alice's cache search: %d %s", code, body)
	}
	if code, _, body := ask(t, url+KarmadaCachePath+"/api/v1/namespaces/kube-system/pods", "alice-token", ""); code != http.StatusForbidden {
		t.Errorf("alice's cache search outside her scope: %d %s", code, body)
	}
}
