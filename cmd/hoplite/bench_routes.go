package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/bench"
)

const benchRoutesUsage = `usage: hoplite bench routes [flags]

One object's Put and Get through every route an application has to a
cluster, side by side in one run against the member-to-member transfer
of the same object: this process's member (embedded) and two "hoplite
node" processes on 127.0.0.1. The baseline is the second node's
prefetching Get of an object created on the first (its data plane, no
bytes in the answer). The routes: the embedded member's storenode.Client
(Put, Get, GetInto); an application actor in that member's own actor
system (Member.Spawn: messages.Put, messages.Get read-only); an actor in
an actor system of no member's, in this process, whose messages reach
the first node's store node over Proto.Actor remote (the bytes inside
one message each way, at most 256 MiB: refused above); an actor in that
system using a cluster.Dial client made from it (WithActorSystem: the
bytes on the data plane); a cluster.Dial client (Put, Get, GetInto);
and the CLI ("hoplite put --addr" of a file,
"hoplite get --addr" to a pipe, each a process, its start included),
beside "hoplite version" and "hoplite members --addr", what a CLI call
pays before its first byte. Every Get moves the bytes once. Each route
runs --reps times, all counted (no warm-up), the routes taking turns;
each Get's bytes and each Put's (read back through the other node) are
compared by fingerprint outside the timed section. stdout gets the
table: median, min–max and the ratio to the transfer, per route.

flags:
`

// benchRoutesCommand is `hoplite bench routes`.
func benchRoutesCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench routes", flag.ContinueOnError)
	fs.SetOutput(flagOutput(stderr, "bench routes"))
	fs.Usage = func() {
		fmt.Fprint(stderr, benchRoutesUsage)
		fs.PrintDefaults()
	}
	sizeText := fs.String("size", "64MiB", "the object size (up to 4GiB: the run holds it about seven times over)")
	reps := fs.Int("reps", 5, "how many times each route runs, every one counted")
	timeout := fs.Duration("timeout", 5*time.Minute, "bounds each operation")
	binary := fs.String("hoplite", "", "the hoplite binary whose node, put and get the run starts (default: this one)")
	jsonPath := fs.String("json", "", "also write the report to this JSON file")
	logLevel := fs.String("log-level", "error", "the embedded member's log level (to stderr)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected arguments %q", fs.Args())}
	}
	size, err := bench.ParseSize(*sizeText)
	if err != nil {
		return usageError{fmt.Sprintf("-size: %v", err)}
	}
	if size < 1 || size > 4<<30 {
		return usageError{fmt.Sprintf("-size %s: want 1 byte .. 4GiB", *sizeText)}
	}
	if *reps < 1 || *timeout <= 0 {
		return usageError{"need --reps >= 1 and --timeout > 0"}
	}
	lvl, err := parseLogLevel(*logLevel)
	if err != nil {
		return err
	}
	o := bench.RoutesOptions{Size: size, Reps: *reps, OpTimeout: *timeout, Binary: *binary, Progress: stderr,
		Command: append([]string{"hoplite", "bench", "routes"}, args...)}
	o.Log = logrus.New()
	o.Log.SetOutput(stderr)
	o.Log.SetLevel(lvl)
	if o.Binary == "" {
		if o.Binary, err = os.Executable(); err != nil {
			return err
		}
	}
	report, err := bench.RunRoutes(ctx, o)
	if err != nil {
		return err
	}
	bench.WriteRoutesTable(stdout, report)
	if *jsonPath != "" {
		if err := report.WriteJSON(*jsonPath); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote %s\n", *jsonPath)
	}
	return nil
}
