package packaging

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

type composeFile struct {
	Services map[string]composeService `json:"services"`
	Volumes  map[string]any            `json:"volumes"`
}

type composeService struct {
	Image       string            `json:"image"`
	Build       *composeBuild     `json:"build"`
	Command     []string          `json:"command"`
	Entrypoint  []string          `json:"entrypoint"`
	Environment map[string]string `json:"environment"`
	Expose      []string          `json:"expose"`
	Ports       []string          `json:"ports"`
	Volumes     []string          `json:"volumes"`
	DependsOn   map[string]struct {
		Condition string `json:"condition"`
	} `json:"depends_on"`
	Healthcheck map[string]any `json:"healthcheck"`
	Restart     string         `json:"restart"`
	NetworkMode string         `json:"network_mode"`
	Profiles    []string       `json:"profiles"`
}

type composeBuild struct {
	Context string            `json:"context"`
	Args    map[string]string `json:"args"`
}

// composeMount is one entry of a service's volumes.
type composeMount struct {
	source, target string
	bind, readOnly bool
}

func (s composeService) mounts() []composeMount {
	var out []composeMount
	for _, v := range s.Volumes {
		f := strings.Split(v, ":")
		m := composeMount{source: f[0], target: f[1]}
		m.readOnly = len(f) > 2 && strings.Contains(f[2], "ro")
		m.bind = strings.HasPrefix(m.source, ".") || strings.HasPrefix(m.source, "/")
		out = append(out, m)
	}
	return out
}

func (s composeService) exposes(port string) bool { return slices.Contains(s.Expose, port) }

func (s composeService) isKubesearch() bool {
	return strings.HasPrefix(s.Image, "kubesearch/kubesearch:")
}

