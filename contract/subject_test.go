package contract_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dedupeworker/dedupeworker/contract"
)

func TestParseInput(t *testing.T) {
	long := strings.Repeat("a", 65)
	for _, tc := range []struct {
		prefix, subject string
		want            contract.Input
		reason          string // "" when valid
		msg             string // a piece of the error
	}{
		{"ingest", "ingest.acme.github", contract.Input{"acme", "github", "acme.github"}, "", ""},
		{"ingest", "ingest.acme.github.push", contract.Input{"acme", "github", "acme.github.push"}, "", ""},
		{"ingest", "ingest.a_b-C.x.y.z", contract.Input{"a_b-C", "x", "a_b-C.x.y.z"}, "", ""},
		{"in.put", "in.put.acme.github", contract.Input{"acme", "github", "acme.github"}, "", ""},
		{"ingest", "ingest.acme", contract.Input{}, contract.DeadBadSubject, `subject "ingest.acme" is not of the form ingest.<tenant>.<source>`},
		{"ingest", "ingest.", contract.Input{}, contract.DeadBadSubject, "not of the form"},
		{"ingest", "ingest", contract.Input{}, contract.DeadBadSubject, "not of the form"},
		{"ingest", "ingestx.acme.github", contract.Input{}, contract.DeadBadSubject, "not of the form"},
		{"ingest", "other.acme.github", contract.Input{}, contract.DeadBadSubject, "not of the form"},
		{"ingest", "ingest..github", contract.Input{"", "github", ".github"}, contract.DeadBadTenant, `tenant "" must be 1-64 characters`},
		{"ingest", "ingest.acme.", contract.Input{"acme", "", "acme."}, contract.DeadBadSource, `source "" must be`},
		{"ingest", "ingest.acme..push", contract.Input{"acme", "", "acme..push"}, contract.DeadBadSource, "source"},
		{"ingest", "ingest.acme.bad+source", contract.Input{"acme", "bad+source", "acme.bad+source"}, contract.DeadBadSource, `"bad+source"`},
		{"ingest", "ingest." + long + ".github", contract.Input{long, "github", long + ".github"}, contract.DeadBadTenant, "tenant"},
		{"ingest", "ingest.acme." + long, contract.Input{"acme", long, "acme." + long}, contract.DeadBadSource, "source"},
	} {
		got, err := contract.ParseInput(tc.prefix, tc.subject)
		if got != tc.want {
			t.Errorf("ParseInput(%q, %q) = %+v, want %+v", tc.prefix, tc.subject, got, tc.want)
		}
		var se *contract.SubjectError
		switch {
		case tc.reason == "" && err != nil:
			t.Errorf("ParseInput(%q, %q): %v", tc.prefix, tc.subject, err)
		case tc.reason == "":
		case !errors.As(err, &se):
			t.Errorf("ParseInput(%q, %q): error %v, want a *SubjectError", tc.prefix, tc.subject, err)
		case se.Reason != tc.reason || !strings.Contains(err.Error(), tc.msg):
			t.Errorf("ParseInput(%q, %q): reason %s, %q; want %s, %q", tc.prefix, tc.subject, se.Reason, err, tc.reason, tc.msg)
		}
	}
}

func TestSubjects(t *testing.T) {
	in, err := contract.ParseInput("ingest", contract.InputSubject("ingest", "acme", "github")+".push")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ got, want string }{
		{contract.InputSubject(contract.DefaultInputPrefix, "acme", "github"), "ingest.acme.github"},
		{contract.Republish(contract.DefaultOutputPrefix, in.Tail), "deduped.acme.github.push"},
		{contract.Republish("audit.dup", in.Tail), "audit.dup.acme.github.push"},
		{contract.DeadLetterSubject(contract.DefaultDLQPrefix, contract.DeadBadClaim), "dedupe.dlq.bad-claim"},
		{contract.All(contract.DefaultOutputPrefix), "deduped.>"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestParseDeadLetter(t *testing.T) {
	for _, tc := range []struct {
		prefix, subject, reason string
		ok                      bool
	}{
		{"dedupe.dlq", "dedupe.dlq.bad-subject", "bad-subject", true},
		{"dedupe.dlq", "dedupe.dlq.output-reject", "output-reject", true},
		{"dedupe.dlq", "dedupe.dlq.", "", false},
		{"dedupe.dlq", "dedupe.dlq", "", false},
		{"dedupe.dlq", "dedupe.dlqx.bad-claim", "", false},
		{"dedupe.dlq", "deduped.acme.github", "", false},
	} {
		reason, ok := contract.ParseDeadLetter(tc.prefix, tc.subject)
		if reason != tc.reason || ok != tc.ok {
			t.Errorf("ParseDeadLetter(%q, %q) = %q, %v; want %q, %v", tc.prefix, tc.subject, reason, ok, tc.reason, tc.ok)
		}
	}
	for _, r := range contract.DeadReasons() {
		if got, ok := contract.ParseDeadLetter("dlq", contract.DeadLetterSubject("dlq", r)); !ok || got != r {
			t.Errorf("reason %s: read back as %q, %v", r, got, ok)
		}
	}
}

// The hot path parses every envelope's subject: a valid one costs no allocation.
func TestParseInputDoesNotAllocate(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _, _ = contract.ParseInput("ingest", "ingest.acme.github.push") }); n != 0 {
		t.Errorf("ParseInput allocates %v times per valid subject", n)
	}
}

func FuzzParseInput(f *testing.F) {
	for _, s := range []string{"ingest.acme.github", "ingest.acme.github.push", "ingest.acme", "ingest..x", "ingest.a.", "x.y.z", ""} {
		f.Add("ingest", s)
	}
	f.Add("in.put", "in.put.a.b")
	f.Fuzz(func(t *testing.T, prefix, subject string) {
		in, err := contract.ParseInput(prefix, subject)
		if err != nil {
			var se *contract.SubjectError
			if !errors.As(err, &se) {
				t.Fatalf("%q, %q: error %T", prefix, subject, err)
			}
			switch se.Reason {
			case contract.DeadBadSubject:
				if in != (contract.Input{}) {
					t.Fatalf("%q, %q: bad subject, yet %+v", prefix, subject, in)
				}
				return
			case contract.DeadBadTenant, contract.DeadBadSource:
			default:
				t.Fatalf("%q, %q: reason %q", prefix, subject, se.Reason)
			}
		}
		// The tokens read are the subject's: prefix, tenant, source, then the rest of the tail.
		if contract.Republish(prefix, in.Tail) != subject {
			t.Fatalf("%q, %q: tail %q does not rebuild the subject", prefix, subject, in.Tail)
		}
		if !strings.HasPrefix(in.Tail, in.Tenant+"."+in.Source) || strings.Contains(in.Tenant, ".") || strings.Contains(in.Source, ".") {
			t.Fatalf("%q, %q: %+v", prefix, subject, in)
		}
		if rest := in.Tail[len(in.Tenant)+1+len(in.Source):]; rest != "" && rest[0] != '.' {
			t.Fatalf("%q, %q: source %q is not a whole token", prefix, subject, in.Source)
		}
		if err == nil && contract.InputSubject(prefix, in.Tenant, in.Source) != subject[:len(prefix)+len(in.Tenant)+len(in.Source)+2] {
			t.Fatalf("%q, %q: InputSubject does not rebuild the subject's start", prefix, subject)
		}
	})
}
