package deploy_test

// The webhook receiver, `dedupeworker ingest`, in the kustomize base: its Deployment, ConfigMap, Service,
// PodDisruptionBudget and Secrets (ingest-*.yaml and two secretGenerators), checked against internal/config (its
// settings), package receiver (the routes its probes and Prometheus ask, the secrets directory it reads) and the
// worker's manifests (what the two must share). The helpers at the top also let the worker's tests
// (deploy_test.go, kustomize_test.go, defaults_test.go) tell the worker's objects from the receiver's.

import (
	"cmp"
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	yaml "go.yaml.in/yaml/v3"

	"github.com/dedupeworker/dedupeworker/internal/config"
	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/receiver"
)

const (
	workerName        = "dedupeworker"                        // the worker's Deployment and PodDisruptionBudget
	ingestName        = "dedupeworker-ingest"                 // the receiver's Deployment, Service, PodDisruptionBudget
	workerCredsSecret = "dedupeworker-nats"                   // generated from user.creds
	ingestCredsSecret = "dedupeworker-ingest-nats"            // generated from ingest.creds
	webhookSecret     = "dedupeworker-ingest-webhook-secrets" // generated from webhook-secrets/*
	ingestCredsKey    = "ingest.creds"                        // the file and key of the receiver's NATS creds
	webhookDir        = "webhook-secrets"                     // the folder of the signing secrets, in the base
)

// mustNamed returns the object of a kind and name, or fails the test.
func (m *manifests) mustNamed(t *testing.T, kind, name string) object {
	t.Helper()
	o, ok := m.named(t, kind, name)
	if !ok {
		t.Fatalf("deploy/%s has no %s %s", k8sDir, kind, name)
	}
	return o
}

// loadIngest is the receiver's Deployment and its one container, in the form the worker's helpers take (env, file,
// manifestConfig).
func loadIngest(t *testing.T, m *manifests) worker {
	t.Helper()
	obj := m.mustNamed(t, "Deployment", ingestName)
	var d deployment
	obj.decode(t, &d)
	if cs := d.Spec.Template.Spec.Containers; len(cs) != 1 {
		t.Fatalf("%s: want one container, found %d", obj, len(cs))
	}
	return worker{obj: obj, d: d, c: d.Spec.Template.Spec.Containers[0]}
}

// workerGenerators is k with the worker's creds generator only (TestKustomizeBase checks that one).
func workerGenerators(k kustomizeFile) kustomizeFile {
	gens := k.SecretGenerator[:0:0]
	for _, g := range k.SecretGenerator {
		if g.Name == workerCredsSecret {
			gens = append(gens, g)
		}
	}
	k.SecretGenerator = gens
	return k
}

// workerKind is kind, or "" for the receiver's objects (their names start with ingestName), so that
// TestKustomizeBuild looks at the worker's Secret and Deployment only; TestIngestKustomizeBuild checks the rest.
func workerKind(kind, name string) string {
	if strings.HasPrefix(name, ingestName) {
		return ""
	}
	return kind
}

// ingestOperatorFile reports whether path (under deploy/) is one of the receiver's files the operator provides:
// its creds or a signing secret. The tests never copy or read them.
func ingestOperatorFile(path string) bool {
	path = filepath.ToSlash(path)
	return path == k8sDir+"/"+ingestCredsKey || strings.HasPrefix(path, k8sDir+"/"+webhookDir+"/")
}

