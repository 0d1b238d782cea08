// Command hoplite is Hoplite's one binary: `hoplite demo` runs the embedded
// demo, `hoplite bench` runs benchmarks, `hoplite node` runs one member of a
// multi-process cluster.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `usage: hoplite <command> [flags]

commands:
  demo    run the embedded demo: broadcast, reduce and recovery on 8 nodes
  bench   run a benchmark on an embedded cluster (hoplite bench -h),
          or between two processes (hoplite bench p2p -h)
  node    run one member of a multi-process cluster (hoplite node -h)

Run "hoplite <command> -h" for the flags of a command.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
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
		case len(args) > 1 && args[1] == p2pPeerCommand:
			err = p2pPeer(ctx, args[2:], stdout, stderr)
		default:
			err = benchCommand(ctx, args[1:], stdout, stderr)
		}
	case "node":
		err = nodeCommand(ctx, args[1:], stdout, stderr)
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
	if err != nil {
		fmt.Fprintf(stderr, "hoplite %s: %v\n", args[0], err)
		return 1
	}
	return 0
}
