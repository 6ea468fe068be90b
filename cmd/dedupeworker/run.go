package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/dedupeworker/dedupeworker/internal/config"
)

// Exit statuses: 0 success, 1 a failure while working (invalid input data, NATS unreachable), 2 a usage or
// configuration error (bad flags, bad dedupe spec, bad path, bad setting).
const (
	exitFailure = 1
	exitUsage   = 2
)

// exitError carries an exit status; its message is printed as one line on standard error.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// failErr is a failure while working (exit 1), unless err already carries its exit status (a usage error found
// deeper down, such as an unknown --context, stays exit 2); nil stays nil.
func failErr(err error) error {
	var ee *exitError
	if err == nil || errors.As(err, &ee) {
		return err
	}
	return &exitError{code: exitFailure, err: err}
}

// helpRequest ends a command asked for its help (-h, help): run prints usage on its standard output, and the exit
// status is 0.
type helpRequest struct{ usage func(io.Writer) }

func (*helpRequest) Error() string { return "help requested" }

// helpText is the helpRequest of a command whose help is text alone.
func helpText(text string) error {
	return &helpRequest{usage: func(w io.Writer) { fmt.Fprint(w, text) }}
}

func isHelpArg(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "help"
}

// exitCode prints err (one line) and maps it to a process exit status.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	msg := strings.ReplaceAll(err.Error(), "\n", "; ")
	fmt.Fprintln(stderr, msg)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return exitFailure
}

// run is the whole program; main only wires the process to it. Help goes to stdout with exit status 0; errors go
// to stderr.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (err error) {
	defer func() {
		var h *helpRequest
		if errors.As(err, &h) {
			h.usage(stdout)
			err = nil
		}
	}()
	cmd := ""
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	switch {
	case hasSubcommands(cmd):
		defer func(name string) { err = commandErr(name, err) }(subcommand(cmd, args))
	case slices.Contains([]string{"", "run", "key", "hash", "ingest", "version", "config"}, cmd):
		defer func() { err = commandErr(cmp.Or(cmd, "run"), err) }()
	}
	switch cmd {
	case "", "run":
		return runWorker(ctx, args, stderr)
	case "key":
		return runKey(args, stdin, stdout)
	case "hash":
		return runHash(args, stdin, stdout)
	case "window":
		return explainJetStream(subcommand("window", args), runWindow(ctx, args, stdout, stderr))
	case "dlq":
		return explainJetStream(subcommand("dlq", args), runDlq(ctx, args, stdout, stderr))
	case "ingest":
		return runIngest(ctx, args, stderr)
	case "sources":
		return runSources(args, stdout, stderr)
	case "config":
		return runConfig(args, stdout, stderr)
	case "help", "-h", "-help", "--help":
		// `help help`, `help -h`, `-h -h`: help about help is the root help. Only a command name, and for a
		// command with subcommands the word after it (`help window get`), is passed on, once, as `CMD [SUB] -h`,
		// so that no form can recurse.
		if len(args) > 0 && !isHelpArg(args[0]) {
			topic := args[:1]
			if hasSubcommands(args[0]) && len(args) > 1 && !strings.HasPrefix(args[1], "-") && !isHelpArg(args[1]) {
				topic = args[:2]
			}
			return run(ctx, append(slices.Clone(topic), "-h"), stdin, stdout, stderr)
		}
		printHelp(stdout)
		return nil
	case "version", "--version", "-v":
		return runVersion(args, stdout)
	default:
		return usageErr("dedupeworker: unknown command %q (run 'dedupeworker help')", cmd)
	}
}

// hasSubcommands reports whether cmd takes a subcommand (window get, dlq rm, sources check).
func hasSubcommands(cmd string) bool { return cmd == "window" || cmd == "dlq" || cmd == "sources" }

