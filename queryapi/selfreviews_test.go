package queryapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
)

func postJSON(t *testing.T, url, token string, body any) (int, []byte) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	_, _ = out.ReadFrom(resp.Body)
	return resp.StatusCode, out.Bytes()
}

// TestSelfSubjectAccessReview: the read-only facade answers `kubectl auth can-i` (and k9s, which
// reads a refused review as "nothing allowed"): yes for what the subject may read in the view, no
// for every write whatever it may do in the member, and the same answer for a hidden cluster as
// for one that does not exist.
func TestSelfSubjectAccessReview(t *testing.T) {
	url, _ := tenantWorld(t, true, tenantPolicy)
	ask := func(view, token string, ra *authorizationv1.ResourceAttributes, na *authorizationv1.NonResourceAttributes) authorizationv1.SubjectAccessReviewStatus {
		t.Helper()
		code, body := postJSON(t, url+view+"/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", token,
			authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: ra, NonResourceAttributes: na}})
		if code != http.StatusCreated {
			t.Fatalf("review in %q: %d %s", view, code, body)
		}
		var rev authorizationv1.SelfSubjectAccessReview
		if err := json.Unmarshal(body, &rev); err != nil || rev.Kind != "SelfSubjectAccessReview" {
			t.Fatalf("review in %q: %v %s", view, err, body)
		}
		return rev.Status
	}
	pods := func(verb, ns string) *authorizationv1.ResourceAttributes {
		return &authorizationv1.ResourceAttributes{Verb: verb, Resource: "pods", Namespace: ns}
	}
	for _, c := range []struct {
		what, view, token string
		ra                *authorizationv1.ResourceAttributes
		na                *authorizationv1.NonResourceAttributes
		allowed, denied   bool
	}{
		{"alice lists pods in shop, fleet view", "", "alice-token", pods("list", "shop"), nil, true, false},
		{"alice watches pods in shop of member1", "/clusters/member1", "alice-token", pods("watch", "shop"), nil, true, false},
		{"alice in another namespace", "", "alice-token", pods("list", "kube-system"), nil, false, false},
		{"alice in member2, which she cannot see", "/clusters/member2", "alice-token", pods("get", "shop"), nil, false, false},
		{"alice in a cluster that does not exist", "/clusters/member9", "alice-token", pods("get", "shop"), nil, false, false},
		{"alice deletes pods", "", "alice-token", pods("delete", "shop"), nil, false, true},
		{"admin deletes pods: read-only", "", "admin-token", pods("delete", "shop"), nil, false, true},
		{"admin lists pods everywhere", "", "admin-token", pods("list", ""), nil, true, false},
		{"alice reads logs: not cached", "", "alice-token", &authorizationv1.ResourceAttributes{Verb: "get", Resource: "pods", Subresource: "log", Namespace: "shop"}, nil, false, false},
		{"alice gets discovery", "", "alice-token", nil, &authorizationv1.NonResourceAttributes{Verb: "get", Path: "/apis"}, true, false},
		{"alice gets /metrics", "", "alice-token", nil, &authorizationv1.NonResourceAttributes{Verb: "get", Path: "/metrics"}, false, false},
		{"prometheus gets /metrics", "", "prometheus-token", nil, &authorizationv1.NonResourceAttributes{Verb: "get", Path: "/metrics"}, true, false},
	} {
		st := ask(c.view, c.token, c.ra, c.na)
		if st.Allowed != c.allowed || st.Denied != c.denied {
			t.Errorf("%s: allowed %v denied %v (%q), want %v %v", c.what, st.Allowed, st.Denied, st.Reason, c.allowed, c.denied)
		}
	}
	// Neither or both attributes: 422, as kube-apiserver answers.
	if code, body := postJSON(t, url+"/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", "alice-token",
		authorizationv1.SelfSubjectAccessReview{}); code != http.StatusUnprocessableEntity {
		t.Errorf("a review without attributes: %d %s", code, body)
	}
	// Unauthenticated: 401 like every request.
	if code, _ := postJSON(t, url+"/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", "wrong",
		authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: pods("list", "")}}); code != http.StatusUnauthorized {
		t.Errorf("a review with a bad token: %d", code)
	}
	// Every other POST is still refused as a write.
	if code, _ := postJSON(t, url+"/api/v1/namespaces/shop/pods", "admin-token", map[string]any{}); code != http.StatusMethodNotAllowed {
		t.Errorf("POST pods: %d, want 405", code)
	}
}

// TestSelfSubjectRulesReviewAndWhoami: `kubectl auth can-i --list` lists the read verbs per
// resource the subject may see, and `kubectl auth whoami` names the user.
func TestSelfSubjectRulesReviewAndWhoami(t *testing.T) {
	url, _ := tenantWorld(t, true, tenantPolicy)
	code, body := postJSON(t, url+"/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", "alice-token",
		authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "shop"}})
	if code != http.StatusCreated {
		t.Fatalf("rules review: %d %s", code, body)
	}
	var rules authorizationv1.SelfSubjectRulesReview
	if err := json.Unmarshal(body, &rules); err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, r := range rules.Status.ResourceRules {
		got[r.APIGroups[0]+"/"+r.Resources[0]] = r.Verbs
	}
	if len(got) != 2 || len(got["/pods"]) != 3 || len(got["example.com/widgets"]) != 3 {
		t.Errorf("alice's rules in shop: %v, want get, list, watch on pods and widgets", got)
	}
	code, body = postJSON(t, url+"/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", "alice-token",
		authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "kube-system"}})
	if err := json.Unmarshal(body, &rules); code != http.StatusCreated || err != nil || len(rules.Status.ResourceRules) != 0 {
		t.Errorf("alice's rules in kube-system: %d %s", code, body)
	}
	code, body = postJSON(t, url+"/apis/authentication.k8s.io/v1/selfsubjectreviews", "alice-token", authenticationv1.SelfSubjectReview{})
	var who authenticationv1.SelfSubjectReview
	if err := json.Unmarshal(body, &who); code != http.StatusCreated || err != nil || who.Status.UserInfo.Username != "alice" || who.Status.UserInfo.UID != "u1" {
		t.Errorf("whoami: %d %s", code, body)
	}
}

// TestSubresourcesNotServedWhateverTheMethod: kubectl exec, attach, cp and port-forward get the
// subresource's "not served, ask the member" for their SPDY POST too, not the write refusal.
func TestSubresourcesNotServedWhateverTheMethod(t *testing.T) {
	url, _ := tenantWorld(t, true, tenantPolicy)
	for _, sub := range []string{"exec", "attach", "portforward", "eviction"} {
		code, body := postJSON(t, url+"/clusters/member1/api/v1/namespaces/shop/pods/web-1/"+sub, "admin-token", map[string]any{})
		if code != http.StatusNotFound || !bytes.Contains(body, []byte("ask the member cluster")) {
			t.Errorf("POST pods/web-1/%s: %d %s, want 404 saying it is not served", sub, code, body)
		}
	}
	// A subject that may not read the pods gets 403, as for a GET: nothing said of what exists.
	if code, body := postJSON(t, url+"/clusters/member2/api/v1/namespaces/shop/pods/web-1/exec", "alice-token", map[string]any{}); code != http.StatusForbidden {
		t.Errorf("alice's POST exec in member2: %d %s, want 403", code, body)
	}
}

// TestLivez: kube-apiserver's liveness path, unauthenticated like /healthz.
func TestLivez(t *testing.T) {
	url, _ := tenantWorld(t, false, tenantPolicy)
	resp, err := http.Get(url + "/livez")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /livez without credentials: %d", resp.StatusCode)
	}
}
