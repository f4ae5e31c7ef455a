package main

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
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

func versionCommand(env lookupEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "version",
		GroupID: toolsGroup,
		Short:   "Print the version, commit and Go version of this binary",
		Example: "  kubesearch version",
	}
	return subcommand(cmd, env, func(flagGroups) runFunc {
		return func(context.Context, *slog.Logger) error {
			v := currentVersion()
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "kubesearch %s\ncommit: %s\ngo: %s %s/%s\n", v.Version, v.Commit, v.Go, runtime.GOOS, runtime.GOARCH)
			return err
		}
	})
}
