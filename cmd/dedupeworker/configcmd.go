package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/dedupeworker/dedupeworker/internal/config"
	"github.com/dedupeworker/dedupeworker/internal/natsconn"
)

const configUsage = `Usage: dedupeworker config [--json] [connection flags]

Prints every setting with the value in force and where it came from: default, environment (a DEDUPE_* variable
that is set), or derived (a default computed from other settings); then the NATS server the commands connect to
and where that came from (a flag, a DEDUPE_NATS_* setting, NATS_URL, a nats CLI context file, or the embedded
server), and the sources document. Secrets are never printed: user information in URLs is redacted, and the
signing secrets of ingest are not settings. Unknown DEDUPE_* variables are warned about on standard error.

`

// configSetting is one setting as config prints it.
type configSetting struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	From  string `json:"from"` // default, environment or derived
}

// configReport is what config prints.
type configReport struct {
	Settings []configSetting `json:"settings"`
	Server   string          `json:"server"`
	Origin   string          `json:"server_from"`
	Sources  string          `json:"sources"`
}

func runConfig(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("config", configUsage)
	asJSON := fs.Bool("json", false, "print one JSON object")
	conn := addConnFlags(fs)
	if err := parseFlagsOnly(fs, args); err != nil {
		return err
	}
	cfg, _, err := loadSettings(stderr)
	if err != nil {
		return err
	}
	rep := configReport{Settings: configSettings(cfg)}
	nc, embedded, err := conn.resolve(cfg)
	if err != nil {
		return err
	}
	if embedded {
		rep.Server, rep.Origin = "nats://"+cfg.EmbeddedListen, "the embedded server (no NATS server configured): run starts it, the other commands connect to it"
	} else {
		rep.Server, rep.Origin = natsconn.Redact(nc.URL), nc.Origin
	}
	src, fromPresets, err := loadSources(cfg, false)
	switch o, ok := configuredSources(cfg); {
	case err != nil:
		rep.Sources = "invalid: " + err.Error()
	case !ok:
		rep.Sources = "none configured: one source per preset (" + strings.Join(src.IDs(), ", ") + ")"
	case fromPresets:
		rep.Sources = o.String() + " declares no source: one source per preset (" + strings.Join(src.IDs(), ", ") + ")"
	default:
		rep.Sources = fmt.Sprintf("%s: %s", o, strings.Join(src.IDs(), ", "))
	}
	if *asJSON {
		return writeJSON(stdout, rep)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SETTING\tFROM\tVALUE")
	for _, s := range rep.Settings {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, s.From, cmp.Or(s.Value, "-"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nserver   %s (%s)\nsources  %s\n", rep.Server, rep.Origin, rep.Sources)
	return nil
}

// configSettings lists every setting in the order of `dedupeworker help`, with the value in force (secrets
// redacted, durations as the docs write them) and where it came from.
func configSettings(cfg config.Config) []configSetting {
	values := attrsByName(cfg, "")
	derived := inForce(cfg, config.RoleRun)
	maps.Copy(derived, inForce(cfg, config.RoleIngest))
	var out []configSetting
	for _, name := range config.Variables() {
		s := configSetting{Name: name, From: "default"}
		if v, ok := values[name]; ok {
			s.Value = v.String()
		}
		if _, set := os.LookupEnv(name); set {
			s.From = "environment"
		} else if v, ok := derived[name]; ok {
			s.Value, s.From = v.String(), "derived"
		}
		out = append(out, s)
	}
	return out
}
