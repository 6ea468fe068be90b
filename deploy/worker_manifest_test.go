package deploy_test

// The worker's manifests against the code: the kustomization lists every manifest, the metrics port, probes,
// variables, grace period, pod security and disruption budget match internal/config and the worker's routes, the
// ScaledObject watches the worker's consumer, and the sources file loads.

import (
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/dedupeworker/dedupeworker/internal/config"
	"github.com/dedupeworker/dedupeworker/keys"
)

func TestKustomizationListsEveryManifest(t *testing.T) {
	m := loadManifests(t)
	if m.kustom.Kind != "Kustomization" {
		t.Fatalf("deploy/k8s has no kustomization.yaml")
	}
	var files []string
	for name := range m.raw {
		if name != "kustomization.yaml" {
			files = append(files, name)
		}
	}
	sort.Strings(files)
	listed := slices.Clone(m.kustom.Resources)
	sort.Strings(listed)
	if !slices.Equal(files, listed) {
		t.Errorf("kustomization.yaml resources = %v, want every manifest of deploy/k8s: %v", listed, files)
	}
	kinds := map[string]bool{}
	for _, o := range m.objects {
		kinds[o.Kind] = true
	}
	for _, k := range []string{"Deployment", "ConfigMap", "Secret", "PodDisruptionBudget"} { // ScaledObject: overlay
		if !kinds[k] {
			t.Errorf("deploy/k8s has no %s", k)
		}
	}
}

func TestMetricsPortMatchesConfigDefault(t *testing.T) {
	m := loadManifests(t)
	w := loadWorker(t, m)

	f, ok := reflect.TypeOf(config.Config{}).FieldByName("HTTPAddr")
	if !ok {
		t.Fatal("config.Config has no HTTPAddr field (DEDUPE_HTTP_ADDR)")
	}
	tagPort := portOf(t, f.Tag.Get("default"))
	loadedPort := portOf(t, defaultConfig(t).HTTPAddr)
	if tagPort != loadedPort {
		t.Fatalf("HTTPAddr default tag port %d != config.Load() default port %d", tagPort, loadedPort)
	}
	port := w.metricsPort(t)
	if port != tagPort {
		t.Errorf("container port %d != DEDUPE_HTTP_ADDR default port %d", port, tagPort)
	}
	cfg, _ := manifestConfig(t, m, w)
	if p := portOf(t, cfg.HTTPAddr); p != port {
		t.Errorf("the manifests set DEDUPE_HTTP_ADDR=%q, but the container port is %d", cfg.HTTPAddr, port)
	}
	ann := w.d.Spec.Template.Metadata.Annotations
	if ann["prometheus.io/scrape"] != "true" {
		t.Errorf("pod annotation prometheus.io/scrape = %q, want \"true\"", ann["prometheus.io/scrape"])
	}
	if ann["prometheus.io/port"] != strconv.Itoa(port) {
		t.Errorf("pod annotation prometheus.io/port = %q, want %d", ann["prometheus.io/port"], port)
	}
	if p := ann["prometheus.io/path"]; p != "" && p != "/metrics" {
		t.Errorf("pod annotation prometheus.io/path = %q, want /metrics", p)
	}
	for _, o := range m.objects {
		if o.Kind != "Service" || o.Name == ingestName { // the receiver's Service: ingest_test.go
			continue
		}
		var svc struct {
			Spec struct {
				Selector map[string]string `yaml:"selector"`
				Ports    []struct {
					Name       string    `yaml:"name"`
					Port       int       `yaml:"port"`
					TargetPort yaml.Node `yaml:"targetPort"`
				} `yaml:"ports"`
			} `yaml:"spec"`
		}
		o.decode(t, &svc)
		if !selects(svc.Spec.Selector, w.d.Spec.Template.Metadata.Labels) {
			t.Errorf("%s: selector %v does not select the worker pods %v", o, svc.Spec.Selector, w.d.Spec.Template.Metadata.Labels)
		}
		for _, p := range svc.Spec.Ports {
			if tp := p.TargetPort.Value; tp != "metrics" && tp != strconv.Itoa(port) {
				t.Errorf("%s: port %s targets %q, want metrics or %d", o, p.Name, tp, port)
			}
		}
	}
}

