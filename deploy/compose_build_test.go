package deploy_test

// compose.yaml as a newcomer runs it: its nats-server takes deliveries as large as the worker handles, its image
// says which commit it was built from, and the commands in its comments publish the way the README says.

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	yaml "go.yaml.in/yaml/v3"

	"github.com/dedupeworker/dedupeworker/internal/embedded"
)

// TestComposeNATSMaxPayload: the nats service's max_payload is at least the embedded server's for the default
// DEDUPE_MAX_JSON_BYTES, so a body the worker would still read is never refused by NATS first. Read with
// nats-server's own config parser. Before: no config file, nats-server's default max_payload 1048576 (1 MiB),
// equal to DEDUPE_MAX_JSON_BYTES, under the 8388608 the README advises.
func TestComposeNATSMaxPayload(t *testing.T) {
	nats := loadCompose(t).Services["nats"]
	conf, ok := flagValue(nats.Command, "--config", "-c")
	if !ok {
		t.Fatalf("%s: service nats has no --config file: max_payload stays nats-server's default 1048576", composeFile)
	}
	var host string
	for _, v := range nats.Volumes {
		if parts := strings.Split(v, ":"); len(parts) >= 2 && parts[1] == conf {
			host = filepath.Join("..", parts[0])
		}
	}
	if host == "" {
		t.Fatalf("%s: service nats reads --config %s, which no volume mounts", composeFile, conf)
	}
	opts, err := server.ProcessConfigFile(host)
	if err != nil {
		t.Fatalf("%s: %v", host, err)
	}
	want := embedded.MaxPayloadFor(defaultConfig(t).MaxJSONBytes)
	if int(opts.MaxPayload) < want {
		t.Errorf("%s: max_payload %d, want at least %d (the embedded server's for DEDUPE_MAX_JSON_BYTES %d)",
			host, opts.MaxPayload, want, defaultConfig(t).MaxJSONBytes)
	}
}

var dockerArg = regexp.MustCompile(`(?m)^ARG\s+(.+)$`)

// dockerfileArgs are the names the Dockerfile's ARG lines declare.
func dockerfileArgs(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range dockerArg.FindAllStringSubmatch(string(data), -1) {
		for _, f := range strings.Fields(m[1]) {
			name, _, _ := strings.Cut(f, "=")
			out = append(out, name)
		}
	}
	return out
}

// TestComposeBuildArgs: every service built from the Dockerfile passes each of its build arguments, so that
// `dedupeworker version` in the image says something (the build context has no .git for the toolchain to stamp).
// Before: build: . passed none of [VERSION REVISION REVISION_TIME], and the image printed "revision unknown".
func TestComposeBuildArgs(t *testing.T) {
	args := dockerfileArgs(t)
	if !slices.Contains(args, "VERSION") || !slices.Contains(args, "REVISION") {
		t.Fatalf("%s: ARGs %v, want VERSION and REVISION (the -ldflags of the version command)", dockerfile, args)
	}
	built := 0
	for name, svc := range loadCompose(t).Services {
		if svc.Build == nil {
			continue
		}
		built++
		var b struct {
			Context string            `yaml:"context"`
			Args    map[string]string `yaml:"args"`
		}
		n := yaml.Node{}
		if err := n.Encode(svc.Build); err != nil {
			t.Fatal(err)
		}
		if n.Kind != yaml.MappingNode || n.Decode(&b) != nil {
			t.Errorf("%s: service %s: build %v passes no args: want build: {context: ., args: {%s}}", composeFile, name, svc.Build, strings.Join(args, ", "))
			continue
		}
		for _, a := range args {
			v, ok := b.Args[a]
			if !ok {
				t.Errorf("%s: service %s: build args lack %s", composeFile, name, a)
				continue
			}
			// Taken from the environment of `docker compose`, so that git can fill it in.
			if !strings.Contains(v, "${"+a) {
				t.Errorf("%s: service %s: build arg %s = %q, want ${%s:-…} from the environment", composeFile, name, a, v, a)
			}
		}
	}
	if built == 0 {
		t.Fatalf("%s: no service with build:", composeFile)
	}
}

var natsPub = regexp.MustCompile(`\bnats\b[^|;&]*?\spub\s[^|;&]*`)

// TestDeployCommentsPublishWithJetStream: a `nats pub` in the comments of compose.yaml and the deploy files uses
// --jetstream, which waits for the stream's acknowledgement; a plain pub reports success even when nothing stored
// the message. Before: compose.yaml's comment used `nats --server localhost:4222 pub ingest.acme.github` plain.
func TestDeployCommentsPublishWithJetStream(t *testing.T) {
	files := []string{composeFile}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml") || strings.HasSuffix(path, ".conf")) {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if ingestOperatorFile(f) || filepath.Base(f) == credsKey {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			c, ok := strings.CutPrefix(strings.TrimSpace(line), "#")
			if !ok {
				continue
			}
			for _, m := range natsPub.FindAllString(c, -1) {
				if !strings.Contains(m, "--jetstream") && !strings.Contains(m, " -J") {
					t.Errorf("%s:%d: %q: publish with nats pub --jetstream", f, i+1, strings.TrimSpace(m))
				}
			}
		}
	}
}
