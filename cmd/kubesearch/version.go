package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
)

// version and commit are stamped at build time:
//
//	go build -ldflags "-X main.version=v0.3.0 -X main.commit=$(git rev-parse HEAD)" ./cmd/kubesearch
//
// Left empty, they come from the build information the Go toolchain records (the module version for
// `go install ...@version`, the VCS revision for a build inside a checkout).
var (
	version string
	commit  string
)

// buildVersion is what `kubesearch version` prints.
type buildVersion struct {
	Version string
	Commit  string
	Go      string
}

func currentVersion() buildVersion {
	v := buildVersion{Version: version, Commit: commit, Go: runtime.Version()}
	if info, ok := debug.ReadBuildInfo(); ok {
		if v.Version == "" && info.Main.Version != "" {
			v.Version = info.Main.Version
		}
		if v.Commit == "" {
			modified := false
			for _, s := range info.Settings {
				switch s.Key {
				case "vcs.revision":
					v.Commit = s.Value
				case "vcs.modified":
					modified = s.Value == "true"
				}
			}
			if modified && v.Commit != "" {
				v.Commit += "-dirty"
			}
		}
	}
	if v.Version == "" {
		v.Version = "(devel)"
	}
	if v.Commit == "" {
		v.Commit = "unknown"
	}
	return v
}

func versionCommand(*flag.FlagSet) func(context.Context, *slog.Logger) error {
	return func(context.Context, *slog.Logger) error {
		v := currentVersion()
		_, err := fmt.Fprintf(os.Stdout, "kubesearch %s\ncommit: %s\ngo: %s %s/%s\n", v.Version, v.Commit, v.Go, runtime.GOOS, runtime.GOARCH)
		return err
	}
}
