package docscheck_test

// TestReadmeWalkthroughs runs the README's marked walkthroughs top to bottom, as a newcomer would on one machine:
// the nats CLI quickstart, then the webhook quickstart, against one worker started the way `make run` starts it
// (the binary built here, an embedded JetStream server) on free loopback ports. Each step must exit 0 and print
// what its "# " lines say; after each block the test reads the output stream and checks what the prose says it
// shows. Steps that need a tool missing here (the nats CLI usually) are skipped with a message; `make docs-check`
// installs the CLI and sets DOCS_CHECK_REQUIRE=1, which makes a missing tool a failure.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/internal/docscheck"
	"github.com/dedupeworker/dedupeworker/internal/natstest"
)

const (
	readmeFile = "../../README.md"
	repoRoot   = "../.."
	readyAfter = 2 * time.Minute // the worker's own first-connect budget; a cold embedded start takes seconds
)

// event is what the prose says a block makes the worker publish: the Idempotency-Key and the subject.
type event struct{ key, subject string }

// check is what the test verifies after a block, beyond each step's own "# " lines.
type check struct {
	events []event // the new messages of the output stream, in order
	needs  string  // a block this one reads the effects of: skipped with it when its tool is missing
	// subscriber: a terminal running `nats sub` must have shown these events' keys too.
}

// checks names every marked block of the README; a block without an entry fails the test, so that a new
// walkthrough says what it shows.
var checks = map[string]check{
	"nats-terminals": {},
	"nats-publish": {events: []event{
		{"acme:github:72d3162e", "deduped.acme.github"},
		{"acme:stripe:evt_1", "deduped.acme.stripe"},
		{"acme:github:9f1c", "deduped.acme.github.push"},
	}},
	"window":            {needs: "nats-publish"},                        // reads the claims nats-publish made
	"health":            {needs: "nats-publish"},                        // counts the retry nats-publish made
	"dlq":               {events: []event{{"", "deduped.acme.stripe"}}}, // unkeyed: msg/<envelope>
	"key":               {},
	"webhook-terminals": {},
	"webhook-github":    {events: []event{{"acme:github:5b8e01d4", "deduped.acme.github"}}}, // the retry and the forgery add none
	"webhook-stripe":    {events: []event{{"acme:stripe:evt_2", "deduped.acme.stripe"}}},
}

func readme(t *testing.T) []docscheck.Block {
	t.Helper()
	md, err := os.ReadFile(readmeFile)
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := docscheck.Parse(md)
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	var names []string
	for _, b := range blocks {
		names = append(names, b.Name)
		if _, ok := checks[b.Name]; !ok {
			t.Errorf("README.md line %d: block %s has no entry in checks (readme_test.go)", b.Line, b.Name)
		}
	}
	for name := range checks {
		if !slices.Contains(names, name) {
			t.Errorf("README.md: no block marked <!-- docs-check: %s -->", name)
		}
	}
	return blocks
}

// TestReadmeIdsAreFresh: the webhook quickstart follows the nats quickstart on the same worker, so a delivery id or
// event id it reuses is already claimed and nothing appears. Checked on the text, so that it holds without the nats
// CLI too (before: the webhook quickstart reused 72d3162e and evt_1, and showed nothing new).
func TestReadmeIdsAreFresh(t *testing.T) {
	idRE := regexp.MustCompile(`X-GitHub-Delivery: ([A-Za-z0-9-]+)|"id":"([A-Za-z0-9_-]+)"`)
	ids := func(prefix string) map[string]string {
		out := map[string]string{}
		for _, b := range readme(t) {
			if !strings.HasPrefix(b.Name, prefix) {
				continue
			}
			for _, s := range b.Steps {
				for _, m := range idRE.FindAllStringSubmatch(s.Command, -1) {
					out[m[1]+m[2]] = fmt.Sprintf("%s (line %d)", b.Name, s.Line)
				}
			}
		}
		return out
	}
	claimed := ids("nats-")
	if len(claimed) == 0 {
		t.Fatal("no delivery or event id found in the nats-* blocks")
	}
	for id, where := range ids("webhook-") {
		if first, ok := claimed[id]; ok {
			t.Errorf("README.md: %s uses id %s, already claimed by %s: the quickstart shows nothing new", where, id, first)
		}
	}
}

