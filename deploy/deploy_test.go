// Package deploy_test checks the deployment artefacts under deploy/ against the code they deploy: the Kubernetes
// manifests against internal/config (variables, defaults, the HTTP port and routes) and keys (the sources file),
// and the Grafana dashboard and Prometheus alert rules against the metrics pipeline.NewMetrics registers.
// It is black-box: it reads the files and uses only the packages' exported APIs.
package deploy_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

	"github.com/prometheus/client_golang/prometheus"
	yaml "go.yaml.in/yaml/v3"

	"github.com/dedupeworker/dedupeworker/internal/config"
	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

const (
	k8sDir        = "k8s/base" // the kustomize base; k8s/overlays/keda adds the ScaledObject
	dashboardFile = "grafana/dedupeworker.json"
	alertsFile    = "prometheus/alerts.yaml"
	operationsMD  = "../OPERATIONS.md"
	workerCmdDir  = "../cmd/dedupeworker"
)

// ---------------------------------------------------------------------------------------------------------------
// Manifests

// object is one Kubernetes document: its identity, plus the node to decode the rest from.
type object struct {
	File string
	Doc  int
	Kind string
	Name string
	Node *yaml.Node
}

func (o object) String() string {
	return fmt.Sprintf("%s %s (%s, document %d)", o.Kind, o.Name, o.File, o.Doc)
}

func (o object) decode(t *testing.T, v any) {
	t.Helper()
	if err := o.Node.Decode(v); err != nil {
		t.Fatalf("%s: %v", o, err)
	}
}

type manifests struct {
	objects []object
	raw     map[string][]byte // file name -> content
	kustom  kustomization
}

type kustomization struct {
	APIVersion string   `yaml:"apiVersion"`
	Kind       string   `yaml:"kind"`
	Resources  []string `yaml:"resources"`
}

// loadManifests parses every YAML file of the base (multi-document), its kustomization and the generated Secrets.
func loadManifests(t *testing.T) *manifests {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(k8sDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob(filepath.Join(k8sDir, "*.yml"))
	files = append(files, more...)
	if len(files) == 0 {
		t.Fatalf("no manifests under deploy/%s", k8sDir)
	}
	m := &manifests{raw: map[string][]byte{}}
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(path)
		m.raw[name] = data
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for i := 0; ; i++ {
			var n yaml.Node
			err := dec.Decode(&n)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: document %d: %v", name, i, err)
			}
			if len(n.Content) == 0 { // an empty document (a stray ---)
				continue
			}
			var head struct {
				APIVersion string `yaml:"apiVersion"`
				Kind       string `yaml:"kind"`
				Metadata   struct {
					Name string `yaml:"name"`
				} `yaml:"metadata"`
			}
			if err := n.Decode(&head); err != nil {
				t.Fatalf("%s: document %d: %v", name, i, err)
			}
			if head.Kind == "Kustomization" {
				if err := n.Decode(&m.kustom); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				continue
			}
			if head.APIVersion == "" || head.Kind == "" || head.Metadata.Name == "" {
				t.Errorf("%s: document %d lacks apiVersion, kind or metadata.name", name, i)
				continue
			}
			m.objects = append(m.objects, object{File: name, Doc: i, Kind: head.Kind, Name: head.Metadata.Name, Node: &n})
		}
	}
	return withGenerated(t, m)
}

