// Command image assembles kubesearch's container image without a Docker engine: the same image the
// top-level Dockerfile builds, from scratch plus the static binary, the CA certificates and an
// /etc/passwd naming the non-root user. It writes an OCI image layout (a folder) and/or a tarball for
// `docker load`, with the entrypoint, user, environment and org.opencontainers.image labels the
// Dockerfile declares.
//
//	go run ./image --binary bin/linux-amd64/kubesearch --version v0.3.0 --commit abc123 \
//	  --oci-layout bin/image/oci --tarball bin/image/kubesearch.tar
//
// Files and timestamps are fixed (--created, default SOURCE_DATE_EPOCH or 1970), so the same inputs
// give the same digests.
package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The runtime user and the paths, as in the Dockerfile.
const (
	uid        = 65532
	userName   = "kubesearch"
	home       = "/home/kubesearch"
	binaryPath = "/usr/local/bin/kubesearch"
	caPath     = "/etc/ssl/certs/ca-certificates.crt"
)

type options struct {
	binary, caFile, version, commit, source, tag, arch string
	created                                            time.Time
	ociLayout, tarball                                 string
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.binary, "binary", "", "static linux kubesearch binary (CGO_ENABLED=0) (required)")
	fs.StringVar(&o.caFile, "ca-certificates", caPath, "PEM bundle of CA certificates copied to "+caPath)
	fs.StringVar(&o.version, "version", "dev", "version label (the binary's -X main.version)")
	fs.StringVar(&o.commit, "commit", "unknown", "revision label (the binary's -X main.commit)")
	fs.StringVar(&o.source, "source", "https://github.com/kubesearch/kubesearch", "org.opencontainers.image.source")
	fs.StringVar(&o.tag, "tag", "", "image reference written into the tarball and the layout (default kubesearch/kubesearch:<version>)")
	fs.StringVar(&o.arch, "arch", "amd64", "GOARCH of the binary, recorded in the image config")
	created := fs.String("created", "", "creation time, RFC 3339 (default: $SOURCE_DATE_EPOCH, else 1970-01-01)")
	fs.StringVar(&o.ociLayout, "oci-layout", "", "write an OCI image layout into this folder")
	fs.StringVar(&o.tarball, "tarball", "", "write a `docker load` tarball to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var errs []error
	if o.binary == "" {
		errs = append(errs, errors.New("--binary: required"))
	}
	if o.ociLayout == "" && o.tarball == "" {
		errs = append(errs, errors.New("--oci-layout, --tarball: at least one"))
	}
	if o.tag == "" {
		o.tag = "kubesearch/kubesearch:" + o.version
	}
	t, err := creationTime(*created)
	if err != nil {
		errs = append(errs, err)
	}
	o.created = t
	if err := errors.Join(errs...); err != nil {
		return err
	}
	img, err := build(o)
	if err != nil {
		return err
	}
	ref, err := name.NewTag(o.tag)
	if err != nil {
		return fmt.Errorf("--tag: %w", err)
	}
	if o.tarball != "" {
		if err := os.MkdirAll(filepath.Dir(o.tarball), 0o755); err != nil {
			return err
		}
		if err := tarball.WriteToFile(o.tarball, ref, img); err != nil {
			return fmt.Errorf("write tarball %s: %w", o.tarball, err)
		}
	}
	if o.ociLayout != "" {
		if err := os.RemoveAll(o.ociLayout); err != nil {
			return err
		}
		p, err := layout.Write(o.ociLayout, empty.Index)
		if err != nil {
			return fmt.Errorf("write OCI layout %s: %w", o.ociLayout, err)
		}
		if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref.String()})); err != nil {
			return fmt.Errorf("write OCI layout %s: %w", o.ociLayout, err)
		}
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s %s\n", ref, digest)
	return nil
}

