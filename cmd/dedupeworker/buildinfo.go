package main

import (
	"cmp"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// buildInfoGauge is dedupeworker_build_info: 1, labelled with the build, so that a dashboard can tell which
// replicas run which build and an alert can join on it. It carries what `dedupeworker version` prints, the
// -ldflags values included: collectors.NewBuildInfoCollector (go_build_info) only knows what the toolchain stamped,
// which in the Docker image (built without .git) is "(devel)" and no revision.
func buildInfoGauge(b buildInfo) prometheus.Gauge {
	// "unknown" as `dedupeworker version` says; an empty label would read as no label at all.
	revision := cmp.Or(b.Revision, "unknown")
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "dedupeworker_build_info",
		Help: "Always 1: the build that runs, as `dedupeworker version` prints it (version, VCS revision, Go version).",
		ConstLabels: prometheus.Labels{
			"version":   b.Version,
			"revision":  revision,
			"goversion": b.GoVersion,
		},
	})
	g.Set(1)
	return g
}

// newRoleRegistry is the registry of a long-running role (run, ingest): the Go runtime, the process and the
// build. It exists before the role connects, so that /metrics answers from the start.
func newRoleRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfoGauge(readBuildInfo()),
	)
	return reg
}
