package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func init() { commands = append(commands, command{"version", newVersionCmd}) }

// buildInfo is debug.ReadBuildInfo, replaceable in tests.
var buildInfo = debug.ReadBuildInfo

// versionInfo is `ckpt version --json`, documented in docs/cli-json.md.
type versionInfo struct {
	Version  string `json:"version"`  // module version: a tag, a pseudo-version, or "(devel)"
	Revision string `json:"revision"` // VCS revision, "" when none was recorded
	Time     string `json:"time"`     // commit time of Revision (RFC 3339), "" when unknown
	Modified bool   `json:"modified"` // the working tree had uncommitted changes
	Go       string `json:"go"`       // the Go toolchain that built the binary
}

// readVersion collects versionInfo from the build information.
func readVersion() versionInfo {
	v, _ := readBuildVersion()
	return v
}

// readBuildVersion is readVersion, and whether the binary holds build
// information (parsed once: its parse is a good part of start-up).
func readBuildVersion() (versionInfo, bool) {
	v := versionInfo{Version: "unknown", Go: runtime.Version()}
	bi, ok := buildInfo()
	if !ok {
		return v, false
	}
	v.Version = bi.Main.Version
	if v.Version == "" {
		v.Version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v, true
}

// versionString is the module version and the VCS revision the binary was
// built from: "v0.3.0", or "(devel)" for a build from a clone, then
// "revision 1a2b3c4d5e6f (modified), 2026-11-23T10:00:00Z" when the build
// recorded one (go build in a git checkout does).
func versionString() string {
	info, ok := readBuildVersion()
	if !ok {
		return "unknown (no build information in the binary), " + info.Go
	}
	v := info.Version
	if rev := info.Revision; rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		v += ", revision " + rev
		if info.Modified {
			v += " (modified)"
		}
		if info.Time != "" {
			v += ", " + info.Time
		}
	} else {
		v += ", no VCS revision recorded (built outside a git clone, or with -buildvcs=false)"
	}
	return v + ", " + info.Go
}

func newVersionCmd(s *streams) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version and the source revision ckpt was built from",
		Long: `version prints the module version (a tagged release, or "(devel)" for a build
from a clone), the git revision and commit time recorded at build time, and
the Go version. ckpt --version prints the same line.`,
		Example: `  ckpt version
  ckpt --version
  ckpt version --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if asJSON {
				enc := json.NewEncoder(s.Out)
				enc.SetIndent("", "  ")
				return enc.Encode(readVersion())
			}
			_, err := fmt.Fprintf(s.Out, "ckpt %s\n", versionString())
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object (schema in docs/cli-json.md)")
	return cmd
}
