//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/internal/registry"
	"github.com/kubesearch/kubesearch/internal/stream"
	"github.com/kubesearch/kubesearch/tests/testbed"
)

// The facade serves the members' OpenAPI v3 documents, relayed by the collector through the ledger:
// kubectl explain prints through every view what it prints against a member, and custom columns
// read fields of the objects.
func TestFacadeOpenAPI(t *testing.T) {
	env := testbed.Get(t)
	f := seedFleet(t, env)
	waitRolledOut(t, env, f.shop)
	p := startQueryPipeline(t, env, f.registries(t))
	k := newFacadeKubectl(t, env, p.base)

	want := []string{"api/v1", "apis/apps/v1", "apis/example.com/v1"}
	pollUntil(t, "the cached group-versions in the facade's /openapi/v3", 2*time.Minute, func(ctx context.Context) (bool, error) {
		paths, err := openAPIPaths(ctx, p.base+"/openapi/v3")
		return err == nil && slices.Equal(paths, want), nil
	})
	logLedgerSizes(t, env, p.topic)

	t.Run("index of a one-cluster view", func(t *testing.T) {
		paths, err := openAPIIndex(t.Context(), p.base+"/clusters/member2/openapi/v3")
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range want {
			if u := paths[path]; !strings.HasPrefix(u, "/clusters/member2/openapi/v3/"+path+"?hash=") {
				t.Errorf("%s: serverRelativeURL %q", path, u)
			}
		}
	})

	for _, kctx := range []string{"kubesearch", "kubesearch-member2", "kubesearch-qualified"} {
		for _, args := range [][]string{
			{"explain", "pods.spec.containers"},
			{"explain", "deployments.spec.replicas"},
			{"explain", "widgets"},
			{"explain", "deployment.spec.template.spec", "--recursive"},
		} {
			t.Run(kctx+" "+strings.Join(args, " "), func(t *testing.T) {
				memberOut := string(env.KubectlRun(t, "member2", nil, args...))
				out := k.mustRun(t, append([]string{"--context", kctx}, args...)...)
				if out != memberOut {
					t.Errorf("through the facade:\n%s\nagainst member2:\n%s", out, memberOut)
				}
			})
		}
	}

	t.Run("custom columns", func(t *testing.T) {
		cols := []string{"get", "pods", "-n", f.shop, "-o", "custom-columns=NAME:.metadata.name,IMAGE:.spec.containers[0].image", "--no-headers"}
		var want []string
		for _, c := range env.Clusters {
			memberRows := joinRows(rows(string(env.KubectlRun(t, c, nil, cols...))))
			if c == "member3" {
				got := joinRows(rows(k.mustRun(t, append([]string{"--context", "kubesearch-member3"}, cols...)...)))
				if !slices.Equal(got, memberRows) {
					t.Errorf("member3's view:\n%s\nthe member:\n%s", strings.Join(got, "\n"), strings.Join(memberRows, "\n"))
				}
			}
			want = append(want, memberRows...)
		}
		slices.Sort(want)
		got := joinRows(rows(k.mustRun(t, cols...)))
		if !slices.Equal(got, want) || len(got) == 0 {
			t.Errorf("the fleet:\n%s\nthe members:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		for _, r := range got {
			if !strings.HasSuffix(r, " nginx:1.27") {
				t.Errorf("row %q: want the first container's image nginx:1.27", r)
			}
		}
	})

	t.Run("v2 is not served", func(t *testing.T) {
		resp, err := http.Get(p.base + "/openapi/v2")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "/openapi/v3") {
			t.Errorf("/openapi/v2: %d %s", resp.StatusCode, body)
		}
	})
}

// openAPIIndex reads an /openapi/v3 index: serverRelativeURL by path.
func openAPIIndex(ctx context.Context, url string) (map[string]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var index struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&index); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for p, gv := range index.Paths {
		out[p] = gv.ServerRelativeURL
	}
	return out, nil
}

func openAPIPaths(ctx context.Context, url string) ([]string, error) {
	index, err := openAPIIndex(ctx, url)
	if err != nil {
		return nil, err
	}
	var out []string
	for p := range index {
		out = append(out, p)
	}
	slices.Sort(out)
	return out, nil
}

// logLedgerSizes logs the size of each OpenAPI record in the pipeline's ledger.
func logLedgerSizes(t *testing.T, env *testbed.Env, topic string) {
	t.Helper()
	client := stream.NewClient(env.KafkaBrokers, stream.Connection{}, nil)
	defer client.Close()
	msgs, err := client.ReadPartition(t.Context(), registry.LedgerTopic(topic), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if _, _, ok := registry.ParseOpenAPIRecordKey(string(m.Key)); ok {
			t.Logf("ledger record %s at offset %d: %d bytes", m.Key, m.Offset, len(m.Value))
		}
	}
}