// one returns the only object of a kind.
func (m *manifests) one(t *testing.T, kind string) object {
	t.Helper()
	var found []object
	for _, o := range m.objects {
		if o.Kind == kind {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want exactly one %s in deploy/k8s, found %d", kind, len(found))
	}
	return found[0]
}

func (m *manifests) named(t *testing.T, kind, name string) (object, bool) {
	t.Helper()
	for _, o := range m.objects {
		if o.Kind == kind && o.Name == name {
			return o, true
		}
	}
	return object{}, false
}

type probe struct {
	HTTPGet *struct {
		Path string    `yaml:"path"`
		Port yaml.Node `yaml:"port"`
	} `yaml:"httpGet"`
}

type container struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Args    []string `yaml:"args"`
	EnvFrom []struct {
		ConfigMapRef *struct {
			Name string `yaml:"name"`
		} `yaml:"configMapRef"`
		SecretRef *struct {
			Name string `yaml:"name"`
		} `yaml:"secretRef"`
	} `yaml:"envFrom"`
	Env []struct {
		Name      string    `yaml:"name"`
		Value     *string   `yaml:"value"`
		ValueFrom yaml.Node `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	StartupProbe   *probe `yaml:"startupProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext struct {
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
		Privileged               *bool `yaml:"privileged"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
			Add  []string `yaml:"add"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		SubPath   string `yaml:"subPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"volumeMounts"`
}

type deployment struct {
	Spec struct {
		Replicas *int `yaml:"replicas"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"metadata"`
			Spec struct {
				TerminationGracePeriodSeconds *int `yaml:"terminationGracePeriodSeconds"`
				SecurityContext               struct {
					RunAsNonRoot   *bool `yaml:"runAsNonRoot"`
					RunAsUser      *int  `yaml:"runAsUser"`
					SeccompProfile struct {
						Type string `yaml:"type"`
					} `yaml:"seccompProfile"`
				} `yaml:"securityContext"`
				Containers []container `yaml:"containers"`
				Volumes    []struct {
					Name      string `yaml:"name"`
					ConfigMap *struct {
						Name string `yaml:"name"`
					} `yaml:"configMap"`
					Secret *struct {
						SecretName string `yaml:"secretName"`
					} `yaml:"secret"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type configMap struct {
	Data map[string]string `yaml:"data"`
}

type secret struct {
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
}

func (s secret) get(key string) ([]byte, bool) {
	if v, ok := s.StringData[key]; ok {
		return []byte(v), true
	}
	if v, ok := s.Data[key]; ok {
		b, err := base64.StdEncoding.DecodeString(v)
		return b, err == nil
	}
	return nil, false
}

// worker is the parsed Deployment with its worker container.
type worker struct {
	obj object
	d   deployment
	c   container
}

func loadWorker(t *testing.T, m *manifests) worker {
	t.Helper()
	obj := m.mustNamed(t, "Deployment", workerName)
	var d deployment
	obj.decode(t, &d)
	cs := d.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("%s: want one container, found %d", obj, len(cs))
	}
	return worker{obj: obj, d: d, c: cs[0]}
}

// metricsPort is the container port named "metrics".
func (w worker) metricsPort(t *testing.T) int {
	t.Helper()
	for _, p := range w.c.Ports {
		if p.Name == "metrics" {
			return p.ContainerPort
		}
	}
	t.Fatalf("%s: container %s has no port named metrics", w.obj, w.c.Name)
	return 0
}

// env resolves the container's environment as far as the manifests define it: envFrom ConfigMaps/Secrets, then
// env entries with a literal value (which win, as in Kubernetes).
func (w worker) env(t *testing.T, m *manifests) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, ef := range w.c.EnvFrom {
		switch {
		case ef.ConfigMapRef != nil:
			o, ok := m.named(t, "ConfigMap", ef.ConfigMapRef.Name)
			if !ok {
				t.Fatalf("%s: envFrom ConfigMap %q is not in deploy/k8s", w.obj, ef.ConfigMapRef.Name)
			}
			var cm configMap
			o.decode(t, &cm)
			for k, v := range cm.Data {
				env[k] = v
			}
		case ef.SecretRef != nil:
			o, ok := m.named(t, "Secret", ef.SecretRef.Name)
			if !ok {
				t.Fatalf("%s: envFrom Secret %q is not in deploy/k8s", w.obj, ef.SecretRef.Name)
			}
			var s secret
			o.decode(t, &s)
			for k := range s.StringData {
				v, _ := s.get(k)
				env[k] = string(v)
			}
			for k := range s.Data {
				v, _ := s.get(k)
				env[k] = string(v)
			}
		}
	}
	for _, e := range w.c.Env {
		if e.Value != nil {
			env[e.Name] = *e.Value
		} else {
			env[e.Name] = "" // from a field or resource reference: present, value unknown here
		}
	}
	return env
}

// file resolves a path inside the container to the ConfigMap or Secret key mounted there.
func (w worker) file(t *testing.T, m *manifests, path string) (content []byte, kind string, readOnly bool) {
	t.Helper()
	for _, vm := range w.c.VolumeMounts {
		var key string
		switch {
		case vm.SubPath != "" && vm.MountPath == path:
			key = vm.SubPath
		case vm.SubPath == "" && strings.HasPrefix(path, strings.TrimSuffix(vm.MountPath, "/")+"/"):
			key = strings.TrimPrefix(path, strings.TrimSuffix(vm.MountPath, "/")+"/")
			if strings.Contains(key, "/") {
				continue
			}
		default:
			continue
		}
		for _, v := range w.d.Spec.Template.Spec.Volumes {
			if v.Name != vm.Name {
				continue
			}
			switch {
			case v.ConfigMap != nil:
				o, ok := m.named(t, "ConfigMap", v.ConfigMap.Name)
				if !ok {
					t.Fatalf("volume %s: ConfigMap %q is not in deploy/k8s", v.Name, v.ConfigMap.Name)
				}
				var cm configMap
				o.decode(t, &cm)
				data, ok := cm.Data[key]
				if !ok {
					t.Fatalf("%s is mounted from ConfigMap %s, which has no key %q", path, v.ConfigMap.Name, key)
				}
				return []byte(data), "ConfigMap", vm.ReadOnly
			case v.Secret != nil:
				o, ok := m.named(t, "Secret", v.Secret.SecretName)
				if !ok {
					t.Fatalf("volume %s: Secret %q is not in deploy/k8s", v.Name, v.Secret.SecretName)
				}
				var s secret
				o.decode(t, &s)
				data, ok := s.get(key)
				if !ok {
					t.Fatalf("%s is mounted from Secret %s, which has no key %q", path, v.Secret.SecretName, key)
				}
				return data, "Secret", vm.ReadOnly
			}
		}
	}
	t.Fatalf("%s: no ConfigMap or Secret volume of container %s is mounted at %s", w.obj, w.c.Name, path)
	return nil, "", false
}

// cleanEnv unsets every DEDUPE_* variable of the test process for the test's duration.
func cleanEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, config.Prefix+"_") {
			t.Setenv(k, "") // registers the restore
			os.Unsetenv(k)
		}
	}
}

// defaultConfig is config.Load() in an environment without any DEDUPE_* variable.
func defaultConfig(t *testing.T) config.Config {
	t.Helper()
	cleanEnv(t)
	cfg, err := config.Load()
	if err != nil {
		t.Fatalf("config.Load() with no DEDUPE_* set: %v", err)
	}
	return cfg
}

// manifestConfig is config.Load() in the environment the manifests give the worker, with the files it names
// (sources file, NATS creds) written to temporary files holding the mounted ConfigMap/Secret content.
func manifestConfig(t *testing.T, m *manifests, w worker) (config.Config, map[string]string) {
	t.Helper()
	env := w.env(t, m)
	cleanEnv(t)
	dir := t.TempDir()
	for i, name := range []string{"DEDUPE_SOURCES_FILE", "DEDUPE_NATS_CREDS", "DEDUPE_NATS_NKEY_SEED_FILE",
		"DEDUPE_NATS_TLS_CA", "DEDUPE_NATS_TLS_CERT", "DEDUPE_NATS_TLS_KEY"} {
		path, ok := env[name]
		if !ok || path == "" {
			continue
		}
		data, _, _ := w.file(t, m, path)
		local := filepath.Join(dir, strconv.Itoa(i)+"-"+filepath.Base(path))
		if err := os.WriteFile(local, data, 0o600); err != nil {
			t.Fatal(err)
		}
		env[name] = local
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	cfg, err := config.Load()
	if err != nil {
		t.Fatalf("the manifests' environment does not load: %v", err)
	}
	return cfg, w.env(t, m)
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("address %q: port: %v", addr, err)
	}
	return n
}

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
	for _, id := range []string{"github", "stripe", "orders", "billing", "forms", "legacy"} {
		if _, ok := src.Specs[id]; !ok {
			t.Errorf("source %q is missing from the sources file", id)
		}
	}
	if !slices.Equal(src.WithoutDedupe, []string{"legacy"}) {
		t.Errorf("sources without dedupe = %v, want [legacy]", src.WithoutDedupe)
	}
}

// ---------------------------------------------------------------------------------------------------------------
// Metrics: the dashboard and the alerts use only what the worker exports.

// recorder registers collectors into a registry and keeps them, so that every metric's descriptor can be listed,
// including vectors that have no child yet (Gather leaves those out).
type recorder struct {
	*prometheus.Registry
	collectors []prometheus.Collector
}

func (r *recorder) Register(c prometheus.Collector) error {
	if err := r.Registry.Register(c); err != nil {
		return err
	}
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

var (
	descName   = regexp.MustCompile(`fqName: "([^"]+)"`)
	descLabels = regexp.MustCompile(`variableLabels: \{([^{}]*)\}\}$`)
	descConst  = regexp.MustCompile(`constLabels: \{([^{}]*)\}`)
)

type exported struct {
	labels map[string][]string // metric name -> label names
	types  map[string]string   // metric name -> type (COUNTER, HISTOGRAM, ...); gathered families only
}

func workerMetrics(t *testing.T) exported {
	t.Helper()
	rec := &recorder{Registry: prometheus.NewRegistry()}
	_ = pipeline.NewMetrics(rec)
	if len(rec.collectors) == 0 {
		t.Fatal("pipeline.NewMetrics registered no collector")
	}
	ex := exported{labels: map[string][]string{}, types: map[string]string{}}
	for _, c := range rec.collectors {
		ch := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			s := d.String()
			n := descName.FindStringSubmatch(s)
			if n == nil {
				t.Fatalf("cannot read a metric name from %s", s)
			}
			var labels []string
			if l := descLabels.FindStringSubmatch(s); l != nil && l[1] != "" {
				for _, name := range strings.Split(l[1], ",") {
					name = strings.TrimSuffix(strings.TrimPrefix(name, "c("), ")")
					labels = append(labels, name)
				}
			}
			if l := descConst.FindStringSubmatch(s); l != nil && l[1] != "" {
				for _, pair := range strings.Split(l[1], ",") {
					if k, _, ok := strings.Cut(pair, "="); ok {
						labels = append(labels, k)
					}
				}
			}
			ex.labels[n[1]] = labels
		}
	}
	fams, err := rec.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, f := range fams {
		ex.types[f.GetName()] = f.GetType().String()
		if _, ok := ex.labels[f.GetName()]; !ok {
			ex.labels[f.GetName()] = nil
		}
	}
	return ex
}

var (
	metricRef   = regexp.MustCompile(`dedupeworker_[a-z_]+`)
	selectorRef = regexp.MustCompile(`(dedupeworker_[a-z_]+)\{([^}]*)\}`)
	matcherRef  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	groupingRef = regexp.MustCompile(`\b(?:by|without|on|ignoring)\s*\(([^)]*)\)`)
	// Labels Prometheus attaches to every scraped series (or histogram buckets carry).
	targetLabels = []string{"le", "instance", "job", "pod", "namespace", "container", "service", "endpoint", "node"}
)

// baseName strips the suffixes Prometheus adds to histogram and summary series.
func baseName(s string) (name, suffix string) {
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if strings.HasSuffix(s, suf) {
			return strings.TrimSuffix(s, suf), suf
		}
	}
	return s, ""
}

