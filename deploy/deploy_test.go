// Package deploy_test checks the deployment artefacts under deploy/ against the code they deploy: the Kubernetes
// manifests against internal/config (variables, defaults, the HTTP port and routes) and keys (the sources file),
// and the Grafana dashboard and Prometheus alert rules against the metrics pipeline.NewMetrics registers.
// It is black-box: it reads the files and uses only the packages' exported APIs.
package deploy_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"github.com/dedupeworker/dedupeworker/internal/config"
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
