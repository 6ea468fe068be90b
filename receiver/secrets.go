package receiver

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dedupeworker/dedupeworker/keys"
)

// EnvSecretPrefix starts the name of a variable that holds the secrets of one source for every tenant (SecretEnv).
const EnvSecretPrefix = "DEDUPE_INGEST_SECRET_"

// maxSecretFile bounds what is read of one secret file: a few secrets, not a misplaced archive.
const maxSecretFile = 64 << 10

// SecretEnv is the variable that holds a source's secrets for every tenant: EnvSecretPrefix and the source id in
// upper case with '-' as '_' (my-app: DEDUPE_INGEST_SECRET_MY_APP). Two declared sources that map to one name
// cannot use it: LoadSecrets says so when it is set.
func SecretEnv(source string) string {
	return EnvSecretPrefix + strings.ToUpper(strings.ReplaceAll(source, "-", "_"))
}

// SecretsConfig says where LoadSecrets reads.
type SecretsConfig struct {
	// Dir is a directory of secret files (DEDUPE_INGEST_SECRETS_DIR; docs/sources.md, "Secrets"); "" reads none.
	// Names starting with '.' are skipped (the ..data links of a Kubernetes Secret volume).
	Dir string
	// Environ is the environment (os.Environ()): SecretEnv(source) holds a source's secrets for every tenant,
	// separated by commas or newlines. An empty variable counts as unset.
	Environ []string
	// Sources are the declared source ids: every file and variable must name one, so that a typo is an error.
	Sources []string
}

// Secrets are the signing secrets of each source: for every tenant, and for single tenants. A tenant's own
// secrets replace the source's secrets for every tenant (they are not added to them). Formatting Secrets in any
// way (fmt's verbs, slog) shows where they came from and how many there are, never a secret.
type Secrets struct {
	sets map[secretScope]secretSet
}

type secretScope struct{ source, tenant string } // tenant "": every tenant

type secretSet struct {
	values []string
	origin string // "DEDUPE_INGEST_SECRET_GITHUB", "secrets directory /run/secrets/acme.github"
}

