package packaging

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kubesearch/kubesearch/internal/authz"
)

// queryAPI is the query API's Deployment of a render: its pod spec and its flags, from its config.yaml
// and its arguments (nil if disabled).
type queryAPI struct {
	pod   podSpec
	flags map[string]string
}

func renderQueryAPI(t *testing.T, args ...string) (queryAPI, []object) {
	t.Helper()
	objs := splitManifests(t, renderChart(t, args...))
	for _, o := range objs {
		if o.Kind != "Deployment" || !strings.HasSuffix(o.Metadata.Name, "-queryapi") {
			continue
		}
		p := decodeDeployment(t, o).pod
		flags, problems := containerFlags(t, objs, p)
		if len(problems) > 0 {
			t.Fatalf("queryapi config and arguments: %q", problems)
		}
		return queryAPI{pod: p, flags: flags}, objs
	}
	return queryAPI{}, objs
}

// source is where the file a flag names comes from: "secret/<name>/<key>" or "configMap/<name>/<key>"
// (the key is the file's name under the mount; a Secret mounted whole has no items).
func (q queryAPI) source(t *testing.T, path string) string {
	t.Helper()
	c := q.pod.Containers[0]
	for _, m := range c.VolumeMounts {
		file, ok := strings.CutPrefix(path, m.MountPath+"/")
		if !ok {
			continue
		}
		for _, v := range q.pod.Volumes {
			switch {
			case v.Name != m.Name:
			case v.Secret != nil:
				projected := len(v.Secret.Items) == 0 // the whole Secret
				for _, i := range v.Secret.Items {
					projected = projected || i.Key == file
				}
				if !projected {
					t.Errorf("%s: volume %s does not project key %s", path, v.Name, file)
				}
				return "secret/" + v.Secret.SecretName + "/" + file
			case v.ConfigMap != nil:
				return "configMap/" + v.ConfigMap.Name + "/" + file
			}
		}
	}
	t.Errorf("%s: behind no volume", path)
	return ""
}

// securityFlags are the query API's flags naming files with credentials, keys or the policy.
var securityFlags = []string{"token-auth-file", "client-ca-file", "authentication-kubeconfig", "authorization-policy-file", "subject-access-review-kubeconfig", "tls-cert-file", "tls-private-key-file",
	"requestheader-client-ca-file", "karmada-kubeconfig"}