func creationTime(flagValue string) (time.Time, error) {
	if flagValue != "" {
		t, err := time.Parse(time.RFC3339, flagValue)
		if err != nil {
			return time.Time{}, fmt.Errorf("--created: %w", err)
		}
		return t.UTC(), nil
	}
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH: %w", err)
		}
		return time.Unix(n, 0).UTC(), nil
	}
	return time.Unix(0, 0).UTC(), nil
}

func build(o options) (v1.Image, error) {
	bin, err := os.ReadFile(o.binary)
	if err != nil {
		return nil, fmt.Errorf("--binary: %w", err)
	}
	if err := checkStatic(o.binary, o.arch); err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(o.caFile)
	if err != nil {
		return nil, fmt.Errorf("--ca-certificates: %w", err)
	}
	rootfs, err := rootfsTar(o.created, bin, ca)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(rootfs)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	cfg := &v1.ConfigFile{
		Architecture: o.arch,
		OS:           "linux",
		RootFS:       v1.RootFS{Type: "layers"},
		Config: v1.Config{
			User:       fmt.Sprintf("%d:%d", uid, uid),
			Entrypoint: []string{binaryPath},
			Cmd:        []string{"--help"},
			WorkingDir: home,
			Env: []string{
				"PATH=/usr/local/bin",
				"HOME=" + home,
				"SSL_CERT_FILE=" + caPath,
			},
			Labels: map[string]string{
				"org.opencontainers.image.title":         "kubesearch",
				"org.opencontainers.image.description":   "Multi-cluster Kubernetes search: collector, indexer, query API and standalone mode in one binary",
				"org.opencontainers.image.version":       o.version,
				"org.opencontainers.image.revision":      o.commit,
				"org.opencontainers.image.source":        o.source,
				"org.opencontainers.image.base.name":     "scratch",
				"org.opencontainers.image.created":       o.created.Format(time.RFC3339),
				"org.opencontainers.image.documentation": o.source + "#readme",
			},
		},
	}
	img, err := mutate.ConfigFile(empty.Image, cfg)
	if err != nil {
		return nil, err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: o.created},
			CreatedBy: "tests/packaging/tools/image: scratch + kubesearch, CA certificates, /etc/passwd",
		},
	})
	if err != nil {
		return nil, err
	}
	return mutate.CreatedAt(img, v1.Time{Time: o.created})
}

// checkStatic refuses a binary the scratch image could not run: not ELF for the architecture, or
// dynamically linked (it would need a loader and libc).
func checkStatic(path, arch string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("--binary %s: %w", path, err)
	}
	defer f.Close()
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]
	if want == elf.EM_NONE {
		return fmt.Errorf("--arch %s: amd64 or arm64", arch)
	}
	if f.Machine != want {
		return fmt.Errorf("--binary %s: built for %v, not %s", path, f.Machine, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("--binary %s: dynamically linked; build it with CGO_ENABLED=0", path)
		}
	}
	return nil
}

// rootfsTar is the image's one layer: what the Dockerfile's runtime stage holds.
func rootfsTar(mtime time.Time, bin, ca []byte) ([]byte, error) {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:%s:/sbin/nologin\n", userName, uid, uid, userName, home)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", userName, uid)
	entries := []struct {
		name     string
		mode     int64
		owner    int
		contents []byte
		dir      bool
	}{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, contents: []byte(passwd)},
		{name: "etc/group", mode: 0o644, contents: []byte(group)},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, contents: ca},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/kubesearch/", mode: 0o750, owner: uid, dir: true},
		{name: "data/", mode: 0o750, owner: uid, dir: true},
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: "usr/", mode: 0o755, dir: true},
		{name: "usr/local/", mode: 0o755, dir: true},
		{name: "usr/local/bin/", mode: 0o755, dir: true},
		{name: "usr/local/bin/kubesearch", mode: 0o755, contents: bin},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.owner, Gid: e.owner, ModTime: mtime}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.contents))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.contents); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
