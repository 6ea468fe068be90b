package deploy_test

// Safer defaults: the KEDA overlay never scales past what the consumer lets the fleet hold in flight, compose
// publishes NATS on the loopback interface only and starts the workers once NATS is healthy, the containers serve
// HTTP where probes and Prometheus reach it, and the image is built with the Go version of go.mod.

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/pipeline"
)

const (
	composeFile = "../compose.yaml"
	dockerfile  = "../Dockerfile"
	goMod       = "../go.mod"
)

// TestScaledObjectFitsMaxAckPending: the consumer's MaxAckPending caps the envelopes in flight across all replicas,
// and each replica keeps up to DEDUPE_MAX_IN_FLIGHT of them, so replicas KEDA adds past MaxAckPending /
// DEDUPE_MAX_IN_FLIGHT would sit idle. MaxAckPending is DEDUPE_MAX_ACK_PENDING when the ConfigMap sets it, else
// what the worker creates the consumer with.
func TestScaledObjectFitsMaxAckPending(t *testing.T) {
	m := loadKEDAOverlay(t)
	w := loadWorker(t, m)
	cfg, env := manifestConfig(t, m, w)
	o := m.one(t, "ScaledObject")
	var so struct {
		Spec struct {
			MinReplicaCount *int `yaml:"minReplicaCount"`
			MaxReplicaCount *int `yaml:"maxReplicaCount"`
			Triggers        []struct {
				Metadata map[string]string `yaml:"metadata"`
			} `yaml:"triggers"`
		} `yaml:"spec"`
	}
	o.decode(t, &so)
	if so.Spec.MaxReplicaCount == nil || so.Spec.MinReplicaCount == nil || len(so.Spec.Triggers) != 1 {
		t.Fatalf("%s: want minReplicaCount, maxReplicaCount and one trigger", o) // TestScaledObjectWatchesTheWorkersConsumer says more
	}
	maxReplicas, inFlight := *so.Spec.MaxReplicaCount, cfg.MaxInFlight
	if _, set := env["DEDUPE_MAX_IN_FLIGHT"]; !set && inFlight != 1024 {
		t.Errorf("DEDUPE_MAX_IN_FLIGHT unset gives %d, want the documented default 1024", inFlight)
	}

	// What the worker gives the consumer (pipeline.ConsumerMaxAckPending): the setting, else DefaultFleet × in-flight.
	maxAckPending, from := cfg.MaxAckPending, "DEDUPE_MAX_ACK_PENDING"
	if maxAckPending == 0 {
		maxAckPending = max(1000, pipeline.DefaultFleet*inFlight)
		from = "the default " + strconv.Itoa(pipeline.DefaultFleet) + " × DEDUPE_MAX_IN_FLIGHT"
		if _, set := env["DEDUPE_MAX_IN_FLIGHT"]; !set && maxAckPending != 10240 {
			t.Errorf("the default MaxAckPending is %d, want 10 × 1024 = 10240 (room for 10 replicas)", maxAckPending)
		}
	}
	if need := maxReplicas * inFlight; need > maxAckPending {
		t.Errorf("%s: maxReplicaCount %d × DEDUPE_MAX_IN_FLIGHT %d = %d envelopes in flight, but MaxAckPending (%s) "+
			"is %d: set DEDUPE_MAX_ACK_PENDING to at least %d in the ConfigMap, or lower maxReplicaCount to %d",
			o, maxReplicas, inFlight, need, from, maxAckPending, need, maxAckPending/inFlight)
	}

	// KEDA's lag is the consumer's pending plus ack pending, and replicas = ceil(lag / lagThreshold). A replica
	// holds up to DEDUPE_MAX_IN_FLIGHT unacknowledged: with a smaller threshold, busy replicas alone (no backlog)
	// would call for more replicas, up to the maximum.
	md := so.Spec.Triggers[0].Metadata
	lag, err1 := strconv.Atoi(md["lagThreshold"])
	activation, err2 := strconv.Atoi(md["activationLagThreshold"])
	if err1 != nil || err2 != nil {
		t.Fatalf("%s: lagThreshold %q, activationLagThreshold %q: want integers", o, md["lagThreshold"], md["activationLagThreshold"])
	}
	if lag < inFlight {
		t.Errorf("%s: lagThreshold %d < DEDUPE_MAX_IN_FLIGHT %d: the replicas' own in-flight envelopes would scale the "+
			"deployment out", o, lag, inFlight)
	}
	if activation >= lag {
		t.Errorf("%s: activationLagThreshold %d >= lagThreshold %d", o, activation, lag)
	}
	// The Deployment's initial count is one the ScaledObject would keep.
	if r := w.d.Spec.Replicas; r != nil && (*r < *so.Spec.MinReplicaCount || *r > maxReplicas) {
		t.Errorf("Deployment replicas %d outside the ScaledObject's %d..%d", *r, *so.Spec.MinReplicaCount, maxReplicas)
	}
}