// interpolation is a ${VAR...} reference of the compose file.
var interpolation = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)([^}]*)\}`)

func loadCompose(t *testing.T) (composeFile, []byte) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root(), "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	// Interpolate as compose does: ${VAR:-default} takes the default here (nothing is set in tests).
	text := interpolation.ReplaceAllStringFunc(string(raw), func(m string) string {
		sub := interpolation.FindStringSubmatch(m)
		if d, ok := strings.CutPrefix(sub[2], ":-"); ok {
			return d
		}
		return m
	})
	var f composeFile
	if err := yaml.Unmarshal([]byte(text), &f); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return f, raw
}

// The compose file's wiring: every image pinned, every reference (service, host:port, volume, file,
// flag, environment variable) resolving to something that exists, checked against the repository and
// `kubesearch <command> --help`.
func TestComposeWiring(t *testing.T) {
	f, raw := loadCompose(t)
	if len(f.Services) == 0 {
		t.Fatal("no services")
	}
	problem := func(svc, format string, args ...any) {
		t.Errorf("service %s: %s", svc, fmt.Sprintf(format, args...))
	}

	// Interpolated variables all have defaults: `docker compose up` needs no environment.
	for _, m := range interpolation.FindAllStringSubmatch(string(raw), -1) {
		if !strings.HasPrefix(m[2], ":-") {
			t.Errorf("${%s%s}: give it a default (${%s:-...})", m[1], m[2], m[1])
		}
	}

	usedVolumes := map[string]bool{}
	for name, s := range f.Services {
		// Images pinned by version.
		repo, tag, ok := strings.Cut(s.Image, ":")
		if i := strings.LastIndex(s.Image, ":"); i > strings.LastIndex(s.Image, "/") {
			repo, tag, ok = s.Image[:i], s.Image[i+1:], true
		}
		if !ok || tag == "" || tag == "latest" || repo == "" {
			problem(name, "image %q: pin a version tag", s.Image)
		}
		if s.Build != nil {
			if _, err := os.Stat(filepath.Join(root(), s.Build.Context, "Dockerfile")); err != nil {
				problem(name, "build context %s has no Dockerfile", s.Build.Context)
			}
		}

		for dep, d := range s.DependsOn {
			target, ok := f.Services[dep]
			switch {
			case !ok:
				problem(name, "depends on %s, which is not a service", dep)
			case d.Condition == "service_healthy" && target.Healthcheck == nil:
				problem(name, "waits for %s to be healthy, which has no healthcheck", dep)
			case d.Condition == "service_completed_successfully" && target.Restart != "no":
				problem(name, "waits for %s to complete, which is not a one-shot (restart: \"no\")", dep)
			}
		}

		// Volumes: bind sources exist, named volumes are declared and written by someone.
		for _, m := range s.mounts() {
			if m.bind {
				if _, err := os.Stat(filepath.Join(root(), m.source)); err != nil {
					problem(name, "mounts %s, which does not exist in the repository", m.source)
				}
				continue
			}
			usedVolumes[m.source] = true
			if _, ok := f.Volumes[m.source]; !ok {
				problem(name, "mounts volume %s, not declared under volumes:", m.source)
			}
			if m.readOnly && !volumeWritten(f, m.source) {
				problem(name, "reads volume %s, which no service writes", m.source)
			}
		}

		// Published ports are ports the service listens on.
		for _, p := range s.Ports {
			f := strings.Split(strings.TrimSuffix(p, "/tcp"), ":")
			if container := f[len(f)-1]; !s.exposes(container) {
				problem(name, "publishes %s, but port %s is not among expose %q", p, container, s.Expose)
			}
		}

		// Paths named on command lines exist behind their mounts.
		for _, arg := range append(slices.Clone(s.Entrypoint), s.Command...) {
			for _, p := range absPaths(arg) {
				for _, m := range s.mounts() {
					rest, ok := strings.CutPrefix(p, m.target)
					if !ok || (rest != "" && !strings.HasPrefix(rest, "/")) || !m.bind {
						continue
					}
					if _, err := os.Stat(filepath.Join(root(), m.source, rest)); err != nil {
						problem(name, "names %s, but %s%s does not exist", p, m.source, rest)
					}
				}
			}
		}

		// Every URL of the file names a service and a port it exposes.
		var strs []string
		strs = append(strs, s.Command...)
		for _, v := range s.Environment {
			strs = append(strs, v)
		}
		for _, str := range strs {
			for _, hp := range urlHosts(str) {
				checkHostPort(t, f, name, hp)
			}
		}

		if s.isKubesearch() {
			checkKubesearchService(t, f, name, s)
		}
	}
	for v := range f.Volumes {
		if !usedVolumes[v] {
			t.Errorf("volume %s is declared but no service mounts it", v)
		}
	}

	// The commands of the file's header — the README's demo — use what the file publishes.
	published := map[string]string{} // host port → service
	for name, s := range f.Services {
		for _, p := range s.Ports {
			if f := strings.Split(p, ":"); len(f) == 3 {
				published[f[1]] = name
			}
		}
	}
	var header []string
	for line := range strings.Lines(string(raw)) {
		if !strings.HasPrefix(line, "#") {
			break
		}
		header = append(header, line)
	}
	demo := strings.Join(header, "")
	for _, m := range regexp.MustCompile(`127\.0\.0\.1:(\d+)`).FindAllStringSubmatch(demo, -1) {
		if _, ok := published[m[1]]; !ok {
			t.Errorf("the header's demo uses 127.0.0.1:%s, which no service publishes", m[1])
		}
	}
	for _, want := range []string{"127.0.0.1:8080/v1alpha1/search", "127.0.0.1:5601"} {
		if !strings.Contains(demo, want) {
			t.Errorf("the header's demo lacks %s", want)
		}
	}
	if published["8080"] != "queryapi" || published["5601"] != "dashboards" {
		t.Errorf("127.0.0.1:8080 is %q and :5601 %q; want queryapi and dashboards", published["8080"], published["5601"])
	}
	for _, m := range regexp.MustCompile(`docker compose run --rm -T (\S+)`).FindAllStringSubmatch(demo, -1) {
		if _, ok := f.Services[m[1]]; !ok {
			t.Errorf("the header runs service %s, which does not exist", m[1])
		}
	}
	for _, m := range regexp.MustCompile(`#/view/([a-z0-9-]+)`).FindAllStringSubmatch(demo, -1) {
		b, err := os.ReadFile(filepath.Join(root(), "dashboards", "kubesearch.ndjson"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `"type":"dashboard","id":"`+m[1]+`"`) {
			t.Errorf("the header opens dashboard %s, which dashboards/kubesearch.ndjson lacks", m[1])
		}
	}
}

