//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/tests/testbed"
)

// testFacadeEvents: a member's Events are served in both API groups whichever one a registry
// selects (issue 24 item 4): with core v1 Events selected, `kubectl get events.v1.events.k8s.io`
// (k9s' group), a watch and field selectors of that group show an Event created in a member, as the
// member itself converts it; `kubectl events` and `kubectl describe pod` (the core group) too. Then
// the registry selects events.k8s.io instead, and `kubectl describe pod` and `kubectl events`
// still show it, converted back.
func testFacadeEvents(t *testing.T, env *testbed.Env, f fleet, p *queryPipeline, k *facadeKubectl) {
	reg := filepath.Join(p.registries, "events.yaml")
	selectEvents := func(apiVersion string) {
		t.Helper()
		writeFile(t, reg, fmt.Sprintf(`apiVersion: search.karmada.io/v1alpha1
kind: ResourceRegistry
metadata: {name: fleet-events}
spec:
  resourceSelectors:
  - {apiVersion: %s, kind: Event, namespace: %s}
`, apiVersion, f.shop))
	}
	defer func() {
		_ = os.Remove(reg)
		pollUntil(t, "events leave the facade", 2*time.Minute, func(ctx context.Context) (bool, error) {
			return !facadeDiscovers(p.base, "/api/v1", "events") && !facadeDiscovers(p.base, "/apis/events.k8s.io/v1", "events"), nil
		})
	}()
	selectEvents("v1")

	pod := strings.TrimSpace(string(env.KubectlRun(t, "member1", nil, "get", "pods", "-n", f.shop, "-l", "app.kubernetes.io/name=web",
		"-o", "jsonpath={.items[0].metadata.name}")))
	podUID := string(env.KubectlRun(t, "member1", nil, "get", "pod", pod, "-n", f.shop, "-o", "jsonpath={.metadata.uid}"))
	event := func(name, message string) []byte {
		now := time.Now().UTC().Format(time.RFC3339)
		return fmt.Appendf(nil, `apiVersion: v1
kind: Event
metadata: {name: %s, namespace: %s}
involvedObject: {kind: Pod, apiVersion: v1, name: %s, namespace: %s, uid: %s}
reason: KubesearchGroups
message: %q
type: Warning
count: 3
firstTimestamp: %s
lastTimestamp: %s
source: {component: kubesearch-e2e, host: node-e2e}
reportingComponent: kubesearch-e2e
reportingInstance: node-e2e
`, name, f.shop, pod, f.shop, podUID, message, now, now)
	}
	message := "probe of " + pod + " in both groups"
	env.KubectlRun(t, "member1", event("probe-groups-1", message), "create", "-f", "-")

	t.Run("discovery lists both groups", func(t *testing.T) {
		pollUntil(t, "events in both groups' discovery", 2*time.Minute, func(ctx context.Context) (bool, error) {
			return facadeDiscovers(p.base, "/api/v1", "events") && facadeDiscovers(p.base, "/apis/events.k8s.io/v1", "events"), nil
		})
		out := k.mustRun(t, "api-resources", "--no-headers")
		for _, want := range []string{"events ev v1 true Event", "events ev events.k8s.io/v1 true Event"} {
			if !strings.Contains(strings.Join(joinRows(rows(out)), "\n"), want) {
				t.Errorf("api-resources lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("core events selected: kubectl get events.v1.events.k8s.io", func(t *testing.T) {
		var out string
		pollUntil(t, "the event through events.k8s.io", 2*time.Minute, func(ctx context.Context) (bool, error) {
			out, _ = k.run(ctx, "get", "events.v1.events.k8s.io", "-A")
			return strings.Contains(out, message), nil
		})
		if !strings.Contains(out, "member1") || !strings.Contains(out, "pod/"+pod) || !strings.Contains(out, "KubesearchGroups") {
			t.Errorf("kubectl get events.v1.events.k8s.io -A:\n%s", out)
		}
		// The member converts its own Event into events.k8s.io: the facade's conversion says the same.
		viaFacade := decodeJSON(t, k.mustRun(t, "--context", "kubesearch-member1", "get", "events.v1.events.k8s.io", "probe-groups-1", "-n", f.shop, "-o", "json"))
		direct := decodeJSON(t, string(env.KubectlRun(t, "member1", nil, "get", "events.v1.events.k8s.io", "probe-groups-1", "-n", f.shop, "-o", "json")))
		for _, path := range []string{"apiVersion", "kind", "metadata.uid", "regarding", "note", "reason", "type", "deprecatedSource",
			"deprecatedCount", "deprecatedFirstTimestamp", "deprecatedLastTimestamp", "reportingController", "reportingInstance", "eventTime", "series", "action"} {
			if a, b := lookup(viaFacade, path), lookup(direct, path); fmt.Sprint(a) != fmt.Sprint(b) {
				t.Errorf("events.k8s.io %s: facade %v, member %v", path, a, b)
			}
		}
	})

	t.Run("core events selected: events.k8s.io field selectors as the member's", func(t *testing.T) {
		out := k.mustRun(t, "--context", "kubesearch-member1", "get", "events.v1.events.k8s.io", "-n", f.shop, "-o", "name",
			"--field-selector", "regarding.name="+pod+",reason=KubesearchGroups,type=Warning,reportingController=kubesearch-e2e")
		if strings.TrimSpace(out) != "event.events.k8s.io/probe-groups-1" {
			t.Errorf("regarding.name=%s: %q", pod, out)
		}
		// A core group's label is not one of events.k8s.io's, through the facade as in the member.
		_, err := k.run(t.Context(), "get", "events.v1.events.k8s.io", "-n", f.shop, "--field-selector", "involvedObject.name="+pod)
		_, direct := env.KubectlOutput(t.Context(), "member1", nil, "get", "events.v1.events.k8s.io", "-n", f.shop, "--field-selector", "involvedObject.name="+pod)
		for who, err := range map[string]error{"facade": err, "member": direct} {
			if err == nil || !strings.Contains(err.Error(), "field label not supported: involvedObject.name") {
				t.Errorf("%s: involvedObject.name on events.k8s.io: %v", who, err)
			}
		}
	})

	t.Run("core events selected: a watch of events.k8s.io", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		u := p.base + "/clusters/member1/apis/events.k8s.io/v1/namespaces/" + f.shop + "/events?watch=1&fieldSelector=" + url.QueryEscape("regarding.name="+pod)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("watch: %s", resp.Status)
		}
		env.KubectlRun(t, "member1", event("probe-groups-2", "second "+message), "create", "-f", "-")
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var e struct {
				Type   string `json:"type"`
				Object struct {
					APIVersion string                `json:"apiVersion"`
					Metadata   struct{ Name string } `json:"metadata"`
					Regarding  struct{ Name string } `json:"regarding"`
					Note       string                `json:"note"`
				} `json:"object"`
			}
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Fatalf("watch event %s: %v", sc.Bytes(), err)
			}
			if e.Object.Metadata.Name != "probe-groups-2" {
				continue
			}
			if e.Type != "ADDED" || e.Object.APIVersion != "events.k8s.io/v1" || e.Object.Regarding.Name != pod || e.Object.Note != "second "+message {
				t.Errorf("watch event: %s", sc.Bytes())
			}
			return
		}
		t.Fatalf("the watch ended without probe-groups-2: %v", sc.Err())
	})

	coreViews := func(t *testing.T) {
		t.Helper()
		var out string
		pollUntil(t, "the event in kubectl describe pod", 2*time.Minute, func(ctx context.Context) (bool, error) {
			out, _ = k.run(ctx, "--context", "kubesearch-member1", "describe", "pod", pod, "-n", f.shop)
			return strings.Contains(out, message), nil
		})
		if !strings.Contains(out, "KubesearchGroups") {
			t.Errorf("describe pod:\n%s", out)
		}
		out = k.mustRun(t, "events", "-n", f.shop, "--for", "pod/"+pod)
		if !strings.Contains(out, message) || !strings.Contains(out, "second "+message) {
			t.Errorf("kubectl events --for pod/%s:\n%s", pod, out)
		}
	}
	t.Run("core events selected: kubectl describe pod and kubectl events", coreViews)

	t.Run("events.k8s.io selected: kubectl describe pod and kubectl events", func(t *testing.T) {
		selectEvents("events.k8s.io/v1")
		// The core selection is purged, and events.k8s.io's documents take the same (cluster, uid).
		pollUntil(t, "the events stored as events.k8s.io", 3*time.Minute, func(ctx context.Context) (bool, error) {
			in := func(resources string) int64 {
				a := get(t, p.base, "/v1alpha1/search", url.Values{"resources": {resources}, "namespaces": {f.shop}, "names": {"probe-groups-1"}})
				return a.result.Total
			}
			return in("events.events.k8s.io") == 1 && in("events.core") == 0 && facadeDiscovers(p.base, "/api/v1", "events"), nil
		})
		coreViews(t)
		viaFacade := decodeJSON(t, k.mustRun(t, "--context", "kubesearch-member1", "get", "events", "probe-groups-1", "-n", f.shop, "-o", "json"))
		direct := decodeJSON(t, string(env.KubectlRun(t, "member1", nil, "get", "events", "probe-groups-1", "-n", f.shop, "-o", "json")))
		for _, path := range []string{"apiVersion", "metadata.uid", "involvedObject", "message", "reason", "type", "source", "count",
			"firstTimestamp", "lastTimestamp", "reportingComponent", "reportingInstance"} {
			if a, b := lookup(viaFacade, path), lookup(direct, path); fmt.Sprint(a) != fmt.Sprint(b) {
				t.Errorf("core %s: facade %v, member %v", path, a, b)
			}
		}
		out := k.mustRun(t, "--context", "kubesearch-member1", "get", "events", "-n", f.shop, "-o", "name", "--field-selector", "involvedObject.uid="+podUID+",source=kubesearch-e2e")
		if strings.Count(out, "event/probe-groups-") != 2 {
			t.Errorf("core field selectors on events.k8s.io documents: %q", out)
		}
	})
}

func decodeJSON(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("%v:\n%s", err, s)
	}
	return m
}