// checkExpr checks that every dedupeworker_ metric an expression names is exported, with the right type for a
// histogram suffix, and that the labels it matches on or groups by exist.
func checkExpr(t *testing.T, ex exported, where, expr string, used map[string]bool) {
	t.Helper()
	names := metricRef.FindAllString(expr, -1)
	allowed := map[string]bool{}
	for _, l := range targetLabels {
		allowed[l] = true
	}
	for _, raw := range names {
		name, suffix := baseName(raw)
		if _, ok := ex.labels[raw]; ok && suffix != "" { // a counter that really ends in _count, say
			name, suffix = raw, ""
		}
		labels, ok := ex.labels[name]
		if !ok {
			t.Errorf("%s: %s is not a metric the worker exports (expr %q)", where, raw, expr)
			continue
		}
		used[name] = true
		for _, l := range labels {
			allowed[l] = true
		}
		if suffix != "" {
			typ, gathered := ex.types[name]
			switch {
			case !gathered: // a vector with no child yet: its type is not visible
			case suffix == "_bucket" && typ != "HISTOGRAM":
				t.Errorf("%s: %s: %s is a %s, not a histogram", where, raw, name, typ)
			case typ != "HISTOGRAM" && typ != "SUMMARY":
				t.Errorf("%s: %s uses %s, but %s is a %s", where, raw, suffix, name, typ)
			}
		}
	}
	for _, sel := range selectorRef.FindAllStringSubmatch(expr, -1) {
		name, _ := baseName(sel[1])
		labels, ok := ex.labels[name]
		if !ok {
			continue
		}
		for _, mt := range matcherRef.FindAllStringSubmatch(sel[2], -1) {
			if !slices.Contains(labels, mt[1]) && !slices.Contains(targetLabels, mt[1]) {
				t.Errorf("%s: %s has no label %q (labels: %v)", where, name, mt[1], labels)
			}
		}
	}
	for _, g := range groupingRef.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(g[1], ",") {
			if l = strings.TrimSpace(l); l != "" && !allowed[l] {
				t.Errorf("%s: groups by %q, which none of its metrics has (expr %q)", where, l, expr)
			}
		}
	}
	if err := balanced(expr); err != nil {
		t.Errorf("%s: %v in %q", where, err, expr)
	}
}