// checkKubesearchService checks a kubesearch container: its subcommand and flags against --help, its
// listen port exposed, its file flags behind mounts, its environment read by the binary.
func checkKubesearchService(t *testing.T, f composeFile, name string, s composeService) {
	t.Helper()
	if len(s.Command) == 0 {
		t.Errorf("service %s: no subcommand", name)
		return
	}
	sub := s.Command[0]
	flags, problems := parseArgs(t, sub, s.Command[1:])
	for _, p := range problems {
		t.Errorf("service %s: %s", name, p)
	}
	if listen, ok := flags["listen"]; ok {
		_, port, _ := strings.Cut(listen, ":")
		if !s.exposes(port) {
			t.Errorf("service %s: --listen %s, but port %s is not exposed", name, listen, port)
		}
		if host, _, _ := strings.Cut(listen, ":"); host == "127.0.0.1" && s.NetworkMode != "host" {
			t.Errorf("service %s: --listen %s is unreachable from other containers", name, listen)
		}
	}
	for flag, value := range flags {
		switch {
		case strings.HasSuffix(flag, "-file") || flag == "registry" || flag == "kubeconfig" || flag == "clusters":
			if !underMount(s, value) {
				t.Errorf("service %s: --%s %s is behind no volume", name, flag, value)
			}
		case flag == "kafka-brokers":
			for _, b := range strings.Split(value, ",") {
				checkHostPort(t, f, name, b)
			}
		}
	}
	if sub == "collector" && flags["kubeconfig"] == "" && flags["clusters"] == "" {
		t.Errorf("service %s: the collector needs --kubeconfig or --clusters", name)
	}
	if sub == "queryapi" {
		_, anonymous := flags["anonymous"]
		if !anonymous && flags["token-auth-file"] == "" && flags["client-ca-file"] == "" && flags["authentication-kubeconfig"] == "" {
			t.Errorf("service %s: no authenticator and no --anonymous: the query API refuses to start", name)
		}
		// The header's demo (curl, the kubeconfig service) carries no credentials.
		if !anonymous {
			t.Errorf("service %s: the demo's query API needs --anonymous: the header's commands send no credentials", name)
		}
	}
	for k := range s.Environment {
		if !slices.Contains(productEnv(t), k) {
			t.Errorf("service %s: environment %s is read by no kubesearch code (flags configure it)", name, k)
		}
	}
}

// checkHostPort checks that host:port names a service exposing the port (or the host's loopback for a
// container on the host's network).
func checkHostPort(t *testing.T, f composeFile, from, hostPort string) {
	t.Helper()
	host, port, ok := strings.Cut(hostPort, ":")
	if !ok {
		t.Errorf("service %s: %q: want host:port", from, hostPort)
		return
	}
	if _, err := strconv.Atoi(port); err != nil {
		t.Errorf("service %s: %q: bad port", from, hostPort)
		return
	}
	switch host {
	case "", "localhost":
		return // the container itself (healthchecks, listeners)
	case "127.0.0.1":
		if f.Services[from].NetworkMode != "host" {
			return
		}
		for _, s := range f.Services {
			for _, p := range s.Ports {
				if strings.HasPrefix(p, "127.0.0.1:"+port+":") {
					return
				}
			}
		}
		t.Errorf("service %s: %s: no service publishes port %s on the host", from, hostPort, port)
		return
	}
	target, ok := f.Services[host]
	if !ok {
		t.Errorf("service %s: %s: no service %s", from, hostPort, host)
		return
	}
	if !target.exposes(port) {
		t.Errorf("service %s: %s: %s does not expose %s (expose %q)", from, hostPort, host, port, target.Expose)
	}
}

var urlPattern = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s,'"\]]+`)

