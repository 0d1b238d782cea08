// Command hoplite is Hoplite's one binary: `hoplite demo` runs the embedded
// demo, `hoplite bench` runs benchmarks, `hoplite node` runs one member of a
// multi-process cluster.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"

	"github.com/hoplite-go/hoplite/bench"
	"github.com/hoplite-go/hoplite/internal/timerslack"
)

const usage = `usage: hoplite <command> [flags]

commands:
  demo    run the embedded demo: broadcast, reduce and recovery on 8 nodes
  bench   run a benchmark on an embedded cluster (hoplite bench -h),
          or between two processes (hoplite bench p2p -h)
  node    run one member of a multi-process cluster (hoplite node -h)
  certs   make a CA and member certificates for mutual TLS (hoplite certs -h)
  sim     simulate N hosts (to 1,024 and beyond) with the real cores (hoplite sim -h)

operator commands, on a running cluster (--addr: any member's address,
or several, comma-separated):
  put     store a file or standard input as an object
  get     write an object to a file or standard output
  reduce  reduce objects element-wise into a new one
  allreduce  reduce, then broadcast the result to the sources' members
  rm      delete objects
  stat    where an object's copies are
  ls      list the objects
  members list the live members
  status  members, shards, store use, measured latency and bandwidth
  events  print the members' recovery and collective events live
  version print the version (also: hoplite --version)
  completion  print a bash or zsh completion script (hoplite completion -h)

Run "hoplite <command> -h" for the flags of a command.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ensureTimerSlack = timerslack.Ensure
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "demo":
		err = demoCommand(ctx, args[1:], stdout, stderr)
	case "bench":
		switch {
		case len(args) > 1 && args[1] == "p2p":
			err = p2pCommand(ctx, args[2:], stdout, stderr)
		case len(args) > 1 && args[1] == "report":
			err = reportCommand(args[2:], stdout, stderr)
		case len(args) > 1 && args[1] == p2pPeerCommand:
			err = p2pPeer(ctx, args[2:], stdout, stderr)
		default:
			err = benchCommand(ctx, args[1:], stdout, stderr)
		}
	case "node":
		err = nodeCommand(ctx, args[1:], stdout, stderr)
	case "certs":
		err = certsCommand(args[1:], stdout, stderr)
	case "sim":
		err = simCommand(ctx, args[1:], stdout, stderr)
	case "put", "get", "rm", "stat", "ls", "members", "status", "reduce", "allreduce", "events":
		err = opsMain(ctx, args[0], args[1:], os.Stdin, stdout, stderr)
	case "version", "--version", "-version":
		switch {
		case len(args) > 1 && isHelp(args[1]):
			fmt.Fprint(stdout, versionUsage)
			return 0
		case len(args) > 1:
			fmt.Fprintf(stderr, "hoplite version: unexpected arguments %q (hoplite version -h for help)\n", args[1:])
			return 2
		}
		fmt.Fprintln(stdout, "hoplite", version())
		return 0
	case "completion":
		err = completionCommand(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "hoplite: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if err == flag.ErrHelp {
		return 0
	}
	name := commandName(args)
	var ue usageError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "hoplite %s: %s (hoplite %s -h for help)\n", name, strings.TrimPrefix(err.Error(), "hoplite: "), name)
		return 2
	case err != nil && isFlagError(err):
		return 2 // the flag package said what and printed the usage
	case err != nil:
		// One prefix: the command's (typed errors start with "hoplite: ").
		fmt.Fprintf(stderr, "hoplite %s: %s\n", name, strings.TrimPrefix(err.Error(), "hoplite: "))
		return 1
	}
	return 0
}

// benchSubcommands are the words after "hoplite bench" that name a
// command of their own, each with its own -h (the scenarios too).
var benchSubcommands = append([]string{"p2p", "p2p-tcp", p2pPeerCommand, "report", "scale-plot", "routes", bench.LoadSpinCommand}, bench.Scenarios...)

// commandName is the command as the user typed it, without "hoplite":
// "bench report" for hoplite bench report ..., as its errors are prefixed
// and its help is asked for.
func commandName(args []string) string {
	if args[0] == "bench" && len(args) > 1 && slices.Contains(benchSubcommands, args[1]) {
		return "bench " + args[1]
	}
	return args[0]
}

const versionUsage = `usage: hoplite version   (also: hoplite --version)

