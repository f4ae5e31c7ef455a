package authz

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writePolicy(t *testing.T, path, namespace string) {
	t.Helper()
	policy := `rules:
- subjects: [{kind: User, name: alice}]
  clusters: [member1]
  namespaces: [` + namespace + `]
  resources: [pods]
  verbs: [list]
`
	if err := os.WriteFile(path, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A changed policy file takes effect once the reload interval passed; a bad one keeps the
// policy read last.
func TestAuthorizerReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	writePolicy(t, path, "shop")
	a, err := New(Options{PolicyFile: path, ReloadInterval: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	a.now = func() time.Time { return now }
	sees := func(ns string) bool { return a.Policy().Allowed(alice, VerbList, "member1", ns, "", "pods") }
	if !sees("shop") || sees("web") {
		t.Fatal("the first policy is not in force")
	}

	writePolicy(t, path, "web, kube-public")
	if !sees("shop") {
		t.Fatal("the file was checked again before the interval passed")
	}
	now = now.Add(6 * time.Second)
	if sees("shop") || !sees("web") {
		t.Fatal("the changed policy is not in force after the interval")
	}

	// A bad file: the last good policy stays.
	if err := os.WriteFile(path, []byte("rules:\n- verb: [get]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	now = now.Add(6 * time.Second)
	if !sees("web") {
		t.Fatal("a bad file replaced the policy")
	}
	if err := a.Reload(); err == nil || !strings.Contains(err.Error(), "rules[0].verb: unknown field") {
		t.Fatalf("Reload of a bad file: %v", err)
	}
	if !sees("web") {
		t.Fatal("a bad file replaced the policy")
	}

	// The same size, another namespace: seen by the modification time.
	writePolicy(t, path, "api, kube-public")
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	now = now.Add(6 * time.Second)
	if sees("web") || !sees("api") {
		t.Fatal("the fixed policy is not in force")
	}
}

func TestNewErrorsNameTheFlag(t *testing.T) {
	if _, err := New(Options{}); err == nil || !strings.Contains(err.Error(), "--authorization-policy-file: required") {
		t.Errorf("no file: %v", err)
	}
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte("rules:\n- subjects: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := New(Options{PolicyFile: path})
	if err == nil || !strings.HasPrefix(err.Error(), "--authorization-policy-file: policy file "+path+": rules[0]") {
		t.Errorf("bad file: %v", err)
	}
}
