package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// printFlags writes fs's flags as the docs write them: --name for a long name, -s for a one-letter one, a flag
// registered as "same as -s" folded into that line (-s, --server), the value's name and the default when it is
// not the zero value.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	aliases := map[string][]string{} // flag name → the names registered as "same as -name"
	fs.VisitAll(func(f *flag.Flag) {
		if target, ok := strings.CutPrefix(f.Usage, "same as -"); ok {
			aliases[target] = append(aliases[target], f.Name)
		}
	})
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fs.VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Usage, "same as -") {
			return
		}
		names := []string{flagDash(f.Name)}
		for _, a := range aliases[f.Name] {
			names = append(names, flagDash(a))
		}
		arg, usage := flag.UnquoteUsage(f)
		switch arg {
		case "", "bool":
			arg = ""
		case "value", "string": // a flag.Func, or a string flag, without a `name` in its usage
			arg = "VALUE"
		case "int", "uint", "uint64":
			arg = "N"
		default:
			arg = strings.ToUpper(arg)
		}
		line := "  " + strings.Join(names, ", ")
		if arg != "" {
			line += " " + arg
		}
		if d := f.DefValue; d != "" && d != "false" && d != "0" {
			usage += fmt.Sprintf(" (default %s)", d)
		}
		fmt.Fprintf(tw, "%s\t%s\n", line, usage)
	})
	_ = tw.Flush()
}

// subcommandPage is the help page of one subcommand cut from its command's shared usage: of the synopsis (the
// lines after "Usage:" up to the first blank line) it keeps the lines of cmd ("dlq rm"), and of the paragraphs
// that describe the subcommands one by one (a line starting with a subcommand of others, then lines indented by
// eight spaces) it keeps cmd's.
func subcommandPage(usage, cmd string, others []string) string {
	parent, sub, _ := strings.Cut(cmd, " ")
	lines := strings.Split(usage, "\n")
	var out []string
	inSynopsis, skipping := false, false
	for _, l := range lines {
		switch {
		case l == "Usage:":
			inSynopsis = true
			out = append(out, l)
			continue
		case inSynopsis && l == "":
			inSynopsis = false
		case inSynopsis:
			if strings.Contains(l, "dedupeworker "+parent+" "+sub+" ") || strings.HasSuffix(l, "dedupeworker "+parent+" "+sub) {
				out = append(out, l)
			}
			continue
		}
		if skipping && strings.HasPrefix(l, "        ") {
			continue
		}
		skipping = slices.ContainsFunc(others, func(o string) bool {
			return o != sub && strings.HasPrefix(l, o+"  ") && strings.TrimSpace(l[len(o):]) != ""
		})
		if !skipping && (l != "" || len(out) == 0 || out[len(out)-1] != "") {
			out = append(out, l)
		}
	}
	page := strings.Join(out, "\n")
	if strings.HasSuffix(usage, "\n\n") && !strings.HasSuffix(page, "\n\n") {
		page += "\n" // the blank line before the flags
	}
	return page
}

// The flag package's errors for a value its flag refused, a boolean flag's value that is not one, and a flag given
// last without its value.
var (
	invalidValue = regexp.MustCompile(`^invalid value "((?:[^"\\]|\\.)*)" for flag -([^:]+): (.*)$`)
	invalidBool  = regexp.MustCompile(`^invalid boolean value "((?:[^"\\]|\\.)*)" for -([^:]+): (.*)$`)
	needsValue   = regexp.MustCompile(`^flag needs an argument: -(.+)$`)
)

// flagDash is how the docs write the flag name: -s for one letter, --name for more.
func flagDash(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// flagErrText words a flag error as the docs write flags: a refused value is "--name "value": why", once (a Value
// whose own error names the flag or the value already keeps it), and a value the flag package could not parse says
// what the flag wants instead of "parse error"; a flag given without its value "--name needs a value".
func flagErrText(fs *flag.FlagSet, err error) string {
	if m := needsValue.FindStringSubmatch(err.Error()); m != nil {
		return flagDash(m[1]) + " needs a value"
	}
	if m := invalidBool.FindStringSubmatch(err.Error()); m != nil {
		value, name, why := m[1], m[2], m[3]
		if why == "parse error" {
			why = "not true or false: give " + flagDash(name) + " alone, or " + flagDash(name) + "=true or " + flagDash(name) + "=false"
		}
		return flagDash(name) + ` "` + value + `": ` + why
	}
	m := invalidValue.FindStringSubmatch(err.Error())
	if m == nil {
		return err.Error()
	}
	value, name, why := m[1], m[2], m[3]
	named := flagDash(name) + ` "` + value + `"`
	if strings.HasPrefix(why, flagDash(name)+" ") {
		return why
	}
	why = strings.TrimPrefix(why, `"`+value+`": `)
	if why == "parse error" {
		if f := fs.Lookup(name); f != nil {
			if g, ok := f.Value.(flag.Getter); ok {
				switch g.Get().(type) {
				case time.Duration:
					why = "not a duration: give it with its unit, e.g. 5s, 2m or 1h30m"
				case int, int64:
					why = "not a whole number"
				case uint, uint64:
					why = "not a whole number, 0 or more"
				}
			}
		}
	}
	return named + ": " + why
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// newFlagSet returns a flag set whose errors become usage errors rather than exits (parseFlags). It prints
// nothing itself: its output is set to where help was asked for.
func newFlagSet(name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		printFlags(fs.Output(), fs)
	}
	return fs
}

// parseFlags turns flag errors into exit status 2 and one line on standard error, and -h into a helpRequest, which
// run prints on standard output (help is what was asked for, not an error) and ends with exit status 0.
func parseFlags(fs *flag.FlagSet, args []string) error {
	switch err := fs.Parse(args); {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		return &helpRequest{usage: func(w io.Writer) {
			fs.SetOutput(w)
			fs.Usage()
		}}
	default:
		return usageErr("%s: %s (see 'dedupeworker %s -h')", fs.Name(), flagErrText(fs, err), fs.Name())
	}
}

// parseFlagsOnly is parseFlags for a command that takes no argument besides its flags.
func parseFlagsOnly(fs *flag.FlagSet, args []string) error {
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return nil
}