Prints the module version, VCS revision and Go version of this binary.
`

// isHelp: an argument that asks for help.
func isHelp(a string) bool { return a == "-h" || a == "-help" || a == "--help" }

// asUsage makes err, a check of a flag's value, a usage error (exit
// status 2), unless it is one of the flag package's.
func asUsage(err error) error {
	var ue usageError
	if err == nil || errors.As(err, &ue) || err == flag.ErrHelp || isFlagError(err) {
		return err
	}
	return usageError{strings.TrimPrefix(err.Error(), "hoplite: ")}
}

// version is what `hoplite version` prints after "hoplite ": the build
// information of this binary (versionOf).
func version() string {
	bi, ok := debug.ReadBuildInfo()
	return versionOf(bi, ok)
}

// versionOf says which code a binary was built from: its module version
// (a release such as v1.2.0, or a pseudo-version: of the dependency, or
// stamped from the clone it was built in; "(devel)" when the go command
// stamped nothing), the VCS revision and whether the tree had
// uncommitted changes (in a clone, unless -buildvcs=false), and the Go
// version. A devel build without a revision says so: such a binary
// cannot be traced to a commit.
func versionOf(bi *debug.BuildInfo, ok bool) string {
	if !ok || bi == nil {
		return "unknown (the binary carries no build information)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	if r := bi.Main.Replace; r != nil {
		// A dependent module built it with a replace of Hoplite (a
		// checkout): the required version says little without where the
		// code came from. The VCS settings are not stamped for it.
		v += " => " + r.Path
		if r.Version != "" && r.Version != "(devel)" {
			v += " " + r.Version
		}
	}
	var revision, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	switch {
	case revision != "":
		v += " " + revision
		if modified == "true" {
			v += " (modified)"
		}
	case v == "(devel)":
		v += " (no VCS revision: built outside a clone or with -buildvcs=false)"
	}
	if bi.GoVersion != "" {
		v += " " + bi.GoVersion
	}
	return v
}

// isFlagError: the flag package's parse errors (it has printed them with
// the usage already).
func isFlagError(err error) bool { return isFlagMessage(err.Error()) }

// isFlagMessage: a message of the flag package's parse errors.
func isFlagMessage(s string) bool {
	for _, p := range []string{"flag provided but not defined", "invalid value ", "invalid boolean ", "bad flag syntax", "flag needs an argument"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// flagOutput is where the FlagSet of the command name (as typed, without
// "hoplite") writes: its usage as it is, and the flag package's error
// line with the command's prefix, as run prefixes every other error.
func flagOutput(stderr io.Writer, name string) io.Writer {
	return prefixFlagErrors{w: stderr, prefix: "hoplite " + name + ": "}
}

type prefixFlagErrors struct {
	w      io.Writer
	prefix string
}

func (p prefixFlagErrors) Write(b []byte) (int, error) {
	if !isFlagMessage(string(b)) {
		return p.w.Write(b)
	}
	// The flag package writes its error line in one Write.
	if _, err := io.WriteString(p.w, p.prefix+string(b)); err != nil {
		return 0, err
	}
	return len(b), nil
}

// printFlags prints fs's flags as PrintDefaults does, leaving out the
// hidden ones (testing and legacy flags: accepted, not advertised).
func printFlags(fs *flag.FlagSet, hidden ...string) {
	shown := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	shown.SetOutput(fs.Output())
	fs.VisitAll(func(f *flag.Flag) {
		if !slices.Contains(hidden, f.Name) {
			shown.Var(f.Value, f.Name, f.Usage)
		}
	})
	shown.PrintDefaults()
}
