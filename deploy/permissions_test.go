package deploy_test

import (
	"bytes"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// permissionsFile is the one machine-readable list of the NATS permissions the worker's user needs. The fault
// suite (integration/security_test.go) runs a worker whose user has exactly these permissions.
const permissionsFile = "nats-permissions.yaml"

type natsPermissions struct {
	Publish      []string `yaml:"publish"`
	Subscribe    []string `yaml:"subscribe"`
	JetStreamAPI []string `yaml:"jetstream_api"` // the narrower alternative to "$JS.API.>" in Publish
}

func loadPermissions(t *testing.T) (natsPermissions, []byte) {
	t.Helper()
	data, err := os.ReadFile(permissionsFile)
	if err != nil {
		t.Fatal(err)
	}
	var p natsPermissions
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("%s: %v", permissionsFile, err)
	}
	return p, data
}

// validPermSubject: dot-separated non-empty tokens without whitespace; ">" only as the last token.
func validPermSubject(s string) bool {
	if s == "" || strings.ContainsAny(s, " \t\r\n") {
		return false
	}
	toks := strings.Split(s, ".")
	for i, tok := range toks {
		if tok == "" || (strings.Contains(tok, ">") && (tok != ">" || i != len(toks)-1)) {
			return false
		}
	}
	return true
}

func TestNATSPermissionsFile(t *testing.T) {
	p, _ := loadPermissions(t)
	cfg := defaultConfig(t)
	if len(p.Publish) == 0 || len(p.Subscribe) == 0 {
		t.Fatalf("%s: publish and subscribe must both list subjects: %+v", permissionsFile, p)
	}
	for what, list := range map[string][]string{"publish": p.Publish, "subscribe": p.Subscribe, "jetstream_api": p.JetStreamAPI} {
		seen := map[string]bool{}
		for _, s := range list {
			if !validPermSubject(s) {
				t.Errorf("%s: %s: %q is not a subject", permissionsFile, what, s)
			}
			if seen[s] {
				t.Errorf("%s: %s lists %q twice", permissionsFile, what, s)
			}
			seen[s] = true
		}
	}
	// What the worker does with the default settings, subject by subject.
	wantPub := []string{
		cfg.OutputPrefix + ".>",    // unique events
		cfg.DLQPrefix + ".>",       // dead letters
		"$KV." + cfg.Bucket + ".>", // claims
		"$JS.API.>",                // JetStream API
		"$JS.ACK.>",                // acks and NAKs: without it every ack is refused
	}
	for _, s := range wantPub {
		if !slices.Contains(p.Publish, s) {
			t.Errorf("%s: publish lacks %q (publish: %v)", permissionsFile, s, p.Publish)
		}
	}
	if !slices.Contains(p.Subscribe, "_INBOX.>") {
		t.Errorf("%s: subscribe lacks _INBOX.> (replies and pulled envelopes)", permissionsFile)
	}
	for _, s := range p.Publish {
		if strings.HasPrefix(s, cfg.InputPrefix+".") || s == ">" {
			t.Errorf("%s: publish allows %q: the worker never publishes envelopes", permissionsFile, s)
		}
	}

	// The narrower API list names the configured streams, consumer and bucket only, and covers what the worker
	// asks of each.
	if len(p.JetStreamAPI) == 0 {
		t.Fatalf("%s: no jetstream_api list (the narrower alternative to $JS.API.>)", permissionsFile)
	}
	streams := []string{cfg.InputStream, cfg.OutputStream, cfg.DLQStream, "KV_" + cfg.Bucket}
	for _, s := range p.JetStreamAPI {
		rest, ok := strings.CutPrefix(s, "$JS.API.")
		if !ok {
			t.Errorf("%s: jetstream_api: %q is not a JetStream API subject", permissionsFile, s)
			continue
		}
		toks := strings.Split(rest, ".")
		switch {
		case toks[0] == "STREAM" && len(toks) >= 3:
			name := toks[2]
			if toks[1] == "MSG" && len(toks) >= 4 { // STREAM.MSG.GET.<stream>
				name = toks[3]
			}
			// The first shard's name is probed (stream info only) on a first start, to refuse a sharded window
			// configured as a single bucket.
			firstShard := "KV_" + cfg.Bucket + "-00"
			if !slices.Contains(streams, name) && (name != firstShard || s != "$JS.API.STREAM.INFO."+firstShard) {
				t.Errorf("%s: jetstream_api: %q names stream %q, not one of %v", permissionsFile, s, name, streams)
			}
		case toks[0] == "DIRECT" && len(toks) >= 3:
			if toks[2] != "KV_"+cfg.Bucket {
				t.Errorf("%s: jetstream_api: %q: direct gets are for the window's stream KV_%s only", permissionsFile, s, cfg.Bucket)
			}
		case toks[0] == "CONSUMER" && len(toks) >= 4:
			i := 2
			if toks[1] == "MSG" {
				i = 3
			}
			if len(toks) < i+2 || toks[i] != cfg.InputStream || toks[i+1] != cfg.Consumer {
				t.Errorf("%s: jetstream_api: %q does not name consumer %s of stream %s", permissionsFile, s, cfg.Consumer, cfg.InputStream)
			}
		case rest == "INFO":
		default:
			t.Errorf("%s: jetstream_api: unexpected API subject %q", permissionsFile, s)
		}
	}
	for _, st := range streams {
		for _, op := range []string{"INFO", "CREATE"} {
			if s := "$JS.API.STREAM." + op + "." + st; !slices.Contains(p.JetStreamAPI, s) {
				t.Errorf("%s: jetstream_api lacks %s", permissionsFile, s)
			}
		}
	}
	for _, s := range []string{
		"$JS.API.CONSUMER.INFO." + cfg.InputStream + "." + cfg.Consumer,
		"$JS.API.CONSUMER.MSG.NEXT." + cfg.InputStream + "." + cfg.Consumer,
		"$JS.API.STREAM.MSG.GET.KV_" + cfg.Bucket,
		"$JS.API.DIRECT.GET.KV_" + cfg.Bucket + ".>",
	} {
		if !slices.Contains(p.JetStreamAPI, s) {
			t.Errorf("%s: jetstream_api lacks %s", permissionsFile, s)
		}
	}
}