// walk is one run of the walkthroughs.
type walk struct {
	t          *testing.T
	dir        string // the reader's working directory: bin/dedupeworker, ./data
	env        []string
	workerEnv  []string
	httpAddr   string
	ingestAddr string
	natsURL    string
	require    bool
	sh         *shell
	worker     *terminal
	subs       []*terminal // nats sub terminals
	js         jetstream.JetStream
	lastSeq    uint64 // of the output stream, read so far
	skipped    map[string]bool
}

func TestReadmeWalkthroughs(t *testing.T) {
	blocks := readme(t)
	if testing.Short() {
		t.Skip("docscheck: -short: not building and running the README walkthroughs")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("docscheck: bash not on PATH: the README walkthroughs are not run")
	}
	w := newWalk(t)
	for _, b := range blocks {
		if !t.Run(b.Name, func(t *testing.T) { w.block(t, b) }) {
			t.Fatalf("docscheck: block %s (README.md line %d) failed; the later blocks build on it", b.Name, b.Line)
		}
	}
}

func newWalk(t *testing.T) *walk {
	dir := t.TempDir()
	w := &walk{t: t, dir: dir, require: os.Getenv("DOCS_CHECK_REQUIRE") == "1", skipped: map[string]bool{}}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("docscheck: go not on PATH: cannot build bin/dedupeworker")
	}
	build := exec.Command(gobin, "build", "-o", filepath.Join(dir, "bin", "dedupeworker"), "./cmd/dedupeworker")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("docscheck: go build ./cmd/dedupeworker: %v\n%s", err, out)
	}
	port := natstest.FreePort(t)
	w.natsURL = fmt.Sprintf("nats://127.0.0.1:%d", port)
	w.httpAddr = fmt.Sprintf("127.0.0.1:%d", natstest.FreePort(t))
	w.ingestAddr = fmt.Sprintf("127.0.0.1:%d", natstest.FreePort(t))
	home := filepath.Join(dir, "home") // no nats CLI context of the machine's user
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !strings.HasPrefix(k, "DEDUPE_") && !strings.HasPrefix(k, "NATS_") &&
			k != "HOME" && k != "XDG_CONFIG_HOME" {
			w.env = append(w.env, kv)
		}
	}
	w.env = append(w.env, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		fmt.Sprintf("DEDUPE_EMBEDDED_LISTEN=127.0.0.1:%d", port), "DEDUPE_HTTP_ADDR="+w.httpAddr)
	// make run embeds the server whatever NATS_URL says (the worker sees the reader's NATS_URL, pointing at the
	// embedded server's own address here); everything else finds it through NATS_URL (the nats CLI) or
	// DEDUPE_EMBEDDED_LISTEN (the dedupeworker commands), as on a machine with defaults.
	w.env = append(w.env, "NATS_URL="+w.natsURL)
	w.workerEnv = slices.Clone(w.env)
	w.sh = startShell(t, dir, w.env)
	return w
}

// rewrite turns a README command into the one to run here: the addresses (ingest's, the worker's HTTP) are this
// run's free ports, `make run` is what the Makefile's run target execs (without DEDUPE_NATS_URL: run --embedded),
// and `go run ./cmd/dedupeworker` the binary built from the same tree.
func (w *walk) rewrite(cmd string) string {
	cmd = strings.ReplaceAll(cmd, "127.0.0.1:8080", w.ingestAddr)
	cmd = strings.ReplaceAll(cmd, "127.0.0.1:9464", w.httpAddr)
	cmd = strings.ReplaceAll(cmd, "go run ./cmd/dedupeworker", "./bin/dedupeworker")
	if rest, ok := strings.CutPrefix(strings.TrimSpace(cmd), "make run"); ok {
		cmd = "exec ./bin/dedupeworker run --embedded" + rest
	}
	return cmd
}

