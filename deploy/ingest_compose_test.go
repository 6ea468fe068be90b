package deploy_test

// The receiver in compose.yaml: the service ingest, its placeholder signing secrets (deploy/compose/secrets/, mounted
// with compose secrets:) and the sources file it shares with the workers (deploy/compose/sources.yaml).

import (
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/dedupeworker/dedupeworker/internal/config"
	"github.com/dedupeworker/dedupeworker/keys"
)

const composeSources = "compose/sources.yaml" // mounted into the workers and the receiver

// composeSecrets is what compose.yaml says of secrets: the receiver's mounts and the top-level files.
type composeSecrets struct {
	Services map[string]struct {
		Secrets         []yaml.Node `yaml:"secrets"`
		StopGracePeriod string      `yaml:"stop_grace_period"`
	} `yaml:"services"`
	Secrets map[string]struct {
		File        string `yaml:"file"`
		Environment string `yaml:"environment"`
	} `yaml:"secrets"`
}

// ingestService is the compose service that runs `dedupeworker ingest`.
func ingestService(t *testing.T, doc composeDoc) (string, composeService) {
	t.Helper()
	var names []string
	for name, svc := range doc.Services {
		if slices.Equal(svc.Command, []string{"ingest"}) {
			names = append(names, name)
		}
	}
	if len(names) != 1 {
		t.Fatalf("%s: want one service with command [ingest] (the receiver), found %v", composeFile, names)
	}
	return names[0], doc.Services[names[0]]
}

// TestComposeIngest: the receiver runs from the workers' image, reaches NATS by its service name once NATS is
// healthy, publishes its port on the host's loopback only, sets only variables config reads (and that load), and
// has no healthcheck its distroless image could not run.
func TestComposeIngest(t *testing.T) {
	doc := loadCompose(t)
	name, svc := ingestService(t, doc)
	where := composeFile + ": service " + name
	worker, ok := doc.Services["worker"]
	if !ok {
		t.Fatalf("%s: no worker service", composeFile)
	}
	if svc.Build == nil || !yamlEqual(t, svc.Build, worker.Build) || svc.Image != worker.Image {
		t.Errorf("%s: build %v image %q, want the worker's (build %v image %q)", where, svc.Build, svc.Image, worker.Build, worker.Image)
	}
	known := config.Variables()
	for k := range svc.Environment {
		if !slices.Contains(known, k) {
			t.Errorf("%s sets %s, which config does not read", where, k)
		}
	}
	var deps map[string]struct {
		Condition string `yaml:"condition"`
	}
	if err := svc.DependsOn.Decode(&deps); err != nil || deps["nats"].Condition != "service_healthy" {
		t.Errorf("%s: want depends_on: {nats: {condition: service_healthy}} (%v)", where, err)
	}
	if u := svc.Environment["DEDUPE_NATS_URL"]; u != worker.Environment["DEDUPE_NATS_URL"] {
		t.Errorf("%s: DEDUPE_NATS_URL %q, the workers' is %q", where, u, worker.Environment["DEDUPE_NATS_URL"])
	}
	for _, v := range []string{"DEDUPE_INPUT_STREAM", "DEDUPE_INPUT_PREFIX"} {
		if svc.Environment[v] != worker.Environment[v] {
			t.Errorf("%s: %s %q, the workers' %q: the receiver must publish where the workers consume", where, v, svc.Environment[v], worker.Environment[v])
		}
	}

	// The environment loads, with the sources file where the service mounts it.
	env := maps.Clone(svc.Environment)
	if src := env["DEDUPE_SOURCES_FILE"]; src != "" {
		host, ok := composeMount(svc, src)
		if !ok {
			t.Fatalf("%s: DEDUPE_SOURCES_FILE %s is not a mounted file", where, src)
		}
		if filepath.Clean(host) != filepath.Join("..", "deploy", filepath.FromSlash(composeSources)) {
			t.Errorf("%s: mounts %s as its sources file, want the workers' deploy/%s", where, host, composeSources)
		}
		env["DEDUPE_SOURCES_FILE"] = host
	}
	cleanEnv(t)
	for k, v := range env {
		t.Setenv(k, v)
	}
	cfg, err := config.Load()
	if err != nil {
		t.Fatalf("%s: the environment does not load: %v", where, err)
	}

	// Published on 127.0.0.1 only (TestComposeSaferDefaults checks every service), on the port it listens on.
	_, port, _ := strings.Cut(cfg.IngestAddr, ":")
	if len(svc.Ports) == 0 {
		t.Errorf("%s publishes no port: the receiver is unreachable from the host", where)
	}
	for _, p := range svc.Ports {
		parts := strings.Split(p.Value, ":")
		if p.Kind != yaml.ScalarNode || len(parts) != 3 || parts[0] != "127.0.0.1" || strings.TrimSuffix(parts[2], "/tcp") != port {
			t.Errorf("%s: port %q, want 127.0.0.1:<host port>:%s (DEDUPE_INGEST_ADDR %s)", where, p.Value, port, cfg.IngestAddr)
		}
	}

	// The image is distroless (no shell, no wget or curl) and the binary has no probe command: a healthcheck could
	// only fail.
	if hc := svc.Healthcheck; hc != nil && len(hc.Test) > 0 && hc.Test[0] != "NONE" {
		t.Errorf("%s: healthcheck %v: the image has no shell or HTTP client to run it", where, hc.Test)
	}

	// Compose stops it with SIGTERM, then SIGKILL after stop_grace_period: more than its shutdown needs.
	var sec composeSecrets
	readYAML(t, composeFile, &sec)
	grace, err := time.ParseDuration(sec.Services[name].StopGracePeriod)
	if err != nil || grace <= cfg.ShutdownTimeout {
		t.Errorf("%s: stop_grace_period %q, want more than DEDUPE_SHUTDOWN_TIMEOUT %s (%v)", where, sec.Services[name].StopGracePeriod, cfg.ShutdownTimeout, err)
	}
}