// LoadSecrets reads the secrets cfg names. Errors (joined, each starting "receiver: ") name the variable or file
// at fault and never quote a secret.
func LoadSecrets(cfg SecretsConfig) (*Secrets, error) {
	s := &Secrets{sets: map[secretScope]secretSet{}}
	byEnv := map[string][]string{}
	for _, id := range cfg.Sources {
		byEnv[SecretEnv(id)] = append(byEnv[SecretEnv(id)], id)
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("receiver: "+format, args...)) }

	if cfg.Dir != "" {
		entries, err := os.ReadDir(cfg.Dir)
		if err != nil {
			return nil, fmt.Errorf("receiver: secrets directory %s: %w", cfg.Dir, pathless(err))
		}
		for _, e := range entries {
			name := e.Name()
			if strings.HasPrefix(name, ".") {
				continue
			}
			origin := "secrets directory " + filepath.Join(cfg.Dir, name)
			tenant, source, scoped := strings.Cut(name, ".")
			if !scoped {
				tenant, source = "", name
			}
			if !keys.ValidID(source) || scoped && !keys.ValidID(tenant) {
				bad("%s: the name must be <source> (every tenant) or <tenant>.<source>, each 1-64 characters of A-Z, a-z, 0-9, _ and -", origin)
				continue
			}
			if !slices.Contains(cfg.Sources, source) {
				bad("%s: source %q is not declared (declared: %s)", origin, source, strings.Join(sortedIDs(cfg.Sources), ", "))
				continue
			}
			values, err := readSecretFile(filepath.Join(cfg.Dir, name))
			if err != nil {
				bad("%s: %v", origin, err)
				continue
			}
			s.sets[secretScope{source, tenant}] = secretSet{values: values, origin: origin}
		}
	}

	seen := map[string]bool{}
	for _, kv := range cfg.Environ {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, EnvSecretPrefix) || seen[name] {
			continue
		}
		seen[name] = true // the first of two entries of one name wins, as in os.Getenv
		values := splitSecrets(val, ",\n")
		if len(values) == 0 {
			continue
		}
		switch ids := byEnv[name]; {
		case len(ids) == 0:
			bad("%s: names no declared source (a source's variable is %s followed by its id in upper case, '-' as '_'; declared: %s)",
				name, EnvSecretPrefix, strings.Join(sortedIDs(cfg.Sources), ", "))
		case len(ids) > 1:
			bad("%s: could hold the secrets of sources %s: put them in files of the secrets directory instead",
				name, strings.Join(sortedIDs(ids), " or "))
		case s.sets[secretScope{ids[0], ""}].origin != "":
			bad("%s and %s both give the secrets of source %s for every tenant: keep one", name, s.sets[secretScope{ids[0], ""}].origin, ids[0])
		default:
			s.sets[secretScope{ids[0], ""}] = secretSet{values: values, origin: name}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

// readSecretFile reads one file of secrets, one per line.
func readSecretFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, pathless(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, errors.New("is a directory, not a file of secrets")
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxSecretFile {
		return nil, fmt.Errorf("larger than %d bytes: not a file of secrets", maxSecretFile)
	}
	values := splitSecrets(strings.TrimPrefix(string(data), "\uFEFF"), "\n")
	if len(values) == 0 {
		return nil, errors.New("holds no secret (one per line)")
	}
	return values, nil
}

// pathless drops the path an *os.PathError repeats: the caller's message names the file.
func pathless(err error) error {
	if pe, ok := errors.AsType[*os.PathError](err); ok {
		return pe.Err
	}
	return err
}

// splitSecrets splits s at any of seps, trims white space (the CR of CRLF lines too) around each part and drops
// the empty ones.
func splitSecrets(s, seps string) []string {
	var out []string
	for _, part := range strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune(seps, r) }) {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

func sortedIDs(ids []string) []string { return slices.Sorted(slices.Values(ids)) }

// forSource lists the scopes of a source's secrets: every tenant ("") first, then its tenants, sorted.
func (s *Secrets) forSource(source string) []secretScope {
	return slices.DeleteFunc(s.scopes(), func(sc secretScope) bool { return sc.source != source })
}

// scopes lists the scopes that hold secrets, by source then tenant ("" first).
func (s *Secrets) scopes() []secretScope {
	if s == nil {
		return nil
	}
	return slices.SortedFunc(maps.Keys(s.sets), func(a, b secretScope) int {
		return cmp.Or(strings.Compare(a.source, b.source), strings.Compare(a.tenant, b.tenant))
	})
}

// String describes the secrets by scope, count and origin: "github (every tenant): 2 secrets from
// DEDUPE_INGEST_SECRET_GITHUB; stripe (tenant acme): 1 secret from secrets directory /run/x/acme.stripe".
func (s *Secrets) String() string {
	scopes := s.scopes()
	if len(scopes) == 0 {
		return "no secrets"
	}
	parts := make([]string, 0, len(scopes))
	for _, sc := range scopes {
		set := s.sets[sc]
		who := "every tenant"
		if sc.tenant != "" {
			who = "tenant " + sc.tenant
		}
		parts = append(parts, fmt.Sprintf("%s (%s): %s from %s", sc.source, who, countText(len(set.values)), set.origin))
	}
	return strings.Join(parts, "; ")
}

// Format prints String for every verb, of a Secrets and of a pointer to one: no verb reaches the secrets.
func (s Secrets) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, s.String()) }

// LogValue keeps slog from printing the secrets: one attribute per scope, with its count and origin.
func (s *Secrets) LogValue() slog.Value {
	scopes := s.scopes()
	attrs := make([]slog.Attr, 0, len(scopes))
	for _, sc := range scopes {
		set := s.sets[sc]
		key := sc.source
		if sc.tenant != "" {
			key = sc.tenant + "." + sc.source
		}
		attrs = append(attrs, slog.String(key, countText(len(set.values))+" from "+set.origin))
	}
	return slog.GroupValue(attrs...)
}

func countText(n int) string {
	if n == 1 {
		return "1 secret"
	}
	return fmt.Sprintf("%d secrets", n)
}
