package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

// make run starts the embedded server unless DEDUPE_NATS_URL names one: never the server of NATS_URL or of the
// selected nats CLI context.
func TestMakeRunStaysLocal(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not installed")
	}
	recipe := func(env ...string) string {
		cmd := exec.Command("make", "-n", "-s", "run")
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make -n run: %v\n%s", err, out)
		}
		return string(out)
	}
	if out := recipe("DEDUPE_NATS_URL=", "NATS_URL=nats://elsewhere:4222", "NATS_CONTEXT=prod"); !strings.Contains(out, "run --embedded") {
		t.Errorf("make run without DEDUPE_NATS_URL does not pass --embedded:\n%s", out)
	}
	if out := recipe("DEDUPE_NATS_URL=nats://mine:4222"); strings.Contains(out, "--embedded") {
		t.Errorf("make run with DEDUPE_NATS_URL passes --embedded:\n%s", out)
	}
}

// run --embedded starts the embedded server though NATS_URL and a selected context name other servers, and
// refuses to be combined with a setting or flag that names one.
func TestRunEmbeddedIgnoresTheNatsCLI(t *testing.T) {
	cleanNATSEnv(t)
	url := embeddedEnv(t)
	t.Setenv("DEDUPE_LOG_FORMAT", "json")
	t.Setenv("NATS_URL", fmt.Sprintf("nats://127.0.0.1:%d", natstest.FreePort(t)))
	cliHome(t, "prod", map[string]string{"prod": `{"url": "nats://prod.invalid:4222"}`})
	logs, stop := runInBackground(t, "run", "--embedded")
	waitConsuming(t, logs)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if l := logs.String(); !strings.Contains(l, "embedded NATS server with JetStream started") || !strings.Contains(l, url) ||
		!strings.Contains(l, `"from":"the embedded server (--embedded: NATS_URL and nats CLI contexts are not read)"`) ||
		strings.Contains(l, "creating the worker's streams") {
		t.Errorf("run --embedded did not start the embedded server quietly:\n%s", l)
	}

	t.Setenv("DEDUPE_NATS_URL", "nats://127.0.0.1:1")
	code, _, stderr := runCLI(t, "", "run", "--embedded")
	if code != 2 || !strings.Contains(stderr, "run: --embedded and DEDUPE_NATS_URL exclude each other") {
		t.Errorf("run --embedded with DEDUPE_NATS_URL: exit %d, %q", code, stderr)
	}
}

// A worker whose server comes from NATS_URL (or a context) warns before it creates its streams there; one whose
// server DEDUPE_NATS_URL names does not.
func TestRunWarnsBeforeProvisioningOnANatsCLIServer(t *testing.T) {
	for _, variable := range []string{"NATS_URL", "DEDUPE_NATS_URL"} {
		t.Run(variable, func(t *testing.T) {
			cleanNATSEnv(t)
			embeddedEnv(t)
			t.Setenv("DEDUPE_LOG_FORMAT", "json")
			srv := natstest.Run(t)
			t.Setenv(variable, srv.URL())
			logs, stop := startWorker(t)
			waitConsuming(t, logs)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			lines := jsonLines(t, logs.String())
			i, line := -1, map[string]any(nil)
			for j, l := range lines {
				if strings.HasPrefix(fmt.Sprint(l["msg"]), "creating the worker's streams") {
					i, line = j, l
				}
			}
			switch {
			case variable == "DEDUPE_NATS_URL" && i >= 0:
				t.Errorf("warned though DEDUPE_NATS_URL named the server: %v", line)
			case variable == "NATS_URL" && (i < 0 || line["level"] != "WARN" || line["server"] != srv.URL() ||
				!strings.Contains(fmt.Sprint(line["msg"]), "NATS_URL")):
				t.Errorf("no WARN naming NATS_URL and the server before provisioning:\n%s", logs.String())
			}
			// And the streams were created: the warning says what happens, it does not stop it.
			js, _ := jetstream.New(natstest.Connect(t, srv.URL()))
			if _, err := js.Stream(context.Background(), "DEDUPED"); err != nil {
				t.Errorf("DEDUPED: %v", err)
			}
		})
	}
}