// routes are the worker's HTTP routes as registered in cmd/dedupeworker (net/http method patterns).
func routes(t *testing.T) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(workerCmdDir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", workerCmdDir, err)
	}
	var src strings.Builder
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.Write(b)
	}
	return src.String()
}

func TestProbesUseWorkerRoutes(t *testing.T) {
	m := loadManifests(t)
	w := loadWorker(t, m)
	src := routes(t)
	for _, r := range []string{`"GET /healthz"`, `"GET /readyz"`, `"GET /metrics"`} {
		if !strings.Contains(src, r) {
			t.Errorf("cmd/dedupeworker registers no route %s", r)
		}
	}
	port := w.metricsPort(t)
	check := func(name string, p *probe, path string, required bool) {
		t.Helper()
		if p == nil {
			if required {
				t.Errorf("%s: no %s", w.obj, name)
			}
			return
		}
		if p.HTTPGet == nil {
			t.Errorf("%s: %s is not an httpGet probe", w.obj, name)
			return
		}
		if p.HTTPGet.Path != path {
			t.Errorf("%s: %s path = %q, want %q", w.obj, name, p.HTTPGet.Path, path)
		}
		if pv := p.HTTPGet.Port.Value; pv != "metrics" && pv != strconv.Itoa(port) {
			t.Errorf("%s: %s port = %q, want metrics or %d", w.obj, name, pv, port)
		}
	}
	check("livenessProbe", w.c.LivenessProbe, "/healthz", true)
	check("readinessProbe", w.c.ReadinessProbe, "/readyz", true)
	check("startupProbe", w.c.StartupProbe, "/healthz", false)
}

var dedupeVar = regexp.MustCompile(`\b` + config.Prefix + `_[A-Z0-9_]+`)

