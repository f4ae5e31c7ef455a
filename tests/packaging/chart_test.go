package packaging

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/")

func chartDir() string { return filepath.Join(root(), "charts", "kubesearch") }

// valueSets are the chart's CI values files (charts/kubesearch/ci), plus the defaults.
func valueSets(t *testing.T) map[string][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir(), "ci", "*-values.yaml"))
	if err != nil || len(files) < 3 {
		t.Fatalf("charts/kubesearch/ci: %v, %d values files; want several", err, len(files))
	}
	sets := map[string][]string{"default": nil}
	for _, f := range files {
		sets[strings.TrimSuffix(filepath.Base(f), "-values.yaml")] = []string{"-f", f}
	}
	return sets
}

func renderChart(t *testing.T, args ...string) []byte {
	t.Helper()
	return run(t, tool(t, "chart"), append([]string{"template", "--chart", chartDir(), "--release", "ks", "--namespace", "search"}, args...)...)
}

func TestChartLint(t *testing.T) {
	for name, args := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			out := run(t, tool(t, "chart"), append([]string{"lint", "--chart", chartDir()}, args...)...)
			for line := range strings.Lines(string(out)) {
				if !strings.HasPrefix(line, "[INFO]") {
					t.Errorf("helm lint --strict: %s", line)
				}
			}
		})
	}
}

// helm template of every values set, against testdata/chart/<set>.golden (-update rewrites them),
// the tokens the chart generates masked.
func TestChartTemplateGolden(t *testing.T) {
	for name, args := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			got := maskGenerated(renderChart(t, args...))
			golden := filepath.Join("testdata", "chart", name+".golden")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("helm template with %s differs from %s (run with -update after checking the diff)", name, golden)
			}
		})
	}
}

// generatedData is a value of a Secret's data the chart generates at random: what a render of
// templates/operational-tokens.yaml holds after "data:".
var generatedData = regexp.MustCompile(`(?m)^(  [^\s:]+): \S+$`)

// maskGenerated replaces the random values of the Secrets the chart generates, which differ at
// every render (helm template cannot look up the ones an installation keeps), with <generated>.
func maskGenerated(rendered []byte) []byte {
	docs := strings.Split(string(rendered), "\n---\n")
	for i, doc := range docs {
		if !strings.Contains(doc, "# Source: kubesearch/templates/operational-tokens.yaml\n") {
			continue
		}
		if head, data, ok := strings.Cut(doc, "\ndata:\n"); ok {
			docs[i] = head + "\ndata:\n" + generatedData.ReplaceAllString(data, "$1: <generated>")
		}
	}
	return []byte(strings.Join(docs, "\n---\n"))
}

// object is a rendered manifest, decoded loosely.
type object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec  map[string]any    `json:"spec"`
	Data  map[string]string `json:"data"`
	Rules []struct {
		APIGroups       []string `json:"apiGroups"`
		Resources       []string `json:"resources"`
		ResourceNames   []string `json:"resourceNames"`
		NonResourceURLs []string `json:"nonResourceURLs"`
		Verbs           []string `json:"verbs"`
	} `json:"rules"`
	raw []byte
}

