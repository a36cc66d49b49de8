package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = "dev"

// versionInfo is what `hookbox version --json` prints.
type versionInfo struct {
	Version   string `json:"version"`
	GoVersion string `json:"go_version"`
	// Commit is the VCS revision the binary was built from, when the Go
	// toolchain recorded one; Modified says the tree had local changes.
	Commit   string `json:"commit,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	OS       string `json:"os"`
	Arch     string `json:"arch"`
}

// String is the version with the commit's first 12 hex digits, if known.
func (v versionInfo) String() string {
	if len(v.Commit) >= 12 {
		return v.Version + " (" + v.Commit[:12] + ")"
	}
	return v.Version
}

// buildInfo collects the version, the Go version and the commit from the
// binary's build information.
func buildInfo() versionInfo {
	v := versionInfo{Version: version, GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	if info, ok := debug.ReadBuildInfo(); ok {
		if v.Version == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			v.Version = info.Main.Version // go install …@version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	return v
}

func newVersionCmd() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			v := buildInfo()
			if jsonOut {
				return writeJSONOut(cmd.OutOrStdout(), v)
			}
			fmt.Fprintln(cmd.OutOrStdout(), "hookbox", v.String())
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, `print {"version", "go_version", "commit", "modified", "os", "arch"} (commit and modified when the build recorded them)`)
	return cmd
}