// credsDoc generates the Secret that holds the worker's NATS creds; its comment states the permissions they need.
const credsDoc = "k8s/base/kustomization.yaml"

// docs are the files that document the worker's NATS permissions (or may come to): each must agree with
// permissionsFile wherever it lists them.
var permissionDocs = []string{credsDoc, operationsMD, "../README.md", "../docs/deploying.md", "../docs/receiver.md", "../RELIABILITY.md", permissionsFile}

var wildcardSubject = regexp.MustCompile(`\$?[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*\.>`)

// TestNATSPermissionsDocumented: wherever a document lists the permissions (a line naming the output subjects and
// the window's $KV subjects), it lists every publish subject of the file, and nothing the file does not allow.
// The comment on the creds Secret's generator (credsDoc) states the lists verbatim and points at the file.
func TestNATSPermissionsDocumented(t *testing.T) {
	p, raw := loadPermissions(t)
	cfg := defaultConfig(t)
	allowed := map[string]bool{}
	for _, s := range slices.Concat(p.Publish, p.Subscribe, p.JetStreamAPI) {
		allowed[s] = true
	}
	out, kv := cfg.OutputPrefix+".>", "$KV."+cfg.Bucket+"."
	listings := 0
	for _, doc := range permissionDocs {
		data, err := os.ReadFile(doc)
		if err != nil {
			if os.IsNotExist(err) && doc != credsDoc && doc != permissionsFile {
				continue
			}
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		for i, line := range lines {
			if !strings.Contains(line, out) || !strings.Contains(line, kv) {
				continue
			}
			listings++
			// A listing may wrap: it and the next three lines must name every publish subject.
			window := strings.Join(lines[i:min(len(lines), i+4)], "\n")
			found := wildcardSubject.FindAllString(window, -1)
			for _, s := range p.Publish {
				if strings.HasSuffix(s, ".>") && !slices.Contains(found, s) {
					t.Errorf("%s:%d lists the NATS permissions without %s (the full list is in deploy/%s):\n\t%s",
						doc, i+1, s, permissionsFile, strings.TrimSpace(line))
				}
			}
			for _, s := range wildcardSubject.FindAllString(line, -1) {
				if !allowed[s] {
					t.Errorf("%s:%d lists %s, which deploy/%s does not allow:\n\t%s", doc, i+1, s, permissionsFile, strings.TrimSpace(line))
				}
			}
		}
	}
	if listings == 0 {
		t.Errorf("no document lists the NATS permissions")
	}

	// The creds Secret's comment: the two lists verbatim, and where they come from.
	secret, err := os.ReadFile(credsDoc)
	if err != nil {
		t.Fatal(err)
	}
	comment := commentLines(string(secret))
	if !strings.Contains(comment, "deploy/"+permissionsFile) {
		t.Errorf("%s: the comment does not point at deploy/%s", credsDoc, permissionsFile)
	}
	for what, want := range map[string][]string{"publish": p.Publish, "subscribe": p.Subscribe} {
		m := regexp.MustCompile(`(?m)^\s*` + what + `:\s+(.+)$`).FindStringSubmatch(comment)
		if m == nil {
			t.Errorf("%s: the comment has no %q line listing the subjects", credsDoc, what+":")
			continue
		}
		if got := splitList(m[1]); !slices.Equal(got, want) {
			t.Errorf("%s: comment %s: %v, but deploy/%s says %v", credsDoc, what, got, permissionsFile, want)
		}
	}

	// The nsc example in the file's own header.
	header := commentLines(string(raw))
	for flag, want := range map[string][]string{"--allow-pub": p.Publish, "--allow-sub": p.Subscribe} {
		m := regexp.MustCompile(regexp.QuoteMeta(flag) + `\s+'([^']*)'`).FindStringSubmatch(header)
		if m == nil {
			t.Errorf("%s: the nsc example has no %s", permissionsFile, flag)
			continue
		}
		if got := strings.Split(m[1], ","); !slices.Equal(got, want) {
			t.Errorf("%s: nsc example %s %v, but the list says %v", permissionsFile, flag, got, want)
		}
	}

	// OPERATIONS.md links to the file.
	ops, err := os.ReadFile(operationsMD)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ops), "(deploy/"+permissionsFile+")") {
		t.Errorf("OPERATIONS.md does not link to deploy/%s", permissionsFile)
	}
}

