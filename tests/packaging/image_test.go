package packaging

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// The OCI image spec's shapes, as much of them as the checks read.
type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations"`
}

type ociIndex struct {
	SchemaVersion int             `json:"schemaVersion"`
	Manifests     []ociDescriptor `json:"manifests"`
}

type ociManifest struct {
	SchemaVersion int             `json:"schemaVersion"`
	MediaType     string          `json:"mediaType"`
	Config        ociDescriptor   `json:"config"`
	Layers        []ociDescriptor `json:"layers"`
}

type ociConfig struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Config       struct {
		User       string            `json:"User"`
		Entrypoint []string          `json:"Entrypoint"`
		Cmd        []string          `json:"Cmd"`
		Env        []string          `json:"Env"`
		WorkingDir string            `json:"WorkingDir"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
	RootFS struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// layerFile is one entry of the image's file system.
type layerFile struct {
	mode     int64
	uid, gid int
	dir      bool
	data     []byte
}

type image struct {
	manifestDigest string
	ref            string
	config         ociConfig
	configRaw      []byte
	files          map[string]layerFile
}

// buildImage runs tools/image on the static binary and returns the OCI layout folder and the tarball.
func buildImage(t *testing.T, dir string) (layout, tarball string) {
	t.Helper()
	layout, tarball = filepath.Join(dir, "oci"), filepath.Join(dir, "kubesearch.tar")
	run(t, tool(t, "image"), "--binary", kubesearchBinary(t), "--arch", "amd64", "--version", testVersion,
		"--commit", testCommit, "--created", "2026-01-02T03:04:05Z", "--oci-layout", layout, "--tarball", tarball)
	return layout, tarball
}

var (
	sharedOnce      sync.Once
	sharedLayoutDir string
)

// sharedLayout is one image built for the tests that only read it.
func sharedLayout(t *testing.T) string {
	t.Helper()
	sharedOnce.Do(func() {
		dir := filepath.Join(binDir, "image")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		sharedLayoutDir, _ = buildImage(t, dir)
	})
	if sharedLayoutDir == "" {
		t.Fatal("the image was not built (see the first test's failure)")
	}
	return sharedLayoutDir
}

// readBlob reads a blob of the layout and checks it against its digest and size.
func readBlob(t *testing.T, layout string, d ociDescriptor) []byte {
	t.Helper()
	algo, hexDigest, ok := strings.Cut(d.Digest, ":")
	if !ok || algo != "sha256" {
		t.Fatalf("digest %q: want sha256:<hex>", d.Digest)
	}
	b, err := os.ReadFile(filepath.Join(layout, "blobs", "sha256", hexDigest))
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != hexDigest {
		t.Fatalf("blob %s: content hashes to %x", d.Digest, sum)
	}
	if int64(len(b)) != d.Size {
		t.Fatalf("blob %s: %d bytes, descriptor says %d", d.Digest, len(b), d.Size)
	}
	return b
}

// readLayout reads an OCI image layout by the spec, without the library that wrote it.
func readLayout(t *testing.T, layout string) image {
	t.Helper()
	marker, err := os.ReadFile(filepath.Join(layout, "oci-layout"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Version string `json:"imageLayoutVersion"`
	}
	if err := json.Unmarshal(marker, &m); err != nil || m.Version != "1.0.0" {
		t.Fatalf("oci-layout = %s (%v), want imageLayoutVersion 1.0.0", marker, err)
	}
	var idx ociIndex
	b, err := os.ReadFile(filepath.Join(layout, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	if idx.SchemaVersion != 2 || len(idx.Manifests) != 1 {
		t.Fatalf("index.json: schemaVersion %d, %d manifests; want 2 and one image", idx.SchemaVersion, len(idx.Manifests))
	}
	md := idx.Manifests[0]
	if md.MediaType != "application/vnd.oci.image.manifest.v1+json" {
		t.Fatalf("manifest media type %q", md.MediaType)
	}
	var man ociManifest
	if err := json.Unmarshal(readBlob(t, layout, md), &man); err != nil {
		t.Fatal(err)
	}
	if man.Config.MediaType != "application/vnd.oci.image.config.v1+json" || len(man.Layers) != 1 {
		t.Fatalf("manifest: config %q, %d layers; want an OCI config and one layer", man.Config.MediaType, len(man.Layers))
	}
	img := image{manifestDigest: md.Digest, ref: md.Annotations["org.opencontainers.image.ref.name"], files: map[string]layerFile{}}
	img.configRaw = readBlob(t, layout, man.Config)
	if err := json.Unmarshal(img.configRaw, &img.config); err != nil {
		t.Fatal(err)
	}
	if man.Layers[0].MediaType != "application/vnd.oci.image.layer.v1.tar+gzip" {
		t.Fatalf("layer media type %q", man.Layers[0].MediaType)
	}
	gz, err := gzip.NewReader(bytes.NewReader(readBlob(t, layout, man.Layers[0])))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(gz)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(raw); img.config.RootFS.Type != "layers" || !slices.Equal(img.config.RootFS.DiffIDs, []string{"sha256:" + hex.EncodeToString(sum[:])}) {
		t.Fatalf("rootfs %+v does not name the layer's uncompressed digest sha256:%x", img.config.RootFS, sum)
	}
	tr := tar.NewReader(bytes.NewReader(raw))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		name := "/" + strings.TrimSuffix(path.Clean(h.Name), "/")
		img.files[name] = layerFile{mode: h.Mode, uid: h.Uid, gid: h.Gid, dir: h.Typeflag == tar.TypeDir, data: data}
	}
	return img
}

// The image the user runs: non-root user known to /etc/passwd, the binary as entrypoint, the labels,
// CA certificates — and the binary taken out of the layer runs `version` with the stamped version.
func TestImageLayoutAndTarball(t *testing.T) {
	layout := sharedLayout(t)
	tarball := filepath.Join(filepath.Dir(layout), "kubesearch.tar")
	img := readLayout(t, layout)
	cfg := img.config

	if img.ref != "kubesearch/kubesearch:"+testVersion {
		t.Errorf("ref name %q", img.ref)
	}
	if cfg.OS != "linux" || cfg.Architecture != "amd64" {
		t.Errorf("platform %s/%s, want linux/amd64", cfg.OS, cfg.Architecture)
	}
	if !slices.Equal(cfg.Config.Entrypoint, []string{"/usr/local/bin/kubesearch"}) {
		t.Errorf("entrypoint %q", cfg.Config.Entrypoint)
	}
	uid, gid, ok := strings.Cut(cfg.Config.User, ":")
	if !ok || uid == "0" || uid == "" || gid == "0" {
		t.Fatalf("user %q: want a non-root uid:gid", cfg.Config.User)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.title":    "kubesearch",
		"org.opencontainers.image.version":  testVersion,
		"org.opencontainers.image.revision": testCommit,
		"org.opencontainers.image.source":   "https://github.com/kubesearch/kubesearch",
		"org.opencontainers.image.created":  "2026-01-02T03:04:05Z",
	} {
		if got := cfg.Config.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}

	passwd, ok := img.files["/etc/passwd"]
	if !ok {
		t.Fatal("no /etc/passwd in the image")
	}
	var home string
	for line := range strings.Lines(string(passwd.data)) {
		f := strings.Split(strings.TrimSpace(line), ":")
		if len(f) == 7 && f[2] == uid {
			if f[0] != "kubesearch" || f[3] != gid {
				t.Errorf("/etc/passwd names uid %s as %q with group %s", uid, f[0], f[3])
			}
			home = f[5]
		}
	}
	if home == "" {
		t.Fatalf("/etc/passwd has no entry for uid %s:\n%s", uid, passwd.data)
	}
	if h, ok := img.files[home]; !ok || !h.dir || fmt.Sprint(h.uid) != uid {
		t.Errorf("home %s: %+v, want a folder owned by %s", home, h, uid)
	}
	if d, ok := img.files["/tmp"]; !ok || d.mode&0o1777 != 0o1777 {
		t.Errorf("/tmp: %+v, want mode 1777", d)
	}
	if !strings.Contains(string(img.files["/etc/group"].data), "kubesearch:x:"+gid+":") {
		t.Errorf("/etc/group has no group %s", gid)
	}
	ca := img.files["/etc/ssl/certs/ca-certificates.crt"]
	if pool := x509.NewCertPool(); len(ca.data) == 0 || !pool.AppendCertsFromPEM(ca.data) {
		t.Error("/etc/ssl/certs/ca-certificates.crt holds no PEM certificate")
	}
	if !slices.Contains(cfg.Config.Env, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt") {
		t.Errorf("env %q does not point SSL_CERT_FILE at the bundle", cfg.Config.Env)
	}
	bin, ok := img.files[cfg.Config.Entrypoint[0]]
	if !ok || bin.mode&0o755 != 0o755 {
		t.Fatalf("entrypoint %s: %+v, want an executable file", cfg.Config.Entrypoint[0], bin.mode)
	}

	// The binary of the layer runs, as the image's user when the test may switch users.
	// A folder of its own, which the image's user may enter (t.TempDir's parents are private).
	exeDir, err := os.MkdirTemp("", "kubesearch-image-bin")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(exeDir) })
	if err := os.Chmod(exeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(exeDir, "kubesearch")
	if err := os.WriteFile(exe, bin.data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "version")
	if os.Getuid() == 0 {
		var u, g uint32
		fmt.Sscan(uid, &u)
		fmt.Sscan(gid, &g)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u, Gid: g}}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubesearch version from the image: %v\n%s", err, out)
	}
	for _, want := range []string{"kubesearch " + testVersion + "\n", "commit: " + testCommit + "\n", "go: go1."} {
		if !strings.Contains(string(out), want) {
			t.Errorf("kubesearch version printed %q, want it to contain %q", out, want)
		}
	}

	// The docker-load tarball holds the same config, tagged.
	dockerConfig, tags := readDockerTarball(t, tarball)
	if !bytes.Equal(dockerConfig, img.configRaw) {
		t.Error("the tarball's image config differs from the OCI layout's")
	}
	if !slices.Equal(tags, []string{"kubesearch/kubesearch:" + testVersion}) {
		t.Errorf("tarball tags %q", tags)
	}

	// Same inputs, same image.
	layout2, _ := buildImage(t, t.TempDir())
	if again := readLayout(t, layout2); again.manifestDigest != img.manifestDigest {
		t.Errorf("rebuilt image digest %s, first %s: the build is not reproducible", again.manifestDigest, img.manifestDigest)
	}
}

// readDockerTarball returns the config and tags of a `docker save`-format tarball.
func readDockerTarball(t *testing.T, file string) ([]byte, []string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	entries := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Size < 1<<20 {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			entries[h.Name] = b
		} else {
			entries[h.Name] = nil
		}
	}
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(entries["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("manifest.json: %v (%d images)", err, len(manifest))
	}
	for _, l := range manifest[0].Layers {
		if _, ok := entries[l]; !ok {
			t.Errorf("layer %s named by manifest.json is not in the tarball", l)
		}
	}
	return entries[manifest[0].Config], manifest[0].RepoTags
}

// dockerfileStage is what the Dockerfile's last stage declares.
type dockerfileStage struct {
	user, workdir    string
	entrypoint, cmd  []string
	env, labels      map[string]string
	copyDestinations []string
}

// parseDockerfile reads the instructions of the Dockerfile's final stage (continuations joined).
func parseDockerfile(t *testing.T, file string) dockerfileStage {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	var cur strings.Builder
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		l := strings.TrimSpace(s.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if strings.HasSuffix(l, "\\") {
			cur.WriteString(strings.TrimSuffix(l, "\\") + " ")
			continue
		}
		cur.WriteString(l)
		lines = append(lines, cur.String())
		cur.Reset()
	}
	var st dockerfileStage
	for _, l := range lines {
		instr, rest, _ := strings.Cut(l, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(instr) {
		case "FROM":
			st = dockerfileStage{env: map[string]string{}, labels: map[string]string{}}
		case "USER":
			st.user = rest
		case "WORKDIR":
			st.workdir = rest
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(rest), &st.entrypoint); err != nil {
				t.Fatalf("ENTRYPOINT %s: want the exec (JSON) form: %v", rest, err)
			}
		case "CMD":
			if err := json.Unmarshal([]byte(rest), &st.cmd); err != nil {
				t.Fatalf("CMD %s: want the exec (JSON) form: %v", rest, err)
			}
		case "ENV", "LABEL":
			dst := st.env
			if strings.EqualFold(instr, "LABEL") {
				dst = st.labels
			}
			for _, kv := range splitKeyValues(rest) {
				k, v, _ := strings.Cut(kv, "=")
				dst[k] = strings.Trim(v, `"`)
			}
		case "COPY":
			f := strings.Fields(rest)
			st.copyDestinations = append(st.copyDestinations, strings.TrimSuffix(f[len(f)-1], "/"))
		}
	}
	return st
}

