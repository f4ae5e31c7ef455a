package queryapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kubesearch/kubesearch/internal/authz"
)

// fakeAccessReview is a SubjectAccessReview API allowing the users of allowed every read of
// pods, cluster-wide, and nothing else; it counts the reviews it is asked.
func fakeAccessReview(t *testing.T, allowed ...string) (url string, reviews *atomic.Int64) {
	t.Helper()
	reviews = &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reviews.Add(1)
		body, _ := io.ReadAll(r.Body)
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
		sar, ok := obj.(*authorizationv1.SubjectAccessReview)
		if err != nil || !ok || sar.Spec.ResourceAttributes == nil {
			http.Error(w, fmt.Sprintf("not a SubjectAccessReview: %v", err), http.StatusBadRequest)
			return
		}
		for _, u := range allowed {
			sar.Status.Allowed = sar.Status.Allowed || (sar.Spec.User == u && sar.Spec.ResourceAttributes.Resource == "pods")
		}
		sar.APIVersion, sar.Kind = "authorization.k8s.io/v1", "SubjectAccessReview"
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(sar)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, reviews
}

// reviewedServer is a bounded facade in the SubjectAccessReview mode, member1 and member2 both
// answered by the API at url.
func reviewedServer(t *testing.T, url string, o authz.ReviewOptions) *Server {
	t.Helper()
	o.Kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	kc := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: %q}}]\nusers: [{name: u, user: {token: reviewer}}]\n"+
		"contexts: [{name: member1, context: {cluster: c, user: u}}, {name: member2, context: {cluster: c, user: u}}]\ncurrent-context: member1\n", url)
	if err := os.WriteFile(o.Kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	reviewer, err := authz.NewReviewer(o)
	if err != nil {
		t.Fatal(err)
	}
	st := &fakeStore{objects: []fakeObject{{cluster: "member1", resource: "pods", namespace: "shop", name: "web-1", rv: 400}}}
	s := boundedServer(t, st, Options{}, tokenAuth(t, "", "alice-token,alice,1", "bob-token,bob,2"))
	s.reviewer, s.inv = reviewer, newInventory(s.catalog, st)
	return s
}

// A request whose SubjectAccessReviews its subject may not all ask now is a 429 with
// Retry-After: never the 403, or the fewer objects, its partial answers would make, which would
// depend on the members and namespaces the subject cannot see.
func TestIncompleteReviewsAreRetried(t *testing.T) {
	url, reviews := fakeAccessReview(t, "alice")
	// A burst of 2, never refilled: bob's request needs more (every resource of member1 is
	// denied to him, so each is asked).
	s := reviewedServer(t, url, authz.ReviewOptions{RatePerSubject: 0.001, BurstPerSubject: 2})
	w := boundRequest(t, s, "192.0.2.1:1000", "/clusters/member1/api/v1/namespaces/shop/pods", "bob-token")
	checkTooMany(t, w, "bob past his reviews")
	if w.Header().Get("Retry-After") == "" {
		t.Error("the 429 has no Retry-After")
	}
	if n := reviews.Load(); n != 2 {
		t.Errorf("%d reviews asked for bob, want his burst, 2", n)
	}
	if n := testutil.ToFloat64(s.limits.refused.WithLabelValues(boundSubjectReviews)); n != 1 {
		t.Errorf("refusals counted for %s: %v, want 1", boundSubjectReviews, n)
	}

	// Within the bounds the member's answer is the answer: alice's allow, bob's deny.
	s = reviewedServer(t, url, authz.ReviewOptions{RatePerSubject: authz.DefaultRatePerSubject, BurstPerSubject: authz.DefaultBurstPerSubject})
	if w := boundRequest(t, s, "192.0.2.1:1000", "/clusters/member1/api/v1/namespaces/shop/pods", "alice-token"); w.Code != http.StatusOK {
		t.Errorf("alice: %d %s, want 200", w.Code, w.Body)
	}
	if w := boundRequest(t, s, "192.0.2.1:1000", "/clusters/member1/api/v1/namespaces/shop/pods", "bob-token"); w.Code != http.StatusForbidden {
		t.Errorf("bob: %d %s, want 403", w.Code, w.Body)
	}
}