// writeIngestFiles writes placeholders for every file the receiver's secretGenerators read into a copy of the base.
func writeIngestFiles(t *testing.T, base string) {
	t.Helper()
	for _, g := range readKustomization(t, k8sDir).SecretGenerator {
		if g.Name == workerCredsSecret {
			continue
		}
		for _, f := range g.Files {
			_, path := generatorFile(f)
			dst := filepath.Join(base, filepath.FromSlash(path))
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, []byte("not a real secret\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// composeHTTPAddrVar is the variable of a compose service's HTTP address: DEDUPE_INGEST_ADDR for the receiver,
// DEDUPE_HTTP_ADDR for a worker.
func composeHTTPAddrVar(svc composeService) string {
	if len(svc.Command) > 0 && svc.Command[0] == "ingest" {
		return "DEDUPE_INGEST_ADDR"
	}
	return "DEDUPE_HTTP_ADDR"
}

// ingestSetup is the receiver as the manifests deploy it.
type ingestSetup struct {
	m      *manifests
	w      worker // the receiver's Deployment
	cfg    config.Config
	env    map[string]string
	port   int // the container port named http
	labels map[string]string
}

func loadIngestSetup(t *testing.T) ingestSetup {
	t.Helper()
	m := loadManifests(t)
	w := loadIngest(t, m)
	cfg, env := manifestConfig(t, m, w)
	port := 0
	for _, p := range w.c.Ports {
		if p.Name == "http" {
			port = p.ContainerPort
		}
	}
	if port == 0 {
		t.Fatalf("%s: container %s has no port named http", w.obj, w.c.Name)
	}
	return ingestSetup{m: m, w: w, cfg: cfg, env: env, port: port, labels: w.d.Spec.Template.Metadata.Labels}
}

// secretDir resolves a directory of the container to the Secret mounted there whole (no subPath).
func (w worker) secretDir(t *testing.T, m *manifests, dir string) (name string, s secret, readOnly bool) {
	t.Helper()
	for _, vm := range w.c.VolumeMounts {
		if vm.SubPath != "" || strings.TrimSuffix(vm.MountPath, "/") != strings.TrimSuffix(dir, "/") {
			continue
		}
		for _, v := range w.d.Spec.Template.Spec.Volumes {
			if v.Name != vm.Name {
				continue
			}
			if v.Secret == nil {
				t.Fatalf("%s: %s is mounted from volume %s, which is not a Secret", w.obj, dir, v.Name)
			}
			o, ok := m.named(t, "Secret", v.Secret.SecretName)
			if !ok {
				t.Fatalf("%s: volume %s: Secret %q is not in deploy/k8s", w.obj, v.Name, v.Secret.SecretName)
			}
			o.decode(t, &s)
			return v.Secret.SecretName, s, vm.ReadOnly
		}
	}
	t.Fatalf("%s: nothing of container %s is mounted at the directory %s", w.obj, w.c.Name, dir)
	return "", secret{}, false
}

// keysOfSecret lists a Secret's keys, sorted.
func keysOfSecret(s secret) []string {
	out := slices.Collect(maps.Keys(s.StringData))
	for k := range s.Data {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// placeholderSecret is a well-formed secret for a verify scheme: base64 after whsec_ where the scheme decodes it.
func placeholderSecret(scheme string) string {
	if scheme == "svix" || scheme == "standard_webhooks" {
		return "whsec_dGVzdCBzZWNyZXQ=" // "test secret"
	}
	return "not-a-real-secret"
}

// checkSecretsServe loads the secrets of a directory the way `dedupeworker ingest` does and builds its policy: it
// fails the test as the receiver would fail its start (a file for an undeclared source, a signed source without a
// secret, a source without a verify block), and when a declared source is not served.
func checkSecretsServe(t *testing.T, where string, src keys.Sources, dir string) *receiver.Policy {
	t.Helper()
	secrets, err := receiver.LoadSecrets(receiver.SecretsConfig{Dir: dir, Sources: src.IDs()})
	if err != nil {
		t.Fatalf("%s: the receiver would not start: %v", where, err)
	}
	policy, err := receiver.NewPolicy(receiver.PolicyConfig{Sources: src, Secrets: secrets})
	if err != nil {
		t.Fatalf("%s: the receiver would not start: %v", where, err)
	}
	for _, u := range policy.Unserved() {
		t.Errorf("%s: source %s would not be served: %s", where, u.Source, u.Reason)
	}
	return policy
}

// TestIngestEnvironment: the receiver's environment is settings config reads and validates; it shares the worker's
// NATS server, input stream and prefix and sources file, with a NATS user of its own; its secrets directory is the
// webhook Secret, which holds a secret for every signed source and nothing for an undeclared one.
func TestIngestEnvironment(t *testing.T) {
	in := loadIngestSetup(t)
	m, w, env := in.m, in.w, in.env
	known := config.Variables()
	for k := range env {
		if strings.HasPrefix(k, config.Prefix+"_") && !slices.Contains(known, k) {
			t.Errorf("the receiver's environment sets %s, which config does not read", k)
		}
	}
	if !slices.Equal(w.c.Args, []string{"ingest"}) {
		t.Errorf("%s: args %q, want [ingest]", w.obj, w.c.Args)
	}
	wk := loadWorker(t, m)
	if w.c.Image != wk.c.Image {
		t.Errorf("%s: image %s, the worker's is %s: keep them on one release", w.obj, w.c.Image, wk.c.Image)
	}
	wcfg, wenv := manifestConfig(t, m, wk)
	if env["DEDUPE_NATS_URL"] == "" || env["DEDUPE_NATS_URL"] != wenv["DEDUPE_NATS_URL"] {
		t.Errorf("DEDUPE_NATS_URL: the receiver's %q, the worker's %q: want the same server", env["DEDUPE_NATS_URL"], wenv["DEDUPE_NATS_URL"])
	}
	cfg := in.cfg
	if cfg.InputStream != wcfg.InputStream || cfg.InputPrefix != wcfg.InputPrefix {
		t.Errorf("the receiver publishes to %s.> stored by %s, the worker consumes %s.> of %s", cfg.InputPrefix,
			cfg.InputStream, wcfg.InputPrefix, wcfg.InputStream)
	}
	srcDoc, kind, _ := w.file(t, m, env["DEDUPE_SOURCES_FILE"])
	workerDoc, _, _ := wk.file(t, m, wenv["DEDUPE_SOURCES_FILE"])
	if kind != "ConfigMap" || string(srcDoc) != string(workerDoc) {
		t.Errorf("DEDUPE_SOURCES_FILE: the receiver does not read the worker's sources file (from a %s)", kind)
	}

	// Its own NATS user: a read-only Secret other than the worker's, named as the generator names it.
	creds := env["DEDUPE_NATS_CREDS"]
	if filepath.Base(creds) != ingestCredsKey {
		t.Errorf("DEDUPE_NATS_CREDS %q, want a file named %s", creds, ingestCredsKey)
	}
	if _, kind, ro := w.file(t, m, creds); kind != "Secret" || !ro {
		t.Errorf("DEDUPE_NATS_CREDS %s: mounted from a %s, readOnly=%v; want a read-only Secret", creds, kind, ro)
	}
	if name, _, _ := w.secretDir(t, m, filepath.Dir(creds)); name != ingestCredsSecret {
		t.Errorf("DEDUPE_NATS_CREDS %s comes from Secret %s, want %s (a user with the ingest permissions only)", creds, name, ingestCredsSecret)
	}

	// The signing secrets: the Secret, mounted whole and read-only where DEDUPE_INGEST_SECRETS_DIR points, serves
	// every source of the sources file.
	dir := env["DEDUPE_INGEST_SECRETS_DIR"]
	if dir == "" || !filepath.IsAbs(dir) {
		t.Fatalf("DEDUPE_INGEST_SECRETS_DIR = %q, want the absolute path of the mounted Secret", dir)
	}
	name, sec, ro := w.secretDir(t, m, dir)
	if name != webhookSecret || !ro {
		t.Errorf("DEDUPE_INGEST_SECRETS_DIR %s: Secret %s, readOnly=%v; want %s, read-only", dir, name, ro, webhookSecret)
	}
	src, err := keys.LoadSources(srcDoc)
	if err != nil {
		t.Fatalf("the sources file does not load: %v", err)
	}
	local := t.TempDir()
	for _, key := range keysOfSecret(sec) {
		source := key[strings.LastIndex(key, ".")+1:] // <source> or <tenant>.<source>
		if err := os.WriteFile(filepath.Join(local, key), []byte(placeholderSecret(src.Verify[source].Scheme)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range src.IDs() {
		if _, ok := src.Verify[id]; !ok {
			t.Errorf("the sources file: source %s has no verify block: the receiver refuses to start", id)
		}
	}
	checkSecretsServe(t, "Secret "+webhookSecret+" (deploy/"+k8sDir+"/"+kustomFile+")", src, local)
}

// fakeJetStream stores nothing: the receiver's routes answer without a server.
type fakeJetStream struct{ streamErr error }

func (f fakeJetStream) PublishMsg(context.Context, *nats.Msg, ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	return &jetstream.PubAck{Stream: receiver.DefaultInputStream, Sequence: 1}, nil
}

func (f fakeJetStream) Stream(context.Context, string) (jetstream.Stream, error) {
	return nil, f.streamErr
}

// TestIngestProbesUseReceiverRoutes: the probes ask the container port the receiver listens on (DEDUPE_INGEST_ADDR),
// on paths the receiver answers: liveness and startup 200 while the process runs, readiness 200 when the input
// stream can be looked up and 503 when not; Prometheus's annotations name the same port and /metrics.
func TestIngestProbesUseReceiverRoutes(t *testing.T) {
	in := loadIngestSetup(t)
	w := in.w
	f, ok := reflect.TypeOf(config.Config{}).FieldByName("IngestAddr")
	if !ok {
		t.Fatal("config.Config has no IngestAddr field (DEDUPE_INGEST_ADDR)")
	}
	if def := portOf(t, f.Tag.Get("default")); def != in.port {
		t.Errorf("container port %d != DEDUPE_INGEST_ADDR default port %d", in.port, def)
	}
	if p := portOf(t, in.cfg.IngestAddr); p != in.port {
		t.Errorf("the manifests set DEDUPE_INGEST_ADDR=%q, but the container port is %d", in.cfg.IngestAddr, in.port)
	}

	serve := func(t *testing.T, js receiver.JetStream, path string) int {
		t.Helper()
		src, err := keys.LoadSources([]byte("sources: {legacy: {verify: none}}"))
		if err != nil {
			t.Fatal(err)
		}
		policy, err := receiver.NewPolicy(receiver.PolicyConfig{Sources: src})
		if err != nil {
			t.Fatal(err)
		}
		rcv, err := receiver.New(receiver.Config{JetStream: js, Policy: policy, Gatherer: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		rcv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code
	}
	ready, down := fakeJetStream{}, fakeJetStream{streamErr: jetstream.ErrStreamNotFound}
	check := func(name string, p *probe, path string, wantUp, wantDown int) {
		t.Helper()
		if p == nil || p.HTTPGet == nil {
			t.Errorf("%s: no httpGet %s", w.obj, name)
			return
		}
		if p.HTTPGet.Path != path {
			t.Errorf("%s: %s path = %q, want %q", w.obj, name, p.HTTPGet.Path, path)
		}
		if pv := p.HTTPGet.Port.Value; pv != "http" && pv != strconv.Itoa(in.port) {
			t.Errorf("%s: %s port = %q, want http or %d", w.obj, name, pv, in.port)
		}
		if got := serve(t, ready, p.HTTPGet.Path); got != wantUp {
			t.Errorf("%s: %s: the receiver answers GET %s with %d when the stream is there, want %d", w.obj, name, p.HTTPGet.Path, got, wantUp)
		}
		if got := serve(t, down, p.HTTPGet.Path); got != wantDown {
			t.Errorf("%s: %s: the receiver answers GET %s with %d without the stream, want %d", w.obj, name, p.HTTPGet.Path, got, wantDown)
		}
	}
	check("livenessProbe", w.c.LivenessProbe, "/healthz", http.StatusOK, http.StatusOK)
	check("startupProbe", w.c.StartupProbe, "/healthz", http.StatusOK, http.StatusOK)
	check("readinessProbe", w.c.ReadinessProbe, "/readyz", http.StatusOK, http.StatusServiceUnavailable)

	ann := w.d.Spec.Template.Metadata.Annotations
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != strconv.Itoa(in.port) {
		t.Errorf("%s: pod annotations prometheus.io/scrape %q, port %q; want \"true\" and %d", w.obj,
			ann["prometheus.io/scrape"], ann["prometheus.io/port"], in.port)
	}
	path := cmp.Or(ann["prometheus.io/path"], "/metrics")
	if got := serve(t, ready, path); got != http.StatusOK {
		t.Errorf("%s: prometheus.io/path %s: the receiver answers %d", w.obj, path, got)
	}
}

// TestIngestGracePeriodExceedsShutdownTimeout: Kubernetes counts the grace period from the start of the preStop
// hook, so it must hold the hook's sleep, the receiver's own shutdown (DEDUPE_SHUTDOWN_TIMEOUT bounds the HTTP
// shutdown and the NATS drain together) and a margin.
func TestIngestGracePeriodExceedsShutdownTimeout(t *testing.T) {
	in := loadIngestSetup(t)
	g := in.w.d.Spec.Template.Spec.TerminationGracePeriodSeconds
	if g == nil {
		t.Fatalf("%s: terminationGracePeriodSeconds is not set (Kubernetes default 30s)", in.w.obj)
	}
	var d struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Lifecycle struct {
							PreStop *struct {
								Sleep *struct {
									Seconds int `yaml:"seconds"`
								} `yaml:"sleep"`
								Exec    any `yaml:"exec"`
								HTTPGet any `yaml:"httpGet"`
							} `yaml:"preStop"`
						} `yaml:"lifecycle"`
					} `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	in.w.obj.decode(t, &d)
	var sleep time.Duration
	if ps := d.Spec.Template.Spec.Containers[0].Lifecycle.PreStop; ps != nil {
		if ps.Exec != nil {
			t.Errorf("%s: preStop exec: the image is distroless, with no shell or sleep to run", in.w.obj)
		}
		if ps.Sleep != nil {
			sleep = time.Duration(ps.Sleep.Seconds) * time.Second
		}
	}
	grace := time.Duration(*g) * time.Second
	if min := sleep + in.cfg.ShutdownTimeout + 5*time.Second; grace < min {
		t.Errorf("%s: terminationGracePeriodSeconds %s < preStop sleep %s + DEDUPE_SHUTDOWN_TIMEOUT %s + 5s",
			in.w.obj, grace, sleep, in.cfg.ShutdownTimeout)
	}
}

// quantity parses a Kubernetes memory quantity in bytes (plain, or with a binary or decimal suffix).
func quantity(t *testing.T, q string) int64 {
	t.Helper()
	m := regexp.MustCompile(`^([0-9]+)(Ki|Mi|Gi|Ti|k|M|G|T)?$`).FindStringSubmatch(q)
	if m == nil {
		t.Fatalf("memory quantity %q: not understood", q)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	mult := map[string]int64{"": 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
	return n * mult[m[2]]
}

// TestIngestPodSecurityAndResources: the receiver runs as the worker does (non-root, read-only root filesystem, no
// capabilities), with more than one replica, and a memory limit that holds the bodies it may have in flight.
func TestIngestPodSecurityAndResources(t *testing.T) {
	in := loadIngestSetup(t)
	w := in.w
	ps := w.d.Spec.Template.Spec.SecurityContext
	if ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.RunAsUser != nil && *ps.RunAsUser == 0 {
		t.Errorf("%s: pod securityContext must run as non-root", w.obj)
	}
	if ps.SeccompProfile.Type != "RuntimeDefault" {
		t.Errorf("%s: pod seccompProfile = %q, want RuntimeDefault", w.obj, ps.SeccompProfile.Type)
	}
	sc := w.c.SecurityContext
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil ||
		!*sc.ReadOnlyRootFilesystem || sc.Privileged != nil && *sc.Privileged {
		t.Errorf("%s: container securityContext: want allowPrivilegeEscalation false, readOnlyRootFilesystem true, not privileged", w.obj)
	}
	if !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
		t.Errorf("%s: capabilities drop %v add %v, want drop [ALL] and no add", w.obj, sc.Capabilities.Drop, sc.Capabilities.Add)
	}
	for _, r := range []string{"cpu", "memory"} {
		if w.c.Resources.Requests[r] == "" || w.c.Resources.Limits[r] == "" {
			t.Errorf("%s: resources: %s request %q, limit %q; want both", w.obj, r, w.c.Resources.Requests[r], w.c.Resources.Limits[r])
		}
	}
	if r := w.d.Spec.Replicas; r == nil || *r < 2 {
		t.Errorf("%s: replicas %v, want at least 2: providers must find a receiver while one restarts", w.obj, r)
	}
	if !selects(w.d.Spec.Selector.MatchLabels, in.labels) {
		t.Errorf("%s: selector %v does not select its own pods %v", w.obj, w.d.Spec.Selector.MatchLabels, in.labels)
	}
	wk := loadWorker(t, in.m)
	if selects(w.d.Spec.Selector.MatchLabels, wk.d.Spec.Template.Metadata.Labels) ||
		selects(wk.d.Spec.Selector.MatchLabels, in.labels) {
		t.Errorf("the worker's and the receiver's Deployments select each other's pods: %v, %v",
			wk.d.Spec.Selector.MatchLabels, w.d.Spec.Selector.MatchLabels)
	}
	// Each request in flight holds its body while it is verified and published (read, then copied into the NATS
	// message): the limit must hold twice DEDUPE_INGEST_MAX_IN_FLIGHT bodies of DEDUPE_INGEST_MAX_BODY bytes.
	if lim := w.c.Resources.Limits["memory"]; lim != "" {
		need := 2 * int64(in.cfg.IngestMaxInFlight) * int64(in.cfg.IngestMaxBody)
		if got := quantity(t, lim); got < need {
			t.Errorf("%s: memory limit %s (%d MiB) < 2 × DEDUPE_INGEST_MAX_IN_FLIGHT %d × DEDUPE_INGEST_MAX_BODY %d = %d MiB: "+
				"lower DEDUPE_INGEST_MAX_IN_FLIGHT in ingest-configmap.yaml or raise the limit",
				w.obj, lim, got>>20, in.cfg.IngestMaxInFlight, in.cfg.IngestMaxBody, need>>20)
		}
	}
}

// TestIngestServiceTargetsContainerPort: the receiver's Service selects the receiver's pods only and sends port 80,
// named http, to the container port; the worker's Service does not select the receiver.
func TestIngestServiceTargetsContainerPort(t *testing.T) {
	in := loadIngestSetup(t)
	wk := loadWorker(t, in.m)
	type service struct {
		Spec struct {
			Selector map[string]string `yaml:"selector"`
			Ports    []struct {
				Name       string    `yaml:"name"`
				Port       int       `yaml:"port"`
				TargetPort yaml.Node `yaml:"targetPort"`
			} `yaml:"ports"`
		} `yaml:"spec"`
	}
	found := false
	for _, o := range in.m.objects {
		if o.Kind != "Service" {
			continue
		}
		var svc service
		o.decode(t, &svc)
		if o.Name != ingestName {
			if selects(svc.Spec.Selector, in.labels) {
				t.Errorf("%s: selector %v selects the receiver's pods too", o, svc.Spec.Selector)
			}
			continue
		}
		found = true
		if !selects(svc.Spec.Selector, in.labels) || selects(svc.Spec.Selector, wk.d.Spec.Template.Metadata.Labels) {
			t.Errorf("%s: selector %v, want the receiver's pods %v and not the worker's", o, svc.Spec.Selector, in.labels)
		}
		if len(svc.Spec.Ports) != 1 {
			t.Fatalf("%s: %d ports, want one (http)", o, len(svc.Spec.Ports))
		}
		p := svc.Spec.Ports[0]
		if p.Name != "http" || p.Port != 80 {
			t.Errorf("%s: port %s %d, want http 80", o, p.Name, p.Port)
		}
		if tp := p.TargetPort.Value; tp != "http" && tp != strconv.Itoa(in.port) {
			t.Errorf("%s: targetPort %q, want http or %d (the container port)", o, tp, in.port)
		}
	}
	if !found {
		t.Errorf("deploy/%s has no Service %s", k8sDir, ingestName)
	}
}

// TestIngestPodDisruptionBudget: a budget of the receiver's own, which never blocks a drain with its replicas.
func TestIngestPodDisruptionBudget(t *testing.T) {
	in := loadIngestSetup(t)
	o := in.m.mustNamed(t, "PodDisruptionBudget", ingestName)
	var pdb struct {
		Spec struct {
			MinAvailable   *int `yaml:"minAvailable"`
			MaxUnavailable *int `yaml:"maxUnavailable"`
			Selector       struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
		} `yaml:"spec"`
	}
	o.decode(t, &pdb)
	if (pdb.Spec.MinAvailable == nil) == (pdb.Spec.MaxUnavailable == nil) {
		t.Errorf("%s: set exactly one of minAvailable, maxUnavailable (as integers)", o)
	}
	replicas := *in.w.d.Spec.Replicas
	if pdb.Spec.MinAvailable != nil && *pdb.Spec.MinAvailable >= replicas || pdb.Spec.MaxUnavailable != nil && *pdb.Spec.MaxUnavailable < 1 {
		t.Errorf("%s: with %d replicas it would block every drain", o, replicas)
	}
	if !selects(pdb.Spec.Selector.MatchLabels, in.labels) {
		t.Errorf("%s: selector %v does not select the receiver's pods %v", o, pdb.Spec.Selector.MatchLabels, in.labels)
	}
	if selects(pdb.Spec.Selector.MatchLabels, loadWorker(t, in.m).d.Spec.Template.Metadata.Labels) {
		t.Errorf("%s: selector %v selects the worker's pods too", o, pdb.Spec.Selector.MatchLabels)
	}
}

// TestIngestKustomizeGenerators: the receiver's creds and signing secrets are generated from files in the base's
// folder, which git ignores, each file listed (kustomize reads no folder); the comment says where they go and
// states the ingest permissions of deploy/nats-permissions.yaml.
func TestIngestKustomizeGenerators(t *testing.T) {
	gens := map[string][]string{}
	for _, g := range readKustomization(t, k8sDir).SecretGenerator {
		if len(g.Literals)+len(g.Envs) > 0 || g.Behavior != "" {
			t.Errorf("secretGenerator %s: want files only, got %+v", g.Name, g)
		}
		gens[g.Name] = g.Files
	}
	if creds := gens[ingestCredsSecret]; !slices.Equal(creds, []string{ingestCredsKey + "=" + ingestCredsKey}) {
		t.Errorf("secretGenerator %s: files %v, want [%s=%s]", ingestCredsSecret, creds, ingestCredsKey, ingestCredsKey)
	}
	files := gens[webhookSecret]
	if len(files) == 0 {
		t.Fatalf("deploy/%s/%s: no secretGenerator %s", k8sDir, kustomFile, webhookSecret)
	}
	for _, f := range files {
		key, path := generatorFile(f)
		if path != webhookDir+"/"+key {
			t.Errorf("secretGenerator %s: %q, want %s=%s/%s: the key is the file name the receiver reads", webhookSecret, f, key, webhookDir, key)
		}
	}
	ignore, err := os.ReadFile(filepath.Join(k8sDir, ".gitignore"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(ignore), "\n")
	for _, want := range []string{ingestCredsKey, webhookDir + "/"} {
		if !slices.Contains(lines, want) {
			t.Errorf("deploy/%s/.gitignore does not list %s (the operator's secrets)", k8sDir, want)
		}
	}
	raw, err := os.ReadFile(filepath.Join(k8sDir, kustomFile))
	if err != nil {
		t.Fatal(err)
	}
	comment := commentLines(string(raw))
	for _, want := range []string{"deploy/" + k8sDir + "/" + ingestCredsKey, "deploy/" + k8sDir + "/" + webhookDir + "/"} {
		if !strings.Contains(comment, want) {
			t.Errorf("deploy/%s/%s: the comment does not say to put files at %s", k8sDir, kustomFile, want)
		}
	}
	p := loadIngestPermissions(t)
	for what, want := range map[string][]string{"publish": p.Publish, "subscribe": p.Subscribe} {
		m := regexp.MustCompile(`(?m)^\s*ingest ` + what + `:\s+(.+)$`).FindStringSubmatch(comment)
		if m == nil {
			t.Errorf("deploy/%s/%s: the comment has no %q line", k8sDir, kustomFile, "ingest "+what+":")
		} else if got := splitList(m[1]); !slices.Equal(got, want) {
			t.Errorf("deploy/%s/%s: comment ingest %s: %v, but deploy/%s says %v", k8sDir, kustomFile, what, got, permissionsFile, want)
		}
	}
}

// TestIngestKustomizeBuild builds the base with the real kustomize, when one is installed, on a copy of deploy/k8s
// with placeholder files: the receiver mounts the generated (hashed) Secrets; without its creds or one of its
// signing secrets the build fails naming the file.
func TestIngestKustomizeBuild(t *testing.T) {
	needKustomize(t)
	tmp := t.TempDir()
	err := filepath.WalkDir(k8sRoot, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.Name() == credsKey || ingestOperatorFile(path) {
			return err
		}
		dst := filepath.Join(tmp, path)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(tmp, k8sDir)
	if err := os.WriteFile(filepath.Join(base, credsKey), []byte("not a real creds file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	writeIngestFiles(t, base)
	build := func() (string, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		cmd := kustomizeCmd(ctx, filepath.Join(tmp, k8sRoot))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", errors.New(strings.TrimSpace(stderr.String()))
		}
		return string(out), nil
	}
	out, err := build()
	if err != nil {
		t.Fatalf("kustomize build deploy/%s: %v", k8sRoot, err)
	}
	secrets, mounted := map[string]bool{}, []string{}
	dec := yaml.NewDecoder(strings.NewReader(out))
	for {
		var o struct {
			Kind     string `yaml:"kind"`
			Metadata struct {
				Name string `yaml:"name"`
			} `yaml:"metadata"`
		}
		var n yaml.Node
		if err := dec.Decode(&n); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("kustomize build: %v", err)
		}
		if err := n.Decode(&o); err != nil {
			t.Fatal(err)
		}
		switch {
		case o.Kind == "Secret":
			secrets[o.Metadata.Name] = true
		case o.Kind == "Deployment" && o.Metadata.Name == ingestName:
			var d deployment
			if err := n.Decode(&d); err != nil {
				t.Fatal(err)
			}
			for _, v := range d.Spec.Template.Spec.Volumes {
				if v.Secret != nil {
					mounted = append(mounted, v.Secret.SecretName)
				}
			}
		}
	}
	for _, gen := range []string{ingestCredsSecret, webhookSecret} {
		i := slices.IndexFunc(mounted, func(s string) bool { return strings.HasPrefix(s, gen+"-") })
		if i < 0 || !secrets[mounted[i]] {
			t.Errorf("kustomize build: the receiver mounts %v, want the generated Secret %s-<hash> (Secrets: %v)", mounted, gen, slices.Sorted(maps.Keys(secrets)))
		}
	}

	// A missing file stops the build, naming it.
	var remove []string
	for _, g := range readKustomization(t, k8sDir).SecretGenerator {
		if g.Name != workerCredsSecret {
			_, path := generatorFile(g.Files[0])
			remove = append(remove, path)
		}
	}
	for _, path := range remove {
		full := filepath.Join(base, filepath.FromSlash(path))
		data, err := os.ReadFile(full)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(full); err != nil {
			t.Fatal(err)
		}
		if _, err := build(); err == nil || !regexp.MustCompile(regexp.QuoteMeta(path)+`'?:? no such file`).MatchString(err.Error()) {
			t.Errorf("kustomize build without %s: err = %v, want an error naming the file", path, err)
		}
		if err := os.WriteFile(full, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