// splitKeyValues splits `k=v k2="a b"` at the spaces outside quotes.
func splitKeyValues(s string) []string {
	var out []string
	var cur strings.Builder
	quoted := false
	for _, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
			cur.WriteRune(r)
		case r == ' ' && !quoted:
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// The Dockerfile and the Go-assembled image are the same image: user, entrypoint, command, working
// folder, environment, label names (and their fixed values), and the paths of the file system.
func TestDockerfileMatchesAssembledImage(t *testing.T) {
	img := readLayout(t, sharedLayout(t))
	df := parseDockerfile(t, filepath.Join(root(), "Dockerfile"))
	cfg := img.config.Config
	if df.user != cfg.User {
		t.Errorf("USER %q, image %q", df.user, cfg.User)
	}
	if df.workdir != cfg.WorkingDir {
		t.Errorf("WORKDIR %q, image %q", df.workdir, cfg.WorkingDir)
	}
	if !slices.Equal(df.entrypoint, cfg.Entrypoint) || !slices.Equal(df.cmd, cfg.Cmd) {
		t.Errorf("ENTRYPOINT %q CMD %q, image %q %q", df.entrypoint, df.cmd, cfg.Entrypoint, cfg.Cmd)
	}
	var env []string
	for k, v := range df.env {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	imgEnv := slices.Sorted(slices.Values(cfg.Env))
	if !slices.Equal(env, imgEnv) {
		t.Errorf("ENV %q, image %q", env, imgEnv)
	}
	for k, v := range df.labels {
		got, ok := cfg.Labels[k]
		switch {
		case !ok:
			t.Errorf("LABEL %s is not on the assembled image", k)
		case !strings.Contains(v, "$") && got != v:
			t.Errorf("LABEL %s = %q, image %q", k, v, got)
		}
	}
	for k := range cfg.Labels {
		if _, ok := df.labels[k]; !ok {
			t.Errorf("label %s of the assembled image is not in the Dockerfile", k)
		}
	}
	for _, d := range df.copyDestinations {
		if _, ok := img.files[d]; !ok {
			t.Errorf("Dockerfile copies to %s, which the assembled image lacks", d)
		}
	}
}

// The Docker build context keeps every file the binary is built from: .dockerignore excludes none of
// the packages' Go or embedded files, nor go.mod and go.sum.
func TestDockerignoreKeepsTheBuildInputs(t *testing.T) {
	patterns := readDockerignore(t, filepath.Join(root(), ".dockerignore"))
	out := run(t, "go", "list", "-C", root(), "-deps", "-f", `{{if .Module}}{{if .Module.Main}}{{.Dir}}|{{join .GoFiles ","}}|{{join .EmbedFiles ","}}{{end}}{{end}}`, "./cmd/kubesearch")
	files := []string{"go.mod", "go.sum"}
	for line := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimSpace(line), "|")
		if len(f) != 3 {
			continue
		}
		rel, err := filepath.Rel(root(), f[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range append(strings.Split(f[1], ","), strings.Split(f[2], ",")...) {
			if name != "" {
				files = append(files, filepath.ToSlash(filepath.Join(rel, name)))
			}
		}
	}
	if len(files) < 20 {
		t.Fatalf("go list found only %d files", len(files))
	}
	for _, f := range files {
		if p := excludedBy(patterns, f); p != "" {
			t.Errorf("%s is a build input but .dockerignore excludes it (%q)", f, p)
		}
	}
	// And the pattern set does exclude what it says it does.
	for _, f := range []string{"tests/e2e/main_test.go", "collector/gate_test.go", "README.md", ".testbed/env"} {
		if excludedBy(patterns, f) == "" {
			t.Errorf("%s is in the build context", f)
		}
	}
}

func readDockerignore(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
			if strings.HasPrefix(l, "!") {
				t.Fatalf(".dockerignore: exceptions (%s) are not supported by this check", l)
			}
			out = append(out, strings.TrimPrefix(l, "/"))
		}
	}
	return out
}

// excludedBy returns the pattern excluding a path (or one of its parent folders), as Docker matches
// them: filepath.Match per segment, `**` for any number of segments.
func excludedBy(patterns []string, file string) string {
	parts := strings.Split(file, "/")
	for _, p := range patterns {
		for n := 1; n <= len(parts); n++ {
			if matchSegments(strings.Split(p, "/"), parts[:n]) {
				return p
			}
		}
	}
	return ""
}

func matchSegments(pattern, parts []string) bool {
	if len(pattern) == 0 {
		return len(parts) == 0
	}
	if pattern[0] == "**" {
		for i := 0; i <= len(parts); i++ {
			if matchSegments(pattern[1:], parts[i:]) {
				return true
			}
		}
		return false
	}
	if len(parts) == 0 {
		return false
	}
	ok, err := path.Match(pattern[0], parts[0])
	return err == nil && ok && matchSegments(pattern[1:], parts[1:])
}