// pickSubcommand is the subcommand args start with, one of subs; with none, an unknown one or help, cmd's page
// is printed: its usage, then the connection flags every subcommand of window and dlq takes (the usage says "the
// flags below"), and where the rest are.
func pickSubcommand(cmd, usage string, subs, args []string, stderr io.Writer) (string, error) {
	list := joinWords(subs, "or")
	switch {
	case len(args) == 0:
		fmt.Fprint(stderr, groupPage(cmd, usage))
		return "", usageErr("%s: a subcommand is required: %s", cmd, list)
	case isHelpArg(args[0]):
		return "", helpText(groupPage(cmd, usage))
	case !slices.Contains(subs, args[0]):
		return "", usageErr("%s: unknown subcommand %q (%s)", cmd, args[0], list)
	}
	return args[0], nil
}

// groupPage is the page of a command with subcommands: usage, the connection flags, and where each subcommand's
// own flags are listed.
func groupPage(cmd, usage string) string {
	var b strings.Builder
	b.WriteString(usage)
	printFlags(&b, func() *flag.FlagSet {
		fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
		addConnFlags(fs)
		return fs
	}())
	fmt.Fprintf(&b, "\nEvery subcommand takes these; 'dedupeworker %s SUBCOMMAND -h' lists its own flags too.\n", cmd)
	return b.String()
}

// packagePrefix is a Go package's name leading an error or one of its causes ("kvwindow: ", "natsconn: "): what
// a person reads names the command or the setting instead.
var packagePrefix = regexp.MustCompile(`(^|: |\n)(?:(?:natsconn|kvwindow|hashing|keys|pipeline|receiver|config|embedded|natsreq|jsapi|dedupeworker): )+`)

// commandError is an error as a command prints it: the command first ("window get: "), no Go package names.
type commandError struct {
	msg string
	err error
}

func (e *commandError) Error() string { return e.msg }
func (e *commandError) Unwrap() error { return e.err }

// commandErr words err as cmd prints it: package prefixes removed, the command first (once). Help is kept as it
// is; the exit status err carries is kept (errors.As sees through).
func commandErr(cmd string, err error) error {
	var h *helpRequest
	if err == nil || errors.As(err, &h) {
		return err
	}
	msg := packagePrefix.ReplaceAllString(err.Error(), "$1")
	base, _, _ := strings.Cut(cmd, " ")
	switch {
	case strings.HasPrefix(msg, cmd+": "), strings.HasPrefix(msg, cmd+" "):
	case base != cmd && strings.HasPrefix(msg, base+": "):
		msg = cmd + ": " + strings.TrimPrefix(msg, base+": ")
	default:
		msg = cmd + ": " + msg
	}
	return &commandError{msg: msg, err: err}
}

// subcommand names a command with subcommands as errors do: "window get", or "window" without one.
func subcommand(cmd string, args []string) string {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return cmd + " " + args[0]
	}
	return cmd
}

func printHelp(w io.Writer) {
	fmt.Fprint(w, `dedupeworker turns a JetStream stream of raw webhook deliveries into a stream of unique events.

Usage:
  dedupeworker [run]                       run the worker (settings from DEDUPE_* variables, below)
  dedupeworker key --dedupe SPEC [flags]   print the event key a delivery would get
  dedupeworker hash [flags] [FILE]         print the canonical payload digest of a JSON document
  dedupeworker window get|forget|ls|status|rebalance [flags]
                                           inspect or remove claims, list the bucket(s), show the window's
                                           placement and health, spread shard leaders evenly over their servers
  dedupeworker dlq ls|show|replay|rm [flags]
                                           list, show, replay and remove dead letters
  dedupeworker config [flags]              print the settings in force and where each came from (no secrets)
  dedupeworker sources check [FILE]        validate a sources file as the worker and ingest read it
  dedupeworker ingest [flags]              receive webhooks over HTTP, verify them, publish them to the input stream
  dedupeworker help [COMMAND [SUBCOMMAND]] describe a command
  dedupeworker version (or -v)             print the version, VCS revision and Go version of the binary

Exit status: 0 success; 1 failure while working (invalid input, NATS unreachable); 2 usage or configuration error.

Settings (environment; the worker reads all but DEDUPE_INGEST_*, which only ingest reads):
`)
	_ = config.Usage(w)
}