type podSpec struct {
	SecurityContext struct {
		RunAsNonRoot   *bool `json:"runAsNonRoot"`
		RunAsUser      int64 `json:"runAsUser"`
		SeccompProfile struct {
			Type string `json:"type"`
		} `json:"seccompProfile"`
	} `json:"securityContext"`
	ServiceAccountName           string `json:"serviceAccountName"`
	AutomountServiceAccountToken *bool  `json:"automountServiceAccountToken"`
	Containers                   []struct {
		Name            string   `json:"name"`
		Image           string   `json:"image"`
		Args            []string `json:"args"`
		SecurityContext struct {
			AllowPrivilegeEscalation *bool `json:"allowPrivilegeEscalation"`
			ReadOnlyRootFilesystem   *bool `json:"readOnlyRootFilesystem"`
			Capabilities             struct {
				Drop []string `json:"drop"`
			} `json:"capabilities"`
		} `json:"securityContext"`
		LivenessProbe  *probe `json:"livenessProbe"`
		ReadinessProbe *probe `json:"readinessProbe"`
		Resources      struct {
			Limits   map[string]string `json:"limits"`
			Requests map[string]string `json:"requests"`
		} `json:"resources"`
		Ports []struct {
			Name          string `json:"name"`
			ContainerPort int    `json:"containerPort"`
		} `json:"ports"`
		VolumeMounts []struct {
			Name      string `json:"name"`
			MountPath string `json:"mountPath"`
			ReadOnly  bool   `json:"readOnly"`
		} `json:"volumeMounts"`
	} `json:"containers"`
	Volumes []struct {
		Name   string `json:"name"`
		Secret *struct {
			SecretName string `json:"secretName"`
			Items      []struct {
				Key string `json:"key"`
			} `json:"items"`
		} `json:"secret"`
		ConfigMap *struct {
			Name  string `json:"name"`
			Items []struct {
				Key string `json:"key"`
			} `json:"items"`
		} `json:"configMap"`
	} `json:"volumes"`
}

type probe struct {
	HTTPGet struct {
		Path   string `json:"path"`
		Port   any    `json:"port"`
		Scheme string `json:"scheme"`
	} `json:"httpGet"`
}

func splitManifests(t *testing.T, rendered []byte) []object {
	t.Helper()
	var out []object
	for _, doc := range strings.Split(string(rendered), "\n---\n") {
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("rendered manifest: %v\n%s", err, doc)
		}
		if o.Kind == "" {
			continue
		}
		o.raw = []byte(doc)
		out = append(out, o)
	}
	return out
}

// What every render must hold, whatever the values: hardened pods with probes and memory limits,
// arguments kubesearch accepts (its --help) with their files mounted, read-only RBAC.
func TestChartInvariants(t *testing.T) {
	for name, args := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			objs := splitManifests(t, renderChart(t, args...))
			deployments := 0
			for _, o := range objs {
				switch o.Kind {
				case "Deployment":
					deployments++
					d := decodeDeployment(t, o)
					flags, problems := containerFlags(t, objs, d.pod)
					for _, pr := range problems {
						t.Errorf("%s: %s", o.Metadata.Name, pr)
					}
					checkPodSpec(t, o.Metadata.Name, d.pod, flags)
					checkConfigChecksum(t, o.Metadata.Name, objs, d)
				case "ClusterRole", "Role":
					for _, r := range o.Rules {
						// Reading: get, list and watch; get alone of paths, or of named objects (the
						// member's kube-system namespace, its identity).
						named := len(r.NonResourceURLs) > 0 || len(r.ResourceNames) > 0
						if !slices.Equal(r.Verbs, []string{"get", "list", "watch"}) && !(named && slices.Equal(r.Verbs, []string{"get"})) {
							t.Errorf("%s %s: rule %+v grants more than reading", o.Kind, o.Metadata.Name, r)
						}
						if slices.Contains(r.Resources, "*") || slices.Contains(r.APIGroups, "*") {
							t.Errorf("%s %s: wildcard rule %+v", o.Kind, o.Metadata.Name, r)
						}
						if slices.Contains(r.Resources, "secrets") {
							t.Errorf("%s %s: reads Secrets, which no values set selects", o.Kind, o.Metadata.Name)
						}
					}
				}
			}
			if deployments == 0 {
				t.Error("no Deployment rendered")
			}
		})
	}
}

// deployment is a rendered Deployment: its pod template's annotations and spec.
type deployment struct {
	annotations map[string]string
	pod         podSpec
}