// TestContainersServeHTTPOnAllInterfaces: in a pod or a compose container the probes and Prometheus connect from
// outside the container, so DEDUPE_HTTP_ADDR is set explicitly (whatever the default becomes for `make run`) with
// no host, or an all-interfaces one.
func TestContainersServeHTTPOnAllInterfaces(t *testing.T) {
	m := loadManifests(t)
	w := loadWorker(t, m)
	addrs := map[string]string{"deploy/k8s ConfigMap": w.env(t, m)["DEDUPE_HTTP_ADDR"]}
	for name, svc := range loadCompose(t).Services {
		if svc.Build != nil {
			addrs["compose.yaml service "+name] = svc.Environment[composeHTTPAddrVar(svc)]
		}
	}
	for where, addr := range addrs {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			t.Errorf("%s: DEDUPE_HTTP_ADDR %q: want it set to :<port> (%v)", where, addr, err)
			continue
		}
		if host != "" && host != "0.0.0.0" && host != "::" {
			t.Errorf("%s: DEDUPE_HTTP_ADDR %q listens on %s only: the probes and Prometheus cannot reach it", where, addr, host)
		}
	}
}

type composeService struct {
	Image       string            `yaml:"image"`
	Build       any               `yaml:"build"`
	Command     []string          `yaml:"command"`
	Ports       []yaml.Node       `yaml:"ports"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	DependsOn   yaml.Node         `yaml:"depends_on"`
	Healthcheck *struct {
		Test     []string `yaml:"test"`
		Interval string   `yaml:"interval"`
		Retries  int      `yaml:"retries"`
	} `yaml:"healthcheck"`
}

type composeDoc struct {
	Services map[string]composeService `yaml:"services"`
}

func loadCompose(t *testing.T) composeDoc {
	t.Helper()
	data, err := os.ReadFile(composeFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc composeDoc
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", composeFile, err)
	}
	if len(doc.Services) == 0 {
		t.Fatalf("%s: no services", composeFile)
	}
	return doc
}

// flagValue is the value of a --name or -short flag in a command line ("--flag value" or "--flag=value").
func flagValue(args []string, names ...string) (string, bool) {
	for i, a := range args {
		for _, n := range names {
			if a == n && i+1 < len(args) {
				return args[i+1], true
			}
			if v, ok := strings.CutPrefix(a, n+"="); ok {
				return v, true
			}
		}
	}
	return "", false
}

// TestComposeSaferDefaults: compose publishes ports on 127.0.0.1 only (NATS has no authentication there), the NATS
// service has a healthcheck that asks the monitoring port it enables, and every worker waits for it to be healthy.
func TestComposeSaferDefaults(t *testing.T) {
	doc := loadCompose(t)
	nats, ok := doc.Services["nats"]
	if !ok {
		t.Fatalf("%s: no nats service", composeFile)
	}
	for name, svc := range doc.Services {
		for _, p := range svc.Ports {
			var host string
			switch p.Kind {
			case yaml.ScalarNode: // "[host:]published:target[/proto]"
				if parts := strings.Split(p.Value, ":"); len(parts) == 3 {
					host = parts[0]
				}
			case yaml.MappingNode: // the long form
				var long struct {
					HostIP string `yaml:"host_ip"`
				}
				if err := p.Decode(&long); err != nil {
					t.Fatal(err)
				}
				host = long.HostIP
			}
			if host != "127.0.0.1" {
				t.Errorf("%s: service %s publishes %q on every interface of the host: publish it on 127.0.0.1", composeFile, name, p.Value)
			}
		}
	}

	hc := nats.Healthcheck
	if hc == nil || len(hc.Test) < 2 || hc.Test[0] != "CMD" && hc.Test[0] != "CMD-SHELL" {
		t.Fatalf("%s: service nats has no healthcheck test ([\"CMD\", ...]): %+v", composeFile, hc)
	}
	port, ok := flagValue(nats.Command, "--http_port", "-m")
	if !ok {
		t.Fatalf("%s: service nats does not enable the monitoring port (--http_port): %v", composeFile, nats.Command)
	}
	probe := strings.Join(hc.Test[1:], " ")
	if !strings.Contains(probe, "127.0.0.1:"+port+"/healthz") {
		t.Errorf("%s: the nats healthcheck %q does not ask http://127.0.0.1:%s/healthz", composeFile, probe, port)
	}
	// The default nats image is FROM scratch: only nats-server, which has no health probe; the alpine variant has
	// busybox's wget.
	if tool := filepath.Base(strings.Fields(probe)[0]); tool != "nats-server" && !strings.Contains(nats.Image, "alpine") {
		t.Errorf("%s: the nats healthcheck runs %s, which the image %s (FROM scratch) does not have: use its -alpine variant",
			composeFile, tool, nats.Image)
	}

	workers := 0
	for name, svc := range doc.Services {
		if svc.Build == nil {
			continue
		}
		workers++
		var deps map[string]struct {
			Condition string `yaml:"condition"`
		}
		if err := svc.DependsOn.Decode(&deps); err != nil || deps["nats"].Condition != "service_healthy" {
			t.Errorf("%s: service %s: want depends_on: {nats: {condition: service_healthy}} (%v)", composeFile, name, err)
		}
		// NATS is reached by its service name, on the port it listens on.
		if u := svc.Environment["DEDUPE_NATS_URL"]; u != "nats://nats:4222" {
			t.Errorf("%s: service %s: DEDUPE_NATS_URL %q, want nats://nats:4222", composeFile, name, u)
		}
		// The mounted sources file loads.
		src := svc.Environment["DEDUPE_SOURCES_FILE"]
		for _, v := range svc.Volumes {
			parts := strings.Split(v, ":")
			if len(parts) < 2 || parts[1] != src {
				continue
			}
			data, err := os.ReadFile(filepath.Join("..", parts[0]))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := keys.LoadSources(data); err != nil {
				t.Errorf("%s: service %s: the sources file %s does not load: %v", composeFile, name, parts[0], err)
			}
			src = ""
		}
		if src != "" {
			t.Errorf("%s: service %s: DEDUPE_SOURCES_FILE %s is not a mounted file", composeFile, name, src)
		}
	}
	if workers == 0 {
		t.Errorf("%s: no worker service (one with build:)", composeFile)
	}
}

var (
	goDirective        = regexp.MustCompile(`(?m)^go\s+(\S+)\s*$`)
	toolchainDirective = regexp.MustCompile(`(?m)^toolchain\s+go(\S+)\s*$`)
	golangFrom         = regexp.MustCompile(`(?im)^FROM\s+(?:--platform=\S+\s+)?(?:\S+/)?golang:(\S+)`)
)

// TestDockerfileGoVersionMatchesGoMod: the image is built with exactly the Go release go.mod asks for (its toolchain
// line, else its go line), so that the image and `go build` agree and a rebuild does not drift to a newer patch.
func TestDockerfileGoVersionMatchesGoMod(t *testing.T) {
	mod, err := os.ReadFile(goMod)
	if err != nil {
		t.Fatal(err)
	}
	var want string
	if m := toolchainDirective.FindSubmatch(mod); m != nil {
		want = string(m[1])
	} else if m := goDirective.FindSubmatch(mod); m != nil {
		want = string(m[1])
	} else {
		t.Fatalf("%s has no go line", goMod)
	}
	if strings.Count(want, ".") != 2 {
		t.Fatalf("%s asks for go %s: name a release (1.x.y) in a toolchain line, so that the Dockerfile can pin it", goMod, want)
	}
	df, err := os.ReadFile(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	froms := golangFrom.FindAllSubmatch(df, -1)
	if len(froms) == 0 {
		t.Fatalf("%s: no FROM golang:<tag> builder", dockerfile)
	}
	for _, m := range froms {
		tag, _, _ := strings.Cut(string(m[1]), "@") // a digest may follow
		version, variant, _ := strings.Cut(tag, "-")
		if version != want {
			use := "golang:" + want
			if variant != "" {
				use += "-" + variant
			}
			t.Errorf("%s: builder golang:%s is Go %s, go.mod asks for %s: use %s", dockerfile, tag, version, want, use)
		}
	}
}