func balanced(s string) error {
	var stack []rune
	inStr := rune(0)
	for _, r := range s {
		switch {
		case inStr != 0:
			if r == inStr {
				inStr = 0
			}
		case r == '"' || r == '\'' || r == '`':
			inStr = r
		case r == '(' || r == '{' || r == '[':
			stack = append(stack, r)
		case r == ')' || r == '}' || r == ']':
			open := map[rune]rune{')': '(', '}': '{', ']': '['}[r]
			if len(stack) == 0 || stack[len(stack)-1] != open {
				return fmt.Errorf("unbalanced %q", r)
			}
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) > 0 || inStr != 0 {
		return errors.New("unclosed bracket or string")
	}
	return nil
}

// dashboardQueries walks the dashboard JSON and returns every "expr", and every string "query"/"definition".
func dashboardQueries(v any, path string, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			p := path + "." + k
			if s, ok := c.(string); ok && (k == "expr" || k == "query" || k == "definition") {
				if strings.Contains(s, "dedupeworker_") || k == "expr" {
					out[p] = s
				}
				continue
			}
			dashboardQueries(c, p, out)
		}
	case []any:
		for i, c := range x {
			dashboardQueries(c, fmt.Sprintf("%s[%d]", path, i), out)
		}
	}
}

type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []dashPanel `json:"panels"`
}