func TestEnvVarsAreConfigVariables(t *testing.T) {
	m := loadManifests(t)
	w := loadWorker(t, m)
	known := map[string]bool{}
	for _, v := range config.Variables() {
		known[v] = true
	}
	if len(known) == 0 {
		t.Fatal("config.Variables() is empty")
	}
	for name, data := range m.raw {
		for _, v := range dedupeVar.FindAllString(string(data), -1) {
			if !known[v] {
				t.Errorf("%s mentions %s, which the worker does not read (config.Variables())", name, v)
			}
		}
	}
	env := w.env(t, m)
	for k := range env {
		if strings.HasPrefix(k, config.Prefix+"_") && !known[k] {
			t.Errorf("the worker's environment sets %s, which the worker does not read", k)
		}
	}
	want := map[string]string{
		"DEDUPE_SOURCES_FILE":     "/etc/dedupeworker/sources.yaml",
		"DEDUPE_NATS_CREDS":       "/etc/dedupeworker/nats/user.creds",
		"DEDUPE_REPLICAS":         "3",
		"DEDUPE_LOG_FORMAT":       "json",
		"DEDUPE_SHUTDOWN_TIMEOUT": "30s",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	if env["DEDUPE_NATS_URL"] == "" {
		t.Error("DEDUPE_NATS_URL is not set: the worker would start an embedded server in the pod")
	}
	// The creds file is a read-only Secret mount; the sources file a ConfigMap.
	if _, kind, ro := w.file(t, m, env["DEDUPE_NATS_CREDS"]); kind != "Secret" || !ro {
		t.Errorf("DEDUPE_NATS_CREDS %s: mounted from a %s, readOnly=%v; want a read-only Secret", env["DEDUPE_NATS_CREDS"], kind, ro)
	}
	if _, kind, _ := w.file(t, m, env["DEDUPE_SOURCES_FILE"]); kind != "ConfigMap" {
		t.Errorf("DEDUPE_SOURCES_FILE %s: mounted from a %s, want a ConfigMap", env["DEDUPE_SOURCES_FILE"], kind)
	}
	// And the whole environment passes the worker's own validation.
	manifestConfig(t, m, w)
}

func TestGracePeriodExceedsShutdownTimeout(t *testing.T) {
	m := loadManifests(t)
	w := loadWorker(t, m)
	cfg, _ := manifestConfig(t, m, w)
	g := w.d.Spec.Template.Spec.TerminationGracePeriodSeconds
	if g == nil {
		t.Fatalf("%s: terminationGracePeriodSeconds is not set (Kubernetes default 30s)", w.obj)
	}
	grace := time.Duration(*g) * time.Second
	if grace <= cfg.ShutdownTimeout {
		t.Errorf("terminationGracePeriodSeconds %s <= DEDUPE_SHUTDOWN_TIMEOUT %s", grace, cfg.ShutdownTimeout)
	}
	// The whole shutdown (pipeline, NATS drain, servers) is bounded by DEDUPE_SHUTDOWN_TIMEOUT
	// (cmd/dedupeworker/worker.go); the grace period adds a margin for process exit and signal delivery.
	if min := cfg.ShutdownTimeout + 5*time.Second; grace < min {
		t.Errorf("terminationGracePeriodSeconds %s < DEDUPE_SHUTDOWN_TIMEOUT + 5s = %s", grace, min)
	}
}

func TestPodSecurityAndResources(t *testing.T) {
	m := loadManifests(t)
	w := loadWorker(t, m)
	ps := w.d.Spec.Template.Spec.SecurityContext
	if ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot {
		t.Error("pod securityContext.runAsNonRoot is not true")
	}
	if ps.RunAsUser != nil && *ps.RunAsUser == 0 {
		t.Error("pod securityContext.runAsUser is 0")
	}
	if ps.SeccompProfile.Type != "RuntimeDefault" {
		t.Errorf("pod seccompProfile = %q, want RuntimeDefault", ps.SeccompProfile.Type)
	}
	sc := w.c.SecurityContext
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("container allowPrivilegeEscalation is not false")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("container readOnlyRootFilesystem is not true")
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Error("container is privileged")
	}
	if !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
		t.Errorf("container capabilities drop %v add %v, want drop [ALL] and no add", sc.Capabilities.Drop, sc.Capabilities.Add)
	}
	for _, r := range []string{"cpu", "memory"} {
		if w.c.Resources.Requests[r] == "" || w.c.Resources.Limits[r] == "" {
			t.Errorf("container resources: %s request %q, limit %q; want both", r, w.c.Resources.Requests[r], w.c.Resources.Limits[r])
		}
	}
	if r := w.d.Spec.Replicas; r == nil || *r < 2 {
		t.Errorf("Deployment replicas = %v, want at least 2", r)
	}
	if !selects(w.d.Spec.Selector.MatchLabels, w.d.Spec.Template.Metadata.Labels) {
		t.Errorf("Deployment selector %v does not select its own pod labels %v", w.d.Spec.Selector.MatchLabels, w.d.Spec.Template.Metadata.Labels)
	}
}

func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func TestPodDisruptionBudget(t *testing.T) {
	m := loadManifests(t)
	w := loadWorker(t, m)
	o := m.mustNamed(t, "PodDisruptionBudget", workerName)
	var pdb struct {
		Spec struct {
			MinAvailable   any `yaml:"minAvailable"`
			MaxUnavailable any `yaml:"maxUnavailable"`
			Selector       struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
		} `yaml:"spec"`
	}
	o.decode(t, &pdb)
	if (pdb.Spec.MinAvailable == nil) == (pdb.Spec.MaxUnavailable == nil) {
		t.Errorf("%s: set exactly one of minAvailable, maxUnavailable", o)
	}
	if !selects(pdb.Spec.Selector.MatchLabels, w.d.Spec.Template.Metadata.Labels) {
		t.Errorf("%s: selector %v does not select the worker pods %v", o, pdb.Spec.Selector.MatchLabels, w.d.Spec.Template.Metadata.Labels)
	}
}

