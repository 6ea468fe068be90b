package main

import (
	"cmp"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"text/tabwriter"

	"github.com/prometheus/client_golang/prometheus"
)

// Set with -ldflags "-X main.buildVersion=… -X main.buildRevision=… -X main.buildTime=…" where the build has no
// VCS information of its own (the Docker image: its build context leaves .git out). Each one that is set wins
// over what the Go toolchain stamped.
var (
	buildVersion  string
	buildRevision string
	buildTime     string
)

// buildInfo is what the binary knows about its own build.
type buildInfo struct {
	Version   string // the main module's version: a tag, a pseudo-version (+dirty when modified), or "(devel)"
	Revision  string // the VCS revision (commit hash); "" when unknown
	Time      string // the revision's commit time, RFC 3339; "" when unknown
	Modified  string // "true" or "false": whether the work tree had changes; "" when unknown
	GoVersion string
}

// readBuildInfo reads what the toolchain stamped (vcs.* inside a git checkout), then the -ldflags values.
func readBuildInfo() buildInfo {
	b := buildInfo{Version: "(devel)", GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			b.Version = bi.Main.Version
		}
		b.GoVersion = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.time":
				b.Time = s.Value
			case "vcs.modified":
				b.Modified = s.Value
			}
		}
	}
	if buildRevision != "" {
		b.Revision, b.Modified = buildRevision, ""
	}
	b.Version, b.Time = cmp.Or(buildVersion, b.Version), cmp.Or(buildTime, b.Time)
	return b
}

const versionUsage = `Usage: dedupeworker version

Prints the version of the binary: the main module's version (a tag, a pseudo-version, or "(devel)"), the VCS
revision it was built from, that revision's time, whether the work tree had uncommitted changes, and the Go
version. "unknown" means the build recorded nothing (built with -buildvcs=false, or outside a git checkout).

`

func runVersion(args []string, stdout io.Writer) error {
	fs := newFlagSet("version", versionUsage)
	if err := parseFlagsOnly(fs, args); err != nil {
		return err
	}
	return writeVersion(stdout, readBuildInfo())
}

func writeVersion(w io.Writer, b buildInfo) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "dedupeworker %s\n", b.Version)
	for _, f := range [][2]string{{"revision", b.Revision}, {"time", b.Time}, {"modified", b.Modified}} {
		fmt.Fprintf(tw, "%s\t%s\n", f[0], cmp.Or(f[1], "unknown"))
	}
	fmt.Fprintf(tw, "go\t%s\n", b.GoVersion)
	return tw.Flush()
}

// buildInfoGauge is dedupeworker_build_info: always 1, labelled with what `dedupeworker version` prints, the
// -ldflags values included, which collectors.NewBuildInfoCollector (go_build_info) lacks in the Docker image
// (built without .git: "(devel)" and no revision).
func buildInfoGauge(b buildInfo) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "dedupeworker_build_info",
		Help: "Always 1: the build that runs, as `dedupeworker version` prints it (version, VCS revision, Go version).",
		// "unknown" as `dedupeworker version` says; an empty label would read as no label at all.
		ConstLabels: prometheus.Labels{"version": b.Version, "revision": cmp.Or(b.Revision, "unknown"), "goversion": b.GoVersion},
	})
	g.Set(1)
	return g
}