func decodeDeployment(t *testing.T, o object) deployment {
	t.Helper()
	var d struct {
		Spec struct {
			Template struct {
				Metadata struct {
					Annotations map[string]string `json:"annotations"`
				} `json:"metadata"`
				Spec podSpec `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(o.raw, &d); err != nil {
		t.Fatal(err)
	}
	return deployment{annotations: d.Spec.Template.Metadata.Annotations, pod: d.Spec.Template.Spec}
}

// configMount is where the chart mounts a component's config.yaml.
const configMount = "/etc/kubesearch/config"

// configFile is the file a pod's --config names, read from the rendered ConfigMap behind its mount
// (nil, with a problem, if there is none).
func configFile(objs []object, p podSpec, path string) ([]byte, string) {
	c := p.Containers[0]
	for _, m := range c.VolumeMounts {
		file, ok := strings.CutPrefix(path, m.MountPath+"/")
		if !ok {
			continue
		}
		for _, v := range p.Volumes {
			if v.Name != m.Name {
				continue
			}
			if v.ConfigMap == nil {
				return nil, fmt.Sprintf("--config=%s: volume %s is not a ConfigMap", path, v.Name)
			}
			for _, o := range objs {
				if o.Kind == "ConfigMap" && o.Metadata.Name == v.ConfigMap.Name {
					if data, ok := o.Data[file]; ok {
						return []byte(data), ""
					}
				}
			}
			return nil, fmt.Sprintf("--config=%s: the chart renders no ConfigMap %s with key %s", path, v.ConfigMap.Name, file)
		}
	}
	return nil, fmt.Sprintf("--config=%s: behind no volume mount", path)
}

// containerFlags are the flags a rendered container runs with: the keys of the config.yaml its
// --config names (read from the rendered ConfigMap behind the mount), under its arguments, each
// checked against `kubesearch <command> --help`. The command line holds the subcommand and
// --config only.
func containerFlags(t *testing.T, objs []object, p podSpec) (map[string]string, []string) {
	t.Helper()
	args := p.Containers[0].Args
	if len(args) == 0 {
		return nil, []string{"no subcommand"}
	}
	command := args[0]
	argFlags, problems := parseFlags(t, command, args[1:])
	if want := []string{command, "--config=" + configMount + "/config.yaml"}; !slices.Equal(args, want) {
		problems = append(problems, fmt.Sprintf("arguments %q, want %q: every other setting belongs in the config file", args, want))
	}
	path, ok := argFlags["config"]
	if !ok {
		return argFlags, append(problems, "no --config")
	}
	data, problem := configFile(objs, p, path)
	if problem != "" {
		return argFlags, append(problems, problem)
	}
	flags, fileProblems := parseConfig(t, command, data)
	problems = append(problems, fileProblems...)
	maps.Copy(flags, argFlags) // the command line wins, as in the binary
	return flags, append(problems, missingRequired(t, command, flags)...)
}

// checkConfigChecksum: the pod template carries the checksum of its config.yaml, so a values change
// rolls the Deployment (the process reads the file once).
func checkConfigChecksum(t *testing.T, name string, objs []object, d deployment) {
	t.Helper()
	data, problem := configFile(objs, d.pod, configMount+"/config.yaml")
	if problem != "" {
		return // reported by containerFlags
	}
	// The ConfigMap holds the file as a YAML block, which ends it with one newline.
	sum := sha256.Sum256(bytes.TrimSuffix(data, []byte("\n")))
	if got, want := d.annotations["checksum/config"], hex.EncodeToString(sum[:]); got != want {
		t.Errorf("%s: pod annotation checksum/config %q, want %s (sha256 of its config.yaml)", name, got, want)
	}
}

func checkPodSpec(t *testing.T, name string, p podSpec, flags map[string]string) {
	t.Helper()
	sc := p.SecurityContext
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == 0 || sc.SeccompProfile.Type != "RuntimeDefault" {
		t.Errorf("%s: pod securityContext %+v: want runAsNonRoot, a non-zero runAsUser, seccomp RuntimeDefault", name, sc)
	}
	if len(p.Containers) != 1 {
		t.Fatalf("%s: %d containers", name, len(p.Containers))
	}
	c := p.Containers[0]
	cs := c.SecurityContext
	if cs.AllowPrivilegeEscalation == nil || *cs.AllowPrivilegeEscalation || cs.ReadOnlyRootFilesystem == nil || !*cs.ReadOnlyRootFilesystem || !slices.Equal(cs.Capabilities.Drop, []string{"ALL"}) {
		t.Errorf("%s: container securityContext %+v: want no privilege escalation, read-only root, all capabilities dropped", name, cs)
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("%s: probes %+v %+v: want liveness /healthz, readiness /readyz", name, c.LivenessProbe, c.ReadinessProbe)
	}
	if c.Resources.Limits["memory"] == "" || c.Resources.Requests["cpu"] == "" {
		t.Errorf("%s: resources %+v: want a memory limit and a cpu request", name, c.Resources)
	}
	if _, tag, _ := strings.Cut(c.Image, ":"); tag == "" || tag == "latest" {
		t.Errorf("%s: image %q not pinned", name, c.Image)
	}
	if len(c.Args) == 0 {
		t.Fatalf("%s: no subcommand", name)
	}
	if _, port, _ := strings.Cut(flags["listen"], ":"); len(c.Ports) != 1 || port == "" || port != strconv.Itoa(c.Ports[0].ContainerPort) || c.Ports[0].Name != "http" {
		t.Errorf("%s: --listen %q, ports %+v: the probes' port http must be the listen port", name, flags["listen"], c.Ports)
	}
	if strings.HasPrefix(flags["listen"], "127.") {
		t.Errorf("%s: --listen %s is unreachable from the kubelet", name, flags["listen"])
	}
	mounted := func(path string) bool {
		for _, m := range c.VolumeMounts {
			if path == m.MountPath || strings.HasPrefix(path, m.MountPath+"/") {
				return true
			}
		}
		return false
	}
	for f, v := range flags {
		if (strings.HasSuffix(f, "-file") || strings.HasSuffix(f, "-dir") || strings.HasSuffix(f, "kubeconfig") || f == "registry" || f == "clusters") && !mounted(v) {
			t.Errorf("%s: %s=%s (config key or flag) is behind no volume mount", name, f, v)
		}
	}
	if !mounted("/tmp") {
		t.Errorf("%s: no writable /tmp under the read-only root", name)
	}
	// Files the process reads (credentials among them) are mounted read-only; only /tmp is written.
	for _, m := range c.VolumeMounts {
		if m.MountPath != "/tmp" && !m.ReadOnly {
			t.Errorf("%s: volume %s on %s is writable", name, m.Name, m.MountPath)
		}
	}
	// The kubelet probes HTTPS when the process serves it (and HTTP otherwise).
	want := "HTTP"
	if flags["tls-cert-file"] != "" {
		want = "HTTPS"
	}
	for _, pr := range []*probe{c.LivenessProbe, c.ReadinessProbe} {
		if pr != nil && cmp.Or(pr.HTTPGet.Scheme, "HTTP") != want {
			t.Errorf("%s: probe of %s uses %s; --tls-cert-file=%q wants %s", name, pr.HTTPGet.Path, cmp.Or(pr.HTTPGet.Scheme, "HTTP"), flags["tls-cert-file"], want)
		}
	}
	if c.Args[0] != "collector" && (p.AutomountServiceAccountToken == nil || *p.AutomountServiceAccountToken) {
		t.Errorf("%s: mounts a ServiceAccount token it never uses", name)
	}
}

// The binary itself accepts every rendered config.yaml: each component's file is given to
// `kubesearch <command> --config`, with an invalid KUBESEARCH_LOG_LEVEL beside it. The binary reads
// the environment and the file together and reports every bad value of both before it starts
// anything, so the only complaint must be the environment's: not one about the file.
func TestChartConfigAcceptedByBinary(t *testing.T) {
	bin := kubesearchBinary(t)
	for name, args := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			objs := splitManifests(t, renderChart(t, args...))
			for _, o := range objs {
				if o.Kind != "Deployment" {
					continue
				}
				d := decodeDeployment(t, o)
				c := d.pod.Containers[0]
				data, problem := configFile(objs, d.pod, configMount+"/config.yaml")
				if problem != "" {
					t.Errorf("%s: %s", o.Metadata.Name, problem)
					continue
				}
				if bytes.Contains(data, []byte("log-level:")) {
					t.Fatalf("%s: the file sets log-level, which this check spoils on purpose", o.Metadata.Name)
				}
				file := filepath.Join(t.TempDir(), "config.yaml")
				if err := os.WriteFile(file, data, 0o644); err != nil {
					t.Fatal(err)
				}
				cmd := exec.Command(bin, c.Args[0], "--config="+file)
				cmd.Env = []string{"KUBESEARCH_LOG_LEVEL=not-a-level", "HOME=" + t.TempDir()}
				out, err := cmd.CombinedOutput()
				var exit *exec.ExitError
				if !errors.As(err, &exit) {
					t.Fatalf("%s: kubesearch %s --config: %v, want it to stop on KUBESEARCH_LOG_LEVEL\n%s", o.Metadata.Name, c.Args[0], err, out)
				}
				got := strings.TrimSpace(string(out))
				want := `Error: KUBESEARCH_LOG_LEVEL: invalid argument "not-a-level" for "--log-level" flag`
				if !strings.HasPrefix(got, want) || strings.Count(got, "\n") != 1 || strings.Contains(got, file) {
					t.Errorf("%s: kubesearch %s --config <rendered config.yaml>:\n%s\nwant only the complaint about KUBESEARCH_LOG_LEVEL", o.Metadata.Name, c.Args[0], got)
				}
			}
		})
	}
}

// In-cluster mode: the collector's rights are exactly what its registries select.
func TestChartCollectorRBACFollowsRegistries(t *testing.T) {
	objs := splitManifests(t, renderChart(t, "-f", filepath.Join(chartDir(), "ci", "in-cluster-values.yaml")))
	got := map[string][]string{}
	for _, o := range objs {
		if o.Kind != "ClusterRole" && o.Kind != "Role" {
			continue
		}
		for _, r := range o.Rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					key := o.Kind + "/" + o.Metadata.Namespace
					if len(r.ResourceNames) > 0 {
						res += fmt.Sprint(r.ResourceNames)
					}
					got[key] = append(got[key], g+"/"+res)
				}
			}
		}
	}
	want := map[string][]string{
		"ClusterRole/":     {"/namespaces", "/namespaces[kube-system]", "/pods", "apps/deployments", "networking.k8s.io/ingresses"},
		"Role/kube-system": {"/configmaps"},
	}
	for k := range want {
		slices.Sort(got[k])
		if !slices.Equal(got[k], want[k]) {
			t.Errorf("%s grants %q, want %q", k, got[k], want[k])
		}
	}
	if len(got) != len(want) {
		t.Errorf("roles %v, want only %v", got, want)
	}
}

// Values the chart refuses, each with a message naming the value.
func TestChartRejectsBadValues(t *testing.T) {
	for _, tc := range []struct {
		set, want string
	}{
		{"collector.mode=bogus", "/collector/mode"},
		{"colector.enabled=true", "colector"},
		{"queryapi.replicas=2", "queryapi.continueKey.existingSecret"},
		{"kafka.sasl.mechanism=plain", "kafka.sasl.existingSecret"},
		{"collector.mode=central", "collector.members"},
		{"collector.rbac.extraRules[0].verbs[0]=create", "verbs"},
		{"queryapi.auth.clientCA.existingSecret=ca", "queryapi.tls.existingSecret"},
		{"queryapi.auth.tokenFiel.existingSecret=tokens", "tokenFiel"},
		{"queryapi.auth.policy.rules[0].verbs[0]=delete", "verbs"},
		{"queryapi.auth.policy.rules[0].subjects[0].kind=Robot", "kind"},
		{"queryapi.limits.rate=-1", "/queryapi/limits/rate"},
		{"serviceMonitor.enabled=true", "serviceMonitor.queryapi"},
		{"serviceMonitor.enabled=true,serviceMonitor.queryapi.bearerTokenSecret.name=prometheus", "networkPolicy.metricsFrom"},
		{"operationalAuth.tokenFileKey=", "/operationalAuth/tokenFileKey"},
		{"serviceMonitor.queryapi.tlsConfig.keyFile=x", "keyFile"},
		{"indexer.config.help=true", "help"},
		{"queryapi.config.listen.port=1", "/queryapi/config/listen"},
	} {
		t.Run(tc.set, func(t *testing.T) {
			_, err := runErr(tool(t, "chart"), "template", "--chart", chartDir(), "--set", tc.set)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("--set %s: %v, want an error naming %s", tc.set, err, tc.want)
			}
		})
	}
}
