package collector

import (
	"log/slog"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/kubesearch/kubesearch/internal/registry"
)

// TestSameClusterWarning: two members whose kube-system namespaces have one uid (one cluster
// registered under two names) are named in a warning; a third, another cluster, is not; a member
// whose namespace cannot be read is never named.
func TestSameClusterWarning(t *testing.T) {
	c := &Collector{log: slog.New(slog.DiscardHandler)}
	mk := func(name string, kubeSystemUID string) *member {
		var objs []runtime.Object
		if kubeSystemUID != "" {
			ns := &unstructured.Unstructured{}
			ns.SetAPIVersion("v1")
			ns.SetKind("Namespace")
			ns.SetName("kube-system")
			ns.SetUID(types.UID(kubeSystemUID))
			objs = append(objs, ns)
		}
		return &member{cluster: registry.Cluster{Name: name}, c: c, log: c.log, dynamic: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), objs...)}
	}
	c.view = []*member{mk("member1", "ks-1"), mk("member2", "ks-2"), mk("member1-copy", "ks-1"), mk("locked", "")}
	for _, m := range c.view {
		m.readIdentity(t.Context())
	}
	if len(c.warned) != 1 {
		t.Errorf("logged %v; want the one group once", c.warned)
	}
	got := c.Warnings()
	if len(got) != 1 || !strings.HasPrefix(got[0], "member1 and member1-copy look like the same cluster: kube-system uid ks-1; every object is indexed under each name") {
		t.Fatalf("warnings %q; want one naming member1 and member1-copy", got)
	}
	c.view = c.view[:2]
	if got := c.Warnings(); len(got) != 0 {
		t.Errorf("after member1-copy left: warnings %q; want none", got)
	}
}
