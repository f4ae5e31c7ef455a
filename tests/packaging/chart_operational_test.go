package packaging

import (
	"encoding/base64"
	"encoding/csv"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// component is a rendered Deployment of the chart, by its name's suffix: its pod spec and flags
// (a queryAPI value, whose source method works for any component).
func component(t *testing.T, objs []object, suffix string) queryAPI {
	t.Helper()
	for _, o := range objs {
		if o.Kind != "Deployment" || !strings.HasSuffix(o.Metadata.Name, "-"+suffix) {
			continue
		}
		p := decodeDeployment(t, o).pod
		flags, problems := containerFlags(t, objs, p)
		if len(problems) > 0 {
			t.Fatalf("%s config and arguments: %q", suffix, problems)
		}
		return queryAPI{pod: p, flags: flags}
	}
	t.Fatalf("no Deployment *-%s rendered", suffix)
	return queryAPI{}
}

// monitorCredentials is where each ServiceMonitor's bearer token comes from, "secret/<name>/<key>"
// ("" without one), by component.
func monitorCredentials(t *testing.T, objs []object) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, o := range objs {
		if o.Kind != "ServiceMonitor" {
			continue
		}
		var sm struct {
			Spec struct {
				Endpoints []struct {
					Authorization *struct {
						Credentials struct{ Name, Key string } `json:"credentials"`
					} `json:"authorization"`
				} `json:"endpoints"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(o.raw, &sm); err != nil {
			t.Fatal(err)
		}
		name := o.Metadata.Name[strings.LastIndex(o.Metadata.Name, "-")+1:]
		out[name] = ""
		if a := sm.Spec.Endpoints[0].Authorization; a != nil {
			out[name] = "secret/" + a.Credentials.Name + "/" + a.Credentials.Key
		}
	}
	return out
}

// The collector's and the indexer's /metrics and /status authenticate by default: both read the
// token file of a Secret the chart generates, the query API presents its token of that Secret to the
// collector's /status, the ServiceMonitors theirs, and the token file lists exactly those two tokens.
func TestChartOperationalAuth(t *testing.T) {
	monitored := []string{"--set", "serviceMonitor.enabled=true", "--set", "serviceMonitor.queryapi.bearerTokenSecret.name=prometheus",
		"--set", "networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.team=monitoring"}
	const generated = "ks-kubesearch-operational-tokens"
	for _, tc := range []struct {
		name    string
		set     []string
		secret  string // the Secret behind the flags; "" for no flags
		renders bool   // the chart renders that Secret
	}{
		{"defaults", nil, generated, true},
		{"an existing Secret", []string{"--set", "operationalAuth.existingSecret=ops", "--set", "operationalAuth.prometheusTokenKey=prom"}, "ops", false},
		{"off", []string{"--set", "operationalAuth.enabled=false"}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := splitManifests(t, renderChart(t, slices.Concat(monitored, tc.set)...))
			promKey := "prometheus-token"
			if tc.secret == "ops" {
				promKey = "prom"
			}
			want := map[string]map[string]string{ // component → flag → source
				"collector": {"token-auth-file": "secret/" + tc.secret + "/tokens.csv"},
				"indexer":   {"token-auth-file": "secret/" + tc.secret + "/tokens.csv"},
				"queryapi":  {"collector-status-token-file": "secret/" + tc.secret + "/queryapi-token"},
			}
			for name, flags := range want {
				c := component(t, objs, name)
				for f, src := range flags {
					v, ok := c.flags[f]
					switch {
					case tc.secret == "" && ok:
						t.Errorf("%s: --%s=%s with operationalAuth off", name, f, v)
					case tc.secret != "" && !ok:
						t.Errorf("%s: no --%s", name, f)
					case ok:
						if got := c.source(t, v); got != src {
							t.Errorf("%s: --%s=%s from %s, want %s", name, f, v, got, src)
						}
					}
				}
			}
			creds := monitorCredentials(t, objs)
			for _, name := range []string{"collector", "indexer"} {
				wantCred := ""
				if tc.secret != "" {
					wantCred = "secret/" + tc.secret + "/" + promKey
				}
				if creds[name] != wantCred {
					t.Errorf("ServiceMonitor of the %s: token from %q, want %q", name, creds[name], wantCred)
				}
			}
			if creds["queryapi"] != "secret/prometheus/token" {
				t.Errorf("ServiceMonitor of the query API: token from %q, want serviceMonitor.queryapi's", creds["queryapi"])
			}
			var secrets []object
			for _, o := range objs {
				if o.Kind == "Secret" {
					secrets = append(secrets, o)
				}
			}
			if !tc.renders {
				if len(secrets) != 0 {
					t.Errorf("renders Secret %s", secrets[0].Metadata.Name)
				}
				return
			}
			if len(secrets) != 1 || secrets[0].Metadata.Name != generated {
				t.Fatalf("Secrets %v, want %s", secrets, generated)
			}
			data := map[string]string{}
			for k, v := range secrets[0].Data {
				b, err := base64.StdEncoding.DecodeString(v)
				if err != nil {
					t.Fatalf("%s: %v", k, err)
				}
				data[k] = string(b)
			}
			records, err := csv.NewReader(strings.NewReader(data["tokens.csv"])).ReadAll()
			if err != nil {
				t.Fatalf("tokens.csv: %v", err)
			}
			readers := map[string]string{}
			for _, r := range records {
				readers[r[0]] = r[1]
			}
			q, p := data["queryapi-token"], data["prometheus-token"]
			if len(q) < 32 || len(p) < 32 || q == p || len(readers) != 2 || readers[q] != "system:kubesearch:queryapi" || readers[p] != "system:kubesearch:prometheus" {
				t.Errorf("tokens.csv %d records, queryapi-token %d characters, prometheus-token %d: want two distinct long tokens, each the token file's record of its reader", len(records), len(q), len(p))
			}
		})
	}
}

// NetworkPolicy is on by default: the collector admits the query API's pods only, the indexer
// nothing but the kubelet's probes, the query API any client; metricsFrom adds the scrapers to all.
func TestChartNetworkPolicyDefault(t *testing.T) {
	type rule struct {
		From []map[string]any `json:"from"`
	}
	policies := func(t *testing.T, args ...string) map[string][]rule {
		t.Helper()
		out := map[string][]rule{}
		for _, o := range splitManifests(t, renderChart(t, args...)) {
			if o.Kind != "NetworkPolicy" {
				continue
			}
			var np struct {
				Spec struct {
					Ingress []rule `json:"ingress"`
				} `json:"spec"`
			}
			if err := yaml.Unmarshal(o.raw, &np); err != nil {
				t.Fatal(err)
			}
			out[o.Metadata.Name] = np.Spec.Ingress
		}
		return out
	}
	peers := func(rules []rule) string {
		var out []string
		for _, r := range rules {
			if r.From == nil {
				out = append(out, "any")
			}
			for _, p := range r.From {
				b, _ := yaml.Marshal(p)
				out = append(out, strings.Join(strings.Fields(string(b)), " "))
			}
		}
		return strings.Join(out, "; ")
	}
	queryapiPods := "podSelector: matchLabels: app.kubernetes.io/component: queryapi app.kubernetes.io/instance: ks app.kubernetes.io/name: kubesearch"
	monitoring := "namespaceSelector: matchLabels: team: monitoring"
	for _, tc := range []struct {
		name string
		args []string
		want map[string]string
	}{
		{"defaults", nil, map[string]string{
			"ks-kubesearch-collector": queryapiPods, "ks-kubesearch-indexer": "", "ks-kubesearch-queryapi": "any"}},
		{"metricsFrom", []string{"--set", "networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.team=monitoring"}, map[string]string{
			"ks-kubesearch-collector": queryapiPods + "; " + monitoring, "ks-kubesearch-indexer": monitoring, "ks-kubesearch-queryapi": "any; " + monitoring}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := policies(t, tc.args...)
			if len(got) != len(tc.want) {
				t.Errorf("NetworkPolicies %v, want %d", got, len(tc.want))
			}
			for name, want := range tc.want {
				rules, ok := got[name]
				if !ok {
					t.Errorf("no NetworkPolicy %s", name)
					continue
				}
				if p := peers(rules); p != want {
					t.Errorf("%s admits %q, want %q", name, p, want)
				}
			}
		})
	}
}
