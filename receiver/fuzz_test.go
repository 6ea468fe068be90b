package receiver_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dedupeworker/dedupeworker/contract"
	"github.com/dedupeworker/dedupeworker/receiver"
)

// splitOracle is the test's own reading of a secrets list: parts between seps, white space trimmed, empty ones
// dropped.
func splitOracle(s, seps string) []string {
	var out []string
	for _, part := range strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune(seps, r) }) {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// shadow replaces each secret by a placeholder, equal secrets by equal placeholders, keeping the list's shape.
func shadow(secrets []string, sep string) string {
	first := map[string]int{}
	parts := make([]string, len(secrets))
	for i, s := range secrets {
		if _, ok := first[s]; !ok {
			first[s] = i
		}
		parts[i] = fmt.Sprintf("placeholder-%d", first[s])
	}
	return strings.Join(parts, sep)
}

// The secret file and variable parsers: every secret the test's own reading finds verifies, nothing else does,
// and what LoadSecrets and NewPolicy print or return (errors included) is the same whatever the secrets are — the
// same as for placeholders of the same shape — so that no secret can leak through them.
func FuzzReceiverSecrets(f *testing.F) {
	f.Add([]byte("old\nnew\n"), "a,b")
	f.Add([]byte("\uFEFFone\r\n\r\n two \r\n"), " x , y ,,\n z")
	f.Add([]byte("same\nsame\n"), "")
	f.Add([]byte("  \n\t\n"), "only")
	f.Add([]byte("with inner space\n\x00nul\n"), "\u00a0nbsp\u00a0")
	f.Fuzz(func(t *testing.T, content []byte, env string) {
		dir := t.TempDir()
		src := mustSources(t, "sources: {src: {verify: {scheme: hmac, header: X-Sig}}, other: {verify: {scheme: hmac, header: X-Sig}}}")
		load := func(content []byte, env string) (string, *receiver.Policy, string) {
			writeFile(t, filepath.Join(dir, "src"), string(content))
			secrets, err := receiver.LoadSecrets(receiver.SecretsConfig{Dir: dir, Environ: []string{"DEDUPE_INGEST_SECRET_OTHER=" + env}, Sources: src.IDs()})
			if err != nil {
				return "", nil, err.Error()
			}
			p, err := receiver.NewPolicy(receiver.PolicyConfig{Sources: src, Secrets: secrets})
			shown := fmt.Sprintf("%v|%+v|%#v|%s|%x|%d", secrets, secrets, secrets, secrets, secrets, secrets)
			if err != nil {
				return shown, nil, err.Error()
			}
			return shown + fmt.Sprintf("|%v|%+v|%#v", p, p, p), p, ""
		}
		fileSecrets := splitOracle(strings.TrimPrefix(string(content), "\uFEFF"), "\n")
		envSecrets := splitOracle(env, ",\n")
		shown, p, errText := load(content, env)
		if len(content) <= 64<<10 {
			sShown, _, sErr := load([]byte(shadow(fileSecrets, "\n")), shadow(envSecrets, ","))
			if shown != sShown || errText != sErr {
				t.Fatalf("output depends on the secrets' values:\n%q\n%q\nvs placeholders:\n%q\n%q", shown, errText, sShown, sErr)
			}
		}
		if p == nil {
			valid := len(fileSecrets) > 0 && len(envSecrets) > 0 && !hasDuplicate(fileSecrets) && !hasDuplicate(envSecrets) && len(content) <= 64<<10
			if errText == "" || valid {
				t.Fatalf("refused %d file secrets and %d variable secrets: %s", len(fileSecrets), len(envSecrets), errText)
			}
			return
		}
		if len(fileSecrets) == 0 {
			t.Fatal("a file without secrets was accepted")
		}
		check := func(source string, secrets []string) {
			v, ok := p.Verifier("t", source)
			if !ok {
				if len(secrets) == 0 {
					return
				}
				t.Fatalf("%s not served", source)
			}
			body := []byte("body")
			for i, s := range secrets {
				if i == 16 {
					break
				}
				if err := v.Verify(hdr("X-Sig", hmacHex(s, "body")), body); err != nil {
					t.Fatalf("%s: secret %d does not verify: %v", source, i+1, err)
				}
			}
			if err := v.Verify(hdr("X-Sig", hmacHex(strings.Join(secrets, "|")+"\x00not-a-secret", "body")), body); err == nil {
				t.Fatalf("%s: a secret not listed verifies", source)
			}
		}
		check("src", fileSecrets)
		check("other", envSecrets)
	})
}

func hasDuplicate(ss []string) bool {
	seen := map[string]bool{}
	for _, s := range ss {
		if seen[s] {
			return true
		}
		seen[s] = true
	}
	return false
}

// Any request through the handler: the answer is one of the documented ones; an envelope is stored only for a
// well-formed path of a served source and method POST; a stored envelope carries exactly one Ingest-Verified,
// set by the receiver, none of the client's Nats-*, Dedupe-*, Ingest-*, Status, Description, KV-Operation or
// hop-by-hop headers (in any case, '_' read as '-'), and the body as sent; a source that rejects stores nothing
// unsigned.
func FuzzReceiverRequest(f *testing.F) {
	e := startJS(f, true)
	src := mustSources(f, "sources: {open: {verify: none}, fw: {verify: github, on_invalid: forward}, gh: {verify: github}}")
	secrets, err := receiver.LoadSecrets(receiver.SecretsConfig{Environ: []string{"DEDUPE_INGEST_SECRET_FW=" + ghOld, "DEDUPE_INGEST_SECRET_GH=" + ghOld}, Sources: src.IDs()})
	if err != nil {
		f.Fatal(err)
	}
	p, err := receiver.NewPolicy(receiver.PolicyConfig{Sources: src, Secrets: secrets})
	if err != nil {
		f.Fatal(err)
	}
	r, _ := newReceiver(f, e, p, func(c *receiver.Config) { c.MaxBody = 1 << 12; c.MaxHeaderBytes = 1 << 11 })
	s, err := e.js.Stream(context.Background(), "INGEST")
	if err != nil {
		f.Fatal(err)
	}
	f.Add("POST", "/hooks/acme/open", "Ingest-Verified", "true", []byte(`{"a":1}`))
	f.Add("POST", "/hooks/acme/fw", "iNgEsT-vErIfIeD", "TRUE", []byte(`{}`))
	f.Add("POST", "/hooks/acme/gh", "X-Hub-Signature-256", githubSig(ghOld, "x"), []byte("x"))
	f.Add("POST", "/hooks/acme/gh", "Nats-Msg-Id", "1", []byte("x"))
	f.Add("POST", "/hooks/acme/open", "Connection", "X-Keep", []byte(""))
	f.Add("POST", "/hooks/acme/open", "X-Bad", "a\r\nIngest-Verified: true", []byte(""))
	f.Add("GET", "/hooks/a/b/c", "Dedupe-Key", "k", []byte("x"))
	f.Add("POST", "/hooks/"+strings.Repeat("t", 64)+"/open", "X", "y", bytes.Repeat([]byte("b"), 5000))
	f.Add("POST", "/hooks/acme/open", "Status", "409", []byte(""))
	f.Add("POST", "/hooks/acme/open", "description", "Consumer Deleted", []byte(""))
	f.Add("POST", "/hooks/acme/open", "Ingest_Verified", "true", []byte("x"))
	f.Add("POST", "/hooks/acme/open", "NATS_MSG_ID", "1", []byte("x"))
	f.Add("POST", "/hooks/acme/open", "Kv-Operation", "DEL", []byte(""))
	f.Fuzz(func(t *testing.T, method, path, name, value string, body []byte) {
		h := http.Header{name: {value}, "Connection": {"X-Keep"}, "X-Keep": {"1"}, "Nats-Expected-Stream": {"X"}, "Dedupe-Status": {"unique"}}
		req := &http.Request{
			Method: method, URL: &url.URL{Path: path}, Header: h, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), RemoteAddr: "192.0.2.1:1234",
		}
		req = req.WithContext(context.Background())
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		if path == "/healthz" || path == "/readyz" || path == "/metrics" {
			if rec.Code != 200 && rec.Code != 405 {
				t.Fatalf("%s %q: status %d", method, path, rec.Code)
			}
			return
		}
		switch rec.Code {
		case 202, 400, 401, 404, 405, 408, 413, 431, 503:
		default:
			t.Fatalf("%s %q: status %d", method, path, rec.Code)
		}
		if rec.Code != 202 {
			return
		}
		tenant, source, ok := strings.Cut(strings.TrimPrefix(path, receiver.HookPrefix), "/")
		if method != "POST" || !strings.HasPrefix(path, receiver.HookPrefix) || !ok || source == "gh" && !validGitHub(name, value, body) {
			t.Fatalf("%s %q (%s, %s) stored: %s", method, path, tenant, source, rec.Body.String())
		}
		seq := acceptedSeqFuzz(t, rec.Body.String())
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		checkStored(t, m, body)
	})
}