var toolRE = regexp.MustCompile(`(?:^|[|;&(]|\$\()\s*(?:[A-Z_]+=\S+\s+)*(nats|curl|openssl)\s`)

// missingTool is the first tool a command runs that is not on PATH.
func missingTool(cmd string) string {
	for _, m := range toolRE.FindAllStringSubmatch(strings.ReplaceAll(cmd, "\\\n", " "), -1) {
		if _, err := exec.LookPath(m[1]); err != nil {
			return m[1]
		}
	}
	return ""
}

func (w *walk) skipFor(t *testing.T, tool, what string) {
	t.Helper()
	msg := fmt.Sprintf("docscheck: %s not on PATH: not running %s (make docs-check installs the nats CLI)", tool, what)
	if w.require {
		t.Fatal(msg + "; DOCS_CHECK_REQUIRE=1")
	}
	t.Skip(msg)
}

func (w *walk) block(t *testing.T, b docscheck.Block) {
	if b.Mode == docscheck.Terminals {
		w.terminals(t, b)
		return
	}
	if needs := checks[b.Name].needs; w.skipped[needs] {
		w.skipped[b.Name] = true
		t.Skipf("docscheck: block %s reads what block %s did, which was skipped", b.Name, needs)
	}
	for _, s := range b.Steps {
		if tool := missingTool(s.Command); tool != "" {
			w.skipped[b.Name] = true
			w.skipFor(t, tool, fmt.Sprintf("block %s (README.md line %d: %s)", b.Name, s.Line, s))
		}
	}
	for i, s := range b.Steps {
		w.settle(t)
		if b.Paced && i > 0 {
			// A person reads the output and types the next command: not a wait for a condition, the pace the
			// README's reader acts at (a worker that needs longer, or a step that works only at once, fails here).
			time.Sleep(docscheck.PersonPause)
		}
		out, code, err := w.sh.run(w.rewrite(s.Command))
		if err != nil || code != 0 {
			t.Fatalf("README.md line %d: %s: exit %d, %v; it printed:\n%s", s.Line, s, code, err, out)
		}
		for _, e := range s.Expect {
			if piece, ok := docscheck.Match(e, out); !ok {
				t.Errorf("README.md line %d: %s: the README says it prints %q; %q is missing from:\n%s", s.Line, s, e, piece, out)
			}
		}
	}
	w.settle(t)
	w.checkEvents(t, b.Name, checks[b.Name].events)
}

func (w *walk) terminals(t *testing.T, b docscheck.Block) {
	for _, s := range b.Steps {
		cmd := w.rewrite(s.Command)
		switch {
		case strings.HasPrefix(strings.TrimSpace(s.Command), "make run"):
			if w.worker != nil {
				t.Logf("README.md line %d: %s: the worker of an earlier block is still running", s.Line, s)
				continue
			}
			w.worker = startTerminal(w.t, w.dir, w.workerEnv, cmd)
			w.waitReady(t, "worker", "http://"+w.httpAddr+"/readyz", w.worker)
			w.connect(t)
		case missingTool(s.Command) != "":
			if w.require {
				t.Fatalf("docscheck: %s not on PATH for README.md line %d: %s; DOCS_CHECK_REQUIRE=1", missingTool(s.Command), s.Line, s)
			}
			t.Logf("docscheck: %s not on PATH: not starting README.md line %d: %s (the test reads the stream instead)",
				missingTool(s.Command), s.Line, s)
		case strings.Contains(s.Command, "dedupeworker ingest"):
			p := startTerminal(w.t, w.dir, w.env, cmd) // runs on into the later blocks
			w.waitReady(t, "ingest", "http://"+w.ingestAddr+"/readyz", p)
		case strings.HasPrefix(strings.TrimSpace(s.Command), "nats sub"):
			p := startTerminal(w.t, w.dir, w.env, cmd) // runs on into the later blocks
			waitFor(t, 30*time.Second, func() error {
				if p.exited() {
					return fmt.Errorf("exited: %v\n%s", p.err, p.out)
				}
				if !strings.Contains(p.out.String(), "Subscribing") {
					return errors.New("not subscribed yet")
				}
				return nil
			}, "README.md line %d: %s", s.Line, s)
			w.subs = append(w.subs, p)
		default:
			t.Fatalf("README.md line %d: %s: a terminal the test does not know how to wait for", s.Line, s)
		}
	}
}