// Each values setting of queryapi.auth, queryapi.tls and queryapi.limits, as the flags and the
// files behind them it renders.
func TestChartQueryAPIAuthValues(t *testing.T) {
	for _, tc := range []struct {
		name  string
		set   []string
		flags map[string]string // config key → where its file comes from (for a value flag: the value)
	}{
		{"defaults", nil, map[string]string{"rate-limit": "200", "rate-burst": "400", "max-watches-per-subject": "1000",
			"max-lists-per-subject": "16", "max-requests-inflight": "400", "write-timeout": "1m", "source-rate-limit": "1000",
			"source-rate-burst": "2000", "source-auth-failure-limit": "1", "source-auth-failure-burst": "20", "max-connections-per-source": "1000",
			"max-snapshots-per-subject": "20", "max-snapshots": "200", "max-fuzzy-searches-per-subject": "2", "max-watch-objects-per-subject": "1000000"}},
		{"what a subject's queries hold", []string{"queryapi.limits.maxSnapshotsPerSubject=5", "queryapi.limits.maxSnapshots=100",
			"queryapi.limits.maxFuzzySearchesPerSubject=1", "queryapi.limits.maxWatchObjectsPerSubject=50000"},
			map[string]string{"max-snapshots-per-subject": "5", "max-snapshots": "100", "max-fuzzy-searches-per-subject": "1", "max-watch-objects-per-subject": "50000"}},
		{"anonymous", []string{"queryapi.auth.anonymous=true"}, map[string]string{"anonymous": "true"}},
		{"token file", []string{"queryapi.auth.tokenFile.existingSecret=tokens"}, map[string]string{"token-auth-file": "secret/tokens/tokens.csv"}},
		{"token file key", []string{"queryapi.auth.tokenFile.existingSecret=tokens", "queryapi.auth.tokenFile.key=t.csv"}, map[string]string{"token-auth-file": "secret/tokens/t.csv"}},
		{"client CA from a Secret", []string{"queryapi.auth.clientCA.existingSecret=cas", "queryapi.tls.existingSecret=serving"},
			map[string]string{"client-ca-file": "secret/cas/ca.crt", "tls-cert-file": "secret/serving/tls.crt", "tls-private-key-file": "secret/serving/tls.key"}},
		{"client CA from a ConfigMap", []string{"queryapi.auth.clientCA.existingConfigMap=cas", "queryapi.auth.clientCA.key=bundle.pem", "queryapi.tls.existingSecret=serving"},
			map[string]string{"client-ca-file": "configMap/cas/bundle.pem", "tls-cert-file": "secret/serving/tls.crt"}},
		{"TokenReview", []string{"queryapi.auth.tokenReview.kubeconfigSecret=hub"}, map[string]string{"authentication-kubeconfig": "secret/hub/kubeconfig", "token-review-max-in-flight": "16"}},
		{"TokenReview slots", []string{"queryapi.auth.tokenReview.kubeconfigSecret=hub", "queryapi.auth.tokenReview.maxInFlight=4"},
			map[string]string{"authentication-kubeconfig": "secret/hub/kubeconfig", "token-review-max-in-flight": "4"}},
		{"SubjectAccessReview", []string{"queryapi.auth.subjectAccessReview.kubeconfigSecret=members", "queryapi.auth.subjectAccessReview.deniedTTL=10s"},
			map[string]string{"subject-access-review-kubeconfig": "secret/members/kubeconfig", "subject-access-review-allowed-ttl": "1m", "subject-access-review-denied-ttl": "10s",
				"subject-access-review-max-in-flight-per-subject": "16", "subject-access-review-rate-per-subject": "100", "subject-access-review-burst-per-subject": "1000"}},
		{"SubjectAccessReview bounds", []string{"queryapi.auth.subjectAccessReview.kubeconfigSecret=members", "queryapi.auth.subjectAccessReview.maxInFlightPerSubject=4",
			"queryapi.auth.subjectAccessReview.ratePerSubject=0", "queryapi.auth.subjectAccessReview.burstPerSubject=50"},
			map[string]string{"subject-access-review-kubeconfig": "secret/members/kubeconfig", "subject-access-review-max-in-flight-per-subject": "4",
				"subject-access-review-rate-per-subject": "0", "subject-access-review-burst-per-subject": "50"}},
		{"inline policy", []string{
			"queryapi.auth.policy.rules[0].subjects[0].kind=User", "queryapi.auth.policy.rules[0].subjects[0].name=alice",
			"queryapi.auth.policy.rules[0].clusters[0]=*", "queryapi.auth.policy.rules[0].namespaces[0]=shop",
			"queryapi.auth.policy.rules[0].resources[0]=pods", "queryapi.auth.policy.rules[0].verbs[0]=list"},
			map[string]string{"authorization-policy-file": "configMap/ks-kubesearch-queryapi-policy/policy.yaml"}},
		{"policy ConfigMap", []string{"queryapi.auth.policy.existingConfigMap=pol", "queryapi.auth.policy.key=p.yaml"},
			map[string]string{"authorization-policy-file": "configMap/pol/p.yaml"}},
		{"limits", []string{"queryapi.limits.rate=0", "queryapi.limits.burst=5", "queryapi.limits.maxWatchesPerSubject=0",
			"queryapi.limits.maxListsPerSubject=3", "queryapi.limits.maxRequestsInFlight=0", "queryapi.limits.writeTimeout=30s",
			"queryapi.limits.perSource.rate=3", "queryapi.limits.perSource.burst=7", "queryapi.limits.perSource.authFailureRate=0",
			"queryapi.limits.perSource.authFailureBurst=2", "queryapi.limits.perSource.maxConnections=0"},
			map[string]string{"rate-limit": "0", "rate-burst": "5", "max-watches-per-subject": "0", "max-lists-per-subject": "3",
				"max-requests-inflight": "0", "write-timeout": "30s", "source-rate-limit": "3", "source-rate-burst": "7",
				"source-auth-failure-limit": "0", "source-auth-failure-burst": "2", "max-connections-per-source": "0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var args []string
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			q, _ := renderQueryAPI(t, args...)
			if q.flags == nil {
				t.Fatal("no query API rendered")
			}
			for f, want := range tc.flags {
				got, ok := q.flags[f]
				switch {
				case !ok:
					t.Errorf("--%s: not passed", f)
				case slices.Contains(securityFlags, f):
					if src := q.source(t, got); src != want {
						t.Errorf("--%s=%s: from %s, want %s", f, got, src, want)
					}
				case got != want:
					t.Errorf("--%s=%s, want %s", f, got, want)
				}
			}
			// Nothing else: a setting turns on its own flags only.
			for _, f := range append([]string{"anonymous"}, securityFlags...) {
				if _, ok := q.flags[f]; ok {
					if _, want := tc.flags[f]; !want && !(f == "tls-private-key-file" && tc.flags["tls-cert-file"] != "") {
						t.Errorf("--%s=%s: not asked for", f, q.flags[f])
					}
				}
			}
		})
	}
}

// Every CI values set with a query API configures a way in (the defaults do not: the query API
// refuses to start, as NOTES.txt says), passes credentials as mounted files only, and the production
// set is locked down.
func TestChartQueryAPIAuthenticates(t *testing.T) {
	for name, args := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			q, _ := renderQueryAPI(t, args...)
			if q.flags == nil {
				t.Skip("no query API in this values set")
			}
			_, anonymous := q.flags["anonymous"]
			authenticators := 0
			for _, f := range []string{"token-auth-file", "client-ca-file", "authentication-kubeconfig", "requestheader-client-ca-file"} {
				if _, ok := q.flags[f]; ok {
					authenticators++
				}
			}
			if name != "default" && !anonymous && authenticators == 0 {
				t.Errorf("no authenticator and no --anonymous: the query API refuses to start")
			}
			for _, f := range securityFlags {
				if v, ok := q.flags[f]; ok && !strings.HasPrefix(v, "/etc/kubesearch/") {
					t.Errorf("--%s=%s: want the path of a mounted file", f, v)
				}
			}
			if name == "production" {
				if anonymous {
					t.Error("production: --anonymous")
				}
				for _, f := range []string{"token-auth-file", "authorization-policy-file", "tls-cert-file", "tls-private-key-file"} {
					if q.flags[f] == "" {
						t.Errorf("production: no --%s", f)
					}
				}
			}
		})
	}
}