func validGitHub(name, value string, body []byte) bool {
	return strings.EqualFold(name, "X-Hub-Signature-256") && strings.TrimSpace(value) == githubSig(ghOld, string(body))
}

func acceptedSeqFuzz(t *testing.T, answer string) uint64 {
	t.Helper()
	var seq uint64
	rest := answer[strings.Index(answer, " seq ")+len(" seq "):]
	if _, err := fmt.Sscanf(rest, "%d", &seq); err != nil {
		t.Fatalf("answer %q: %v", answer, err)
	}
	return seq
}

func checkStored(t *testing.T, m *jetstream.RawStreamMsg, body []byte) {
	t.Helper()
	if !bytes.Equal(m.Data, body) {
		t.Fatalf("stored body %q, sent %q", m.Data, body)
	}
	verified := 0
	for k, vals := range m.Header {
		// As a gateway may read it: any case, '_' as '-'.
		lk := strings.ReplaceAll(strings.ToLower(k), "_", "-")
		switch {
		case k == contract.HeaderVerified:
			verified++
			if len(vals) != 1 || k != contract.HeaderVerified || vals[0] != "true" && vals[0] != "false" {
				t.Fatalf("Ingest-Verified: %q %q", k, vals)
			}
		case k == "Nats-Expected-Stream":
			if len(vals) != 1 || vals[0] != "INGEST" {
				t.Fatalf("Nats-Expected-Stream %q", vals)
			}
		case strings.HasPrefix(lk, "nats-"), strings.HasPrefix(lk, "dedupe-"), strings.HasPrefix(lk, "ingest-"),
			lk == "connection", lk == "x-keep", lk == "authorization", lk == "cookie", lk == "upgrade", lk == "te",
			strings.HasPrefix(lk, "proxy-"), lk == "keep-alive", lk == "transfer-encoding", lk == "trailer",
			lk == "status", lk == "description", lk == "kv-operation":
			t.Fatalf("stored the client's %s", k)
		}
		for _, v := range vals {
			if strings.ContainsAny(k+v, "\r\n\x00") {
				t.Fatalf("stored a header with a control character: %q: %q", k, v)
			}
		}
	}
	if verified != 1 {
		t.Fatalf("%d Ingest-Verified headers", verified)
	}
}