// urlHosts returns host:port of every URL in s that names a host.
func urlHosts(s string) []string {
	var out []string
	for _, raw := range urlPattern.FindAllString(s, -1) {
		u, err := url.Parse(raw)
		// A shell variable ($$m in the file) is resolved by the script, not by compose.
		if err != nil || u.Hostname() == "" || strings.Contains(raw, "$") {
			continue
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		out = append(out, u.Hostname()+":"+port)
	}
	return out
}

var absPath = regexp.MustCompile(`(?:^|[\s=@])(/[A-Za-z0-9._/-]+)`)

func absPaths(s string) []string {
	var out []string
	for _, m := range absPath.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

func underMount(s composeService, p string) bool {
	for _, m := range s.mounts() {
		if p == m.target || strings.HasPrefix(p, m.target+"/") {
			return true
		}
	}
	return false
}

func volumeWritten(f composeFile, volume string) bool {
	for _, s := range f.Services {
		for _, m := range s.mounts() {
			if m.source == volume && !m.readOnly {
				return true
			}
		}
	}
	return false
}

var getenv = regexp.MustCompile(`os\.(?:Getenv|LookupEnv)\("([A-Z0-9_]+)"\)`)

// productEnv are the environment variables the product's code reads (os.Getenv/LookupEnv of the
// packages the binary is built from).
func productEnv(t *testing.T) []string {
	t.Helper()
	out := run(t, "go", "list", "-C", root(), "-deps", "-f", `{{if .Module}}{{if .Module.Main}}{{.Dir}}|{{join .GoFiles ","}}{{end}}{{end}}`, "./cmd/kubesearch")
	var names []string
	for line := range strings.Lines(string(out)) {
		dir, files, _ := strings.Cut(strings.TrimSpace(line), "|")
		for _, file := range strings.Split(files, ",") {
			b, err := os.ReadFile(filepath.Join(dir, file))
			if err != nil {
				continue
			}
			for _, m := range getenv.FindAllStringSubmatch(string(b), -1) {
				names = append(names, m[1])
			}
		}
	}
	return names
}

// The Dashboards objects the compose file imports only aggregate on fields the index mapping makes
// aggregatable.
func TestDashboardsAggregateMappedFields(t *testing.T) {
	fields := mappedFields(t)
	b, err := os.ReadFile(filepath.Join(root(), "dashboards", "kubesearch.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for line := range strings.Lines(string(b)) {
		var obj struct {
			Type       string `json:"type"`
			ID         string `json:"id"`
			Attributes struct {
				Title         string   `json:"title"`
				TimeFieldName string   `json:"timeFieldName"`
				VisState      string   `json:"visState"`
				Columns       []string `json:"columns"`
			} `json:"attributes"`
			References []struct{ Type, ID string } `json:"references"`
		}
		if err := yaml.Unmarshal([]byte(line), &obj); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		kinds[obj.Type]++
		if obj.Type == "index-pattern" {
			if obj.Attributes.Title != "kubernetes-*" || fields[obj.Attributes.TimeFieldName] != "date" {
				t.Errorf("index pattern %q with time field %q (%s): want kubernetes-* and a date field", obj.Attributes.Title, obj.Attributes.TimeFieldName, fields[obj.Attributes.TimeFieldName])
			}
		}
		for _, c := range obj.Attributes.Columns {
			if _, ok := fields[c]; !ok {
				t.Errorf("%s %s: column %s is not in the mapping", obj.Type, obj.ID, c)
			}
		}
		if obj.Attributes.VisState != "" {
			var vis struct {
				Aggs []struct {
					Type   string `json:"type"`
					Params struct {
						Field string `json:"field"`
					} `json:"params"`
				} `json:"aggs"`
			}
			if err := yaml.Unmarshal([]byte(obj.Attributes.VisState), &vis); err != nil {
				t.Fatal(err)
			}
			for _, a := range vis.Aggs {
				if a.Params.Field == "" {
					continue
				}
				switch typ := fields[a.Params.Field]; typ {
				case "keyword", "long", "integer", "date", "boolean", "ip":
				default:
					t.Errorf("visualization %s: %s aggregation on %s, mapped as %q: not aggregatable", obj.ID, a.Type, a.Params.Field, typ)
				}
			}
		}
	}
	if kinds["index-pattern"] != 1 || kinds["dashboard"] != 1 || kinds["visualization"] < 3 || kinds["search"] < 1 {
		t.Errorf("objects %v: want one index pattern, one dashboard, visualizations and saved searches", kinds)
	}
}

// mappedFields are the top-level fields of mappings/kubernetes.json and their types.
func mappedFields(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(), "mappings", "kubernetes.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tmpl struct {
		Template struct {
			Mappings struct {
				Properties map[string]struct {
					Type string `json:"type"`
				} `json:"properties"`
			} `json:"mappings"`
		} `json:"template"`
	}
	if err := yaml.Unmarshal(b, &tmpl); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range tmpl.Template.Mappings.Properties {
		out[k] = v.Type
	}
	if len(out) < 10 {
		t.Fatalf("mappings/kubernetes.json: only %d fields read", len(out))
	}
	return out
}
