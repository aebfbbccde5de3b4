package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// runVersion prints what this binary was built from.
func runVersion(args []string, stdout, stderr io.Writer) error {
	fs := commandFlags("version", "version", "Prints the module version, the revision this binary was built from and its Go version.", stderr)
	if err := parseArgs(fs, args, 0); err != nil {
		return err
	}
	info, _ := debug.ReadBuildInfo() // nil without build information: versionText says unknown
	fmt.Fprint(stdout, versionText(info))
	return nil
}

// versionText is the build of info: the main module's version, the
// version control revision and time (and whether the tree had changes),
// the Go version and platform.
func versionText(info *debug.BuildInfo) string {
	version, goVersion := "(unknown)", runtime.Version()
	vcs := vcsSettings(info)
	if info != nil {
		if info.Main.Version != "" {
			version = info.Main.Version
		}
		if info.GoVersion != "" {
			goVersion = info.GoVersion
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "mnemos %s\n", version)
	if rev := vcs["vcs.revision"]; rev != "" {
		fmt.Fprintf(&b, "revision %s", rev)
		if t := vcs["vcs.time"]; t != "" {
			fmt.Fprintf(&b, " (%s)", t)
		}
		if vcs["vcs.modified"] == "true" {
			b.WriteString(", with uncommitted changes")
		}
		b.WriteString("\n")
	} else {
		b.WriteString("revision unknown (built without version control information)\n")
	}
	fmt.Fprintf(&b, "%s %s/%s\n", goVersion, runtime.GOOS, runtime.GOARCH)
	return b.String()
}

// vcsSettings are the version control settings of info ("vcs.revision",
// "vcs.time", "vcs.modified"); none for a nil info.
func vcsSettings(info *debug.BuildInfo) map[string]string {
	vcs := map[string]string{}
	if info != nil {
		for _, s := range info.Settings {
			vcs[s.Key] = s.Value
		}
	}
	return vcs
}

// buildCommit is the revision info was built from, for a report's machine
// line: the commit, and whether the tree had changes; empty when the
// build has no version control information (go run, a test binary).
func buildCommit(info *debug.BuildInfo) string {
	vcs := vcsSettings(info)
	rev := vcs["vcs.revision"]
	if rev != "" && vcs["vcs.modified"] == "true" {
		rev += " with uncommitted changes"
	}
	return rev
}