// TestComposeSourcesVerify: the workers' and the receiver's sources file loads, and every source in it has a verify
// block (the receiver refuses to start otherwise).
func TestComposeSourcesVerify(t *testing.T) {
	data, err := os.ReadFile(composeSources)
	if err != nil {
		t.Fatal(err)
	}
	src, err := keys.LoadSources(data)
	if err != nil {
		t.Fatalf("deploy/%s does not load: %v", composeSources, err)
	}
	if len(src.IDs()) == 0 {
		t.Fatalf("deploy/%s declares no source", composeSources)
	}
	for _, id := range src.IDs() {
		if _, ok := src.Verify[id]; !ok {
			t.Errorf("deploy/%s: source %s has no verify block", composeSources, id)
		}
	}
}

// placeholderText is how a committed secret shows that it is none: "not a real secret" in some spelling.
var placeholderText = regexp.MustCompile(`(?i)not[-_ ]?a[-_ ]?real[-_ ]?secret`)

// TestComposeIngestSecrets: the receiver's secrets are compose secrets backed by committed placeholder files, each
// mounted in the directory DEDUPE_INGEST_SECRETS_DIR names; with them and the sources file the receiver starts and
// serves every source.
func TestComposeIngestSecrets(t *testing.T) {
	doc := loadCompose(t)
	name, svc := ingestService(t, doc)
	where := composeFile + ": service " + name
	dir := svc.Environment["DEDUPE_INGEST_SECRETS_DIR"]
	if !path.IsAbs(dir) {
		t.Fatalf("%s: DEDUPE_INGEST_SECRETS_DIR %q, want the absolute directory its secrets are mounted in", where, dir)
	}
	var sec composeSecrets
	readYAML(t, composeFile, &sec)
	mounts := sec.Services[name].Secrets
	if len(mounts) == 0 {
		t.Fatalf("%s: no secrets: (its signing secrets)", where)
	}
	local := t.TempDir()
	for _, n := range mounts {
		var m struct {
			Source string `yaml:"source"`
			Target string `yaml:"target"`
		}
		if n.Kind == yaml.ScalarNode {
			m.Source = n.Value
		} else if err := n.Decode(&m); err != nil {
			t.Fatalf("%s: secrets: %v", where, err)
		}
		target := m.Target
		if target == "" {
			target = m.Source
		}
		if !path.IsAbs(target) {
			target = "/run/secrets/" + target // compose's default place
		}
		if path.Dir(target) != path.Clean(dir) {
			t.Errorf("%s: secret %s is mounted at %s, outside DEDUPE_INGEST_SECRETS_DIR %s", where, m.Source, target, dir)
			continue
		}
		top, ok := sec.Secrets[m.Source]
		if !ok || top.File == "" {
			t.Errorf("%s: secret %s is not a top-level secret with a file", where, m.Source)
			continue
		}
		host := filepath.Join("..", filepath.FromSlash(top.File))
		if rel, err := filepath.Rel(filepath.Join("..", "deploy", "compose"), host); err != nil || strings.HasPrefix(rel, "..") {
			t.Errorf("%s: secret %s: file %s, want a placeholder under deploy/compose/", composeFile, m.Source, top.File)
		}
		data, err := os.ReadFile(host)
		if err != nil {
			t.Errorf("%s: secret %s: %v", composeFile, m.Source, err)
			continue
		}
		if !placeholderText.Match(data) {
			t.Errorf("%s: %s does not read as a placeholder (\"not a real secret\"): never commit a real secret", composeFile, top.File)
		}
		if err := os.WriteFile(filepath.Join(local, path.Base(target)), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(composeSources)
	if err != nil {
		t.Fatal(err)
	}
	src, err := keys.LoadSources(data)
	if err != nil {
		t.Fatalf("deploy/%s does not load: %v", composeSources, err)
	}
	checkSecretsServe(t, where, src, local)
}

// composeMount is the host path a service mounts at target (a "host:target[:mode]" volume).
func composeMount(svc composeService, target string) (string, bool) {
	for _, v := range svc.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && parts[1] == target {
			return filepath.Join("..", filepath.FromSlash(parts[0])), true
		}
	}
	return "", false
}

func readYAML(t *testing.T, file string, v any) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

func yamlEqual(t *testing.T, a, b any) bool {
	t.Helper()
	ya, err1 := yaml.Marshal(a)
	yb, err2 := yaml.Marshal(b)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	return string(ya) == string(yb)
}