func (w *walk) waitReady(t *testing.T, what, url string, p *terminal) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	waitFor(t, readyAfter, func() error {
		if p.exited() {
			return fmt.Errorf("%s exited: %v\n%s", what, p.err, p.out)
		}
		resp, err := client.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		return nil
	}, "docscheck: %s ready", what)
}

func (w *walk) connect(t *testing.T) {
	nc, err := nats.Connect(w.natsURL)
	if err != nil {
		t.Fatalf("docscheck: connecting to the worker's embedded server %s: %v", w.natsURL, err)
	}
	w.t.Cleanup(nc.Close)
	if w.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
}

// settle waits until the worker has acknowledged every envelope of INGEST, so that the next step sees their
// effects (a claim, a dead letter, a published event) as a reader who waits a moment would.
func (w *walk) settle(t *testing.T) {
	t.Helper()
	if w.js == nil {
		return
	}
	waitFor(t, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := w.js.Consumer(ctx, "INGEST", "dedupeworker")
		if err != nil {
			return err
		}
		info, err := c.Info(ctx)
		if err != nil {
			return err
		}
		if info.NumPending+uint64(info.NumAckPending) > 0 {
			return fmt.Errorf("consumer INGEST/dedupeworker: %d pending, %d awaiting ack", info.NumPending, info.NumAckPending)
		}
		return nil
	}, "docscheck: the worker done with INGEST")
}

// checkEvents reads the output stream's new messages and compares them with what the block says it shows.
func (w *walk) checkEvents(t *testing.T, name string, want []event) {
	t.Helper()
	if w.js == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := w.js.Stream(ctx, "DEDUPED")
	if err != nil {
		t.Fatalf("docscheck: stream DEDUPED: %v", err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []event
	for seq := w.lastSeq + 1; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("docscheck: DEDUPED seq %d: %v", seq, err)
		}
		key := m.Header.Get("Idempotency-Key")
		if strings.HasPrefix(key, "msg/") {
			key = "" // unkeyed: named after its envelope, which differs on every run
		}
		if st := m.Header.Get("Dedupe-Status"); st != "unique" && st != "unkeyed" {
			t.Errorf("block %s: DEDUPED seq %d: Dedupe-Status %q", name, seq, st)
		}
		if m.Header.Get("Dedupe-Input-Stream") != "INGEST" || m.Header.Get("Dedupe-Input-Seq") == "" {
			t.Errorf("block %s: DEDUPED seq %d lacks Dedupe-Input-Stream/-Seq: %v", name, seq, m.Header)
		}
		got = append(got, event{key, m.Subject})
	}
	w.lastSeq = info.State.LastSeq
	if !slices.Equal(got, want) {
		t.Errorf("block %s: the output stream shows %v, the README says %v", name, got, want)
	}
	for _, p := range w.subs {
		for _, e := range want {
			if e.key == "" {
				continue
			}
			waitFor(t, 10*time.Second, func() error {
				if !strings.Contains(p.out.String(), "Idempotency-Key: "+e.key) {
					return fmt.Errorf("no Idempotency-Key: %s in:\n%s", e.key, p.out)
				}
				return nil
			}, "block %s: nats sub shows %s", name, e.key)
		}
	}
}

// waitFor polls cond until it returns nil, failing the test with the last error after timeout.
func waitFor(t *testing.T, timeout time.Duration, cond func() error, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s: %v", fmt.Sprintf(format, args...), timeout, err)
		}
		time.Sleep(50 * time.Millisecond) // polling interval, not a wait for a condition
	}
}