// commentLines is the text of a YAML file's comments, the leading "#" removed.
func commentLines(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if c, ok := strings.CutPrefix(strings.TrimSpace(line), "#"); ok {
			b.WriteString(c + "\n")
		}
	}
	return b.String()
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// TestAckFailureAlert: refused or failed acks page someone. A worker whose acks are refused keeps processing and
// every envelope comes back for ever, so this is critical; its runbook points at the permissions file.
func TestAckFailureAlert(t *testing.T) {
	ex := workerMetrics(t)
	const metric = "dedupeworker_ack_failures_total"
	labels, ok := ex.labels[metric]
	if !ok {
		t.Fatalf("pipeline.NewMetrics does not export %s", metric)
	}
	if !slices.Contains(labels, "reason") {
		t.Fatalf("%s has no reason label: %v", metric, labels)
	}
	var found []rule
	for _, r := range loadAlerts(t) {
		if r.Alert != "" && strings.Contains(r.Expr, metric) {
			found = append(found, r)
		}
	}
	if len(found) == 0 {
		t.Fatalf("no alert watches %s", metric)
	}
	for _, r := range found {
		if r.Labels["severity"] != "critical" {
			t.Errorf("alert %s: severity %q, want critical", r.Alert, r.Labels["severity"])
		}
		if d, err := time.ParseDuration(r.For); err != nil || d < time.Minute || d > 15*time.Minute {
			t.Errorf("alert %s: for %q, want a few minutes", r.Alert, r.For)
		}
	}
	ops, err := os.ReadFile(operationsMD)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range found {
		_, section, ok := strings.Cut(string(ops), "### "+r.Alert+"\n")
		if !ok {
			continue // TestOperationsLinks reports it
		}
		if i := strings.Index(section, "\n### "); i >= 0 {
			section = section[:i]
		}
		if !strings.Contains(section, permissionsFile) || !strings.Contains(section, "$JS.ACK.>") {
			t.Errorf("OPERATIONS.md, runbook %s: should name $JS.ACK.> and point at deploy/%s", r.Alert, permissionsFile)
		}
	}
}