// The policy rendered from queryapi.auth.policy.rules is one the query API loads, with every rule of
// the values, and it is the file --authorization-policy-file names.
func TestChartQueryAPIPolicyLoads(t *testing.T) {
	values := filepath.Join(chartDir(), "ci", "production-values.yaml")
	q, objs := renderQueryAPI(t, "-f", values)
	src := q.source(t, q.flags["authorization-policy-file"])
	var found bool
	for _, o := range objs {
		if o.Kind != "ConfigMap" || "configMap/"+o.Metadata.Name+"/policy.yaml" != src {
			continue
		}
		found = true
		var cm struct {
			Data map[string]string `json:"data"`
		}
		if err := yaml.Unmarshal(o.raw, &cm); err != nil {
			t.Fatal(err)
		}
		p, err := authz.Parse([]byte(cm.Data["policy.yaml"]))
		if err != nil {
			t.Fatalf("the rendered policy does not load: %v\n%s", err, cm.Data["policy.yaml"])
		}
		var v struct {
			Queryapi struct {
				Auth struct {
					Policy struct {
						Rules []any `json:"rules"`
					} `json:"policy"`
				} `json:"auth"`
			} `json:"queryapi"`
		}
		raw, err := os.ReadFile(values)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		if want := len(v.Queryapi.Auth.Policy.Rules); p.Rules() != want || want == 0 {
			t.Errorf("the rendered policy has %d rules, the values %d", p.Rules(), want)
		}
	}
	if !found {
		t.Errorf("--authorization-policy-file reads %s, which the chart does not render", src)
	}
}

// The query API's ServiceMonitor authenticates to /metrics and speaks HTTPS when the query API does.
func TestChartQueryAPIServiceMonitor(t *testing.T) {
	type endpoint struct {
		Scheme        string `json:"scheme"`
		Authorization *struct {
			Type        string `json:"type"`
			Credentials struct {
				Name string `json:"name"`
				Key  string `json:"key"`
			} `json:"credentials"`
		} `json:"authorization"`
		TLSConfig map[string]any `json:"tlsConfig"`
	}
	monitor := func(t *testing.T, args ...string) endpoint {
		t.Helper()
		for _, o := range splitManifests(t, renderChart(t, args...)) {
			if o.Kind == "ServiceMonitor" && strings.HasSuffix(o.Metadata.Name, "-queryapi") {
				var sm struct {
					Spec struct {
						Endpoints []endpoint `json:"endpoints"`
					} `json:"spec"`
				}
				if err := yaml.Unmarshal(o.raw, &sm); err != nil {
					t.Fatal(err)
				}
				return sm.Spec.Endpoints[0]
			}
		}
		t.Fatal("no ServiceMonitor of the query API")
		return endpoint{}
	}
	t.Run("production", func(t *testing.T) {
		e := monitor(t, "-f", filepath.Join(chartDir(), "ci", "production-values.yaml"))
		if e.Scheme != "https" || e.Authorization == nil || e.Authorization.Type != "Bearer" || e.Authorization.Credentials.Name != "kubesearch-prometheus-token" || e.Authorization.Credentials.Key != "token" {
			t.Errorf("endpoint %+v: want https with the bearer token of Secret kubesearch-prometheus-token", e)
		}
		if e.TLSConfig["serverName"] != "ks-kubesearch-queryapi.search.svc" || e.TLSConfig["ca"] == nil {
			t.Errorf("tlsConfig %v: want the values' CA and the Service's name", e.TLSConfig)
		}
	})
	t.Run("anonymous over HTTP", func(t *testing.T) {
		e := monitor(t, "--set", "serviceMonitor.enabled=true", "--set", "networkPolicy.enabled=false", "--set", "queryapi.auth.anonymous=true")
		if e.Scheme != "" || e.Authorization != nil || e.TLSConfig != nil {
			t.Errorf("endpoint %+v: want plain HTTP without credentials", e)
		}
	})
	t.Run("serverName given", func(t *testing.T) {
		e := monitor(t, "--set", "serviceMonitor.enabled=true", "--set", "networkPolicy.enabled=false", "--set", "queryapi.auth.anonymous=true", "--set", "queryapi.tls.existingSecret=serving",
			"--set", "serviceMonitor.queryapi.tlsConfig.serverName=search.example.com")
		if e.Scheme != "https" || e.TLSConfig["serverName"] != "search.example.com" {
			t.Errorf("endpoint %+v: want https and the values' serverName", e)
		}
	})
}