func TestScaledObjectWatchesTheWorkersConsumer(t *testing.T) {
	m := loadKEDAOverlay(t)
	w := loadWorker(t, m)
	cfg, _ := manifestConfig(t, m, w)
	def := defaultConfig(t)
	o := m.one(t, "ScaledObject")
	var so struct {
		APIVersion string `yaml:"apiVersion"`
		Spec       struct {
			ScaleTargetRef struct {
				Kind string `yaml:"kind"`
				Name string `yaml:"name"`
			} `yaml:"scaleTargetRef"`
			MinReplicaCount *int `yaml:"minReplicaCount"`
			MaxReplicaCount *int `yaml:"maxReplicaCount"`
			Triggers        []struct {
				Type     string            `yaml:"type"`
				Metadata map[string]string `yaml:"metadata"`
			} `yaml:"triggers"`
		} `yaml:"spec"`
	}
	o.decode(t, &so)
	if so.APIVersion != "keda.sh/v1alpha1" {
		t.Errorf("%s: apiVersion %q, want keda.sh/v1alpha1", o, so.APIVersion)
	}
	if so.Spec.ScaleTargetRef.Name != w.obj.Name || (so.Spec.ScaleTargetRef.Kind != "" && so.Spec.ScaleTargetRef.Kind != "Deployment") {
		t.Errorf("%s: scaleTargetRef %+v, want Deployment %s", o, so.Spec.ScaleTargetRef, w.obj.Name)
	}
	if so.Spec.MinReplicaCount == nil || so.Spec.MaxReplicaCount == nil || *so.Spec.MinReplicaCount < 1 ||
		*so.Spec.MaxReplicaCount < *so.Spec.MinReplicaCount {
		t.Errorf("%s: replica bounds min %v max %v; want 1 <= min <= max", o, so.Spec.MinReplicaCount, so.Spec.MaxReplicaCount)
	}
	if len(so.Spec.Triggers) != 1 || so.Spec.Triggers[0].Type != "nats-jetstream" {
		t.Fatalf("%s: want one nats-jetstream trigger, got %+v", o, so.Spec.Triggers)
	}
	md := so.Spec.Triggers[0].Metadata
	// The stream and consumer the worker uses as deployed, and as defaulted (the manifests don't override them).
	for key, want := range map[string][2]string{"stream": {cfg.InputStream, def.InputStream}, "consumer": {cfg.Consumer, def.Consumer}} {
		if md[key] != want[0] || md[key] != want[1] {
			t.Errorf("%s: trigger %s = %q, want the worker's %q (default %q)", o, key, md[key], want[0], want[1])
		}
	}
	if md["account"] == "" || md["natsServerMonitoringEndpoint"] == "" {
		t.Errorf("%s: trigger needs account and natsServerMonitoringEndpoint, got %v", o, md)
	}
	if _, _, err := net.SplitHostPort(md["natsServerMonitoringEndpoint"]); err != nil {
		t.Errorf("%s: natsServerMonitoringEndpoint %q is not host:port: %v", o, md["natsServerMonitoringEndpoint"], err)
	}
	for _, k := range []string{"lagThreshold", "activationLagThreshold"} {
		if n, err := strconv.Atoi(md[k]); err != nil || n < 0 || (k == "lagThreshold" && n == 0) {
			t.Errorf("%s: %s = %q, want a positive integer", o, k, md[k])
		}
	}
	for k := range md {
		if !slices.Contains([]string{"natsServerMonitoringEndpoint", "account", "stream", "consumer", "lagThreshold",
			"activationLagThreshold", "useHttps"}, k) {
			t.Errorf("%s: unknown nats-jetstream trigger metadata %q", o, k)
		}
	}
}

func TestSourcesFileLoads(t *testing.T) {
	m := loadManifests(t)
	w := loadWorker(t, m)
	env := w.env(t, m)
	doc, _, _ := w.file(t, m, env["DEDUPE_SOURCES_FILE"])
	src, err := keys.LoadSources(doc)
	if err != nil {
		t.Fatalf("the ConfigMap's sources file does not load: %v", err)
	}
	for _, id := range []string{"github", "stripe", "orders", "billing", "forms"} {
		if _, ok := src.Specs[id]; !ok {
			t.Errorf("source %q is missing from the sources file", id)
		}
	}
	// Every example source dedupes: a source without a rule sets dedupeworker_sources_without_dedupe, and a fresh
	// deploy of the base would fire DedupeworkerSourcesWithoutDedupe an hour later.
	if len(src.WithoutDedupe) > 0 {
		t.Errorf("sources without dedupe = %v, want none", src.WithoutDedupe)
	}
}