type dashPanel struct {
	ID         int             `json:"id"`
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	Datasource json.RawMessage `json:"datasource"`
	Targets    []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []dashPanel `json:"panels"`
}

func loadDashboard(t *testing.T) (dashboard, any) {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s is not valid JSON: %v", dashboardFile, err)
	}
	var generic any
	_ = json.Unmarshal(data, &generic)
	return d, generic
}

func TestDashboardIsValid(t *testing.T) {
	d, _ := loadDashboard(t)
	if d.Title == "" || d.UID == "" {
		t.Error("dashboard needs a title and a uid")
	}
	dsVar := ""
	for _, v := range d.Templating.List {
		if v.Type == "datasource" && v.Query == "prometheus" {
			dsVar = v.Name
		}
	}
	if dsVar == "" {
		t.Fatal("dashboard has no Prometheus datasource template variable")
	}
	var all []dashPanel
	var walk func([]dashPanel)
	walk = func(ps []dashPanel) {
		for _, p := range ps {
			all = append(all, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	ids := map[int]bool{}
	queries := 0
	for _, p := range all {
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		queries++
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q has an empty query", p.Title)
			}
		}
		if ds := string(p.Datasource); !strings.Contains(ds, "${"+dsVar+"}") && !strings.Contains(ds, "${DS_PROMETHEUS}") {
			t.Errorf("panel %q datasource %s does not use the ${%s} variable", p.Title, ds, dsVar)
		}
	}
	if queries < 10 {
		t.Errorf("dashboard has %d query panels, want at least 10", queries)
	}
}

func TestDashboardAndAlertsUseExportedMetrics(t *testing.T) {
	ex := workerMetrics(t)
	for _, want := range []string{"dedupeworker_envelopes_total", "dedupeworker_claim_duration_seconds", "dedupeworker_ready"} {
		if _, ok := ex.labels[want]; !ok {
			t.Fatalf("pipeline.NewMetrics does not export %s; exported: %v", want, keysOf(ex.labels))
		}
	}
	used := map[string]bool{}

	_, generic := loadDashboard(t)
	qs := map[string]string{}
	dashboardQueries(generic, "dashboard", qs)
	if len(qs) == 0 {
		t.Fatal("no queries found in the dashboard")
	}
	for where, q := range qs {
		checkExpr(t, ex, where, q, used)
	}
	dashUsed := copyUsed(used)

	for _, r := range loadAlerts(t) {
		checkExpr(t, ex, "alert "+r.Alert, r.Expr, used)
	}
	// Every metric the worker exports is on the dashboard.
	for name := range ex.labels {
		if strings.HasPrefix(name, "dedupeworker_") && !dashUsed[name] {
			t.Errorf("the dashboard shows nothing of %s", name)
		}
	}
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func copyUsed(m map[string]bool) map[string]bool {
	out := make(map[string]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// ---------------------------------------------------------------------------------------------------------------
// Alerts

type rule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func loadAlerts(t *testing.T) []rule {
	t.Helper()
	data, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []rule `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	var rules []rule
	for _, g := range f.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("%s: group %q needs a name and rules", alertsFile, g.Name)
		}
		rules = append(rules, g.Rules...)
	}
	return rules
}

// anchors are the GitHub heading anchors of a Markdown document.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	inFence := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		out[b.String()] = true
	}
	for _, m := range regexp.MustCompile(`<a (?:id|name)="([^"]+)"`).FindAllStringSubmatch(string(data), -1) {
		out[m[1]] = true
	}
	return out
}

func TestAlertRules(t *testing.T) {
	rules := loadAlerts(t)
	ops := anchors(t, operationsMD)
	seen := map[string]bool{}
	for _, r := range rules {
		if r.Alert == "" {
			continue
		}
		if seen[r.Alert] {
			t.Errorf("alert %s is defined twice", r.Alert)
		}
		seen[r.Alert] = true
		if strings.TrimSpace(r.Expr) == "" {
			t.Errorf("alert %s has no expr", r.Alert)
		}
		if r.For != "" {
			if _, err := time.ParseDuration(r.For); err != nil {
				t.Errorf("alert %s: for %q: %v", r.Alert, r.For, err)
			}
		}
		if !slices.Contains([]string{"critical", "warning", "info"}, r.Labels["severity"]) {
			t.Errorf("alert %s: severity %q, want critical, warning or info", r.Alert, r.Labels["severity"])
		}
		for _, a := range []string{"summary", "description", "runbook"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("alert %s has no %s annotation", r.Alert, a)
			}
		}
		rb := r.Annotations["runbook"]
		_, anchor, ok := strings.Cut(rb, "OPERATIONS.md#")
		if !ok {
			t.Errorf("alert %s: runbook %q does not point into OPERATIONS.md", r.Alert, rb)
		} else if !ops[anchor] {
			t.Errorf("alert %s: runbook anchor #%s is not a heading of OPERATIONS.md", r.Alert, anchor)
		}
	}
	// The situations the alerts must cover, by the metric each one watches.
	want := map[string]string{
		"dedupeworker_consumer_pending":              "a growing lag",
		"dedupeworker_window_errors_total":           "window errors",
		`outcome="dead_letter"`:                      "dead letters",
		"dedupeworker_sources_without_dedupe":        "sources without dedupe",
		"dedupeworker_ready == 0":                    "a worker not ready",
		"(sum(dedupeworker_ready) or vector(0)) < 1": "no worker up",
	}
	for needle, what := range want {
		found := false
		for _, r := range rules {
			if strings.Contains(r.Expr, needle) {
				found = true
			}
		}
		if !found {
			t.Errorf("no alert for %s (an expr containing %q)", what, needle)
		}
	}
	for _, r := range rules {
		if strings.Contains(r.Expr, "sources_without_dedupe") && r.Labels["severity"] != "info" {
			t.Errorf("alert %s: sources without dedupe should be severity info", r.Alert)
		}
	}
}

func TestOperationsLinks(t *testing.T) {
	data, err := os.ReadFile(operationsMD)
	if err != nil {
		t.Fatal(err)
	}
	ops := anchors(t, operationsMD)
	for _, m := range regexp.MustCompile(`\]\(#([^)]+)\)`).FindAllStringSubmatch(string(data), -1) {
		if !ops[m[1]] {
			t.Errorf("OPERATIONS.md links to #%s, which is not one of its headings", m[1])
		}
	}
	for _, m := range regexp.MustCompile(`\]\((deploy/[^)#]*)\)`).FindAllStringSubmatch(string(data), -1) {
		if _, err := os.Stat(filepath.Join("..", m[1])); err != nil {
			t.Errorf("OPERATIONS.md links to %s: %v", m[1], err)
		}
	}
	for _, r := range loadAlerts(t) {
		if r.Alert != "" && !strings.Contains(string(data), "### "+r.Alert+"\n") {
			t.Errorf("OPERATIONS.md has no runbook section \"### %s\"", r.Alert)
		}
	}
}
