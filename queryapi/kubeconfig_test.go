package queryapi

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
)

// TestKubeconfigSaysWhichView: what a user sees of the generated kubeconfig (kubectl config view)
// tells the fleet context's merging of names, and each context's view; kubectl loads it.
func TestKubeconfigSaysWhichView(t *testing.T) {
	out, err := clientcmd.Write(*Kubeconfig(KubeconfigOptions{Server: "https://kubesearch.example.com/"}, []string{"member1"}))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(out)
	if err != nil {
		t.Fatalf("load:\n%s\n%v", out, err)
	}
	for ctx, want := range map[string]string{
		ContextFleet:                     `"view":"fleet"`,
		ContextQualified:                 `"view":"qualified"`,
		ContextClusterPrefix + "member1": `"cluster":"member1"`,
	} {
		c := cfg.Contexts[ctx]
		if c == nil {
			t.Fatalf("no context %s:\n%s", ctx, out)
		}
		u, ok := c.Extensions[ViewExtension].(*runtime.Unknown)
		if !ok || !strings.Contains(string(u.Raw), want) {
			t.Errorf("context %s: extension %v, want %s", ctx, c.Extensions, want)
		}
	}
	if u := cfg.Contexts[ContextFleet].Extensions[ViewExtension].(*runtime.Unknown); !strings.Contains(string(u.Raw), "merge them: point those at context "+ContextQualified) {
		t.Errorf("the fleet context does not warn of merged names: %s", u.Raw)
	}
	if cfg.CurrentContext != ContextFleet || cfg.Clusters[ContextQualified].Server != "https://kubesearch.example.com/qualified" {
		t.Errorf("kubeconfig:\n%s", out)
	}
}
