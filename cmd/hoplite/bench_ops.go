package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/bench"
)

const benchOpsUsage = `usage: hoplite bench ops [flags]

Small-object throughput and latency: Puts, Gets, Gets right after a Put
on the other member (sent to its store node from this process, untimed:
the Get alone is timed, the pair counted in ops/s and CPU), and Deletes,
from 1, 8 and 64 concurrent callers,
each timed for --phase, with p50/p99 latency and CPU per operation,
beside the data plane's bare round trip between the same two members
measured in the same run. Two modes: in-process (two members of an
embedded cluster, in-memory data plane) and processes (this process's
member and a "hoplite node" process on loopback, TCP data plane). Ray's
published "ray microbenchmark" figures follow the table, as published
(another machine). stdout gets the table, then one RESULT line per row.

flags:
`

// benchOpsCommand is `hoplite bench ops`.
func benchOpsCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench ops", flag.ContinueOnError)
	fs.SetOutput(flagOutput(stderr, "bench ops"))
	fs.Usage = func() {
		fmt.Fprint(stderr, benchOpsUsage)
		fs.PrintDefaults()
	}
	modes := fs.String("modes", bench.OpsInProcess+","+bench.OpsProcesses, "where the members run: "+bench.OpsInProcess+" and/or "+bench.OpsProcesses)
	sizes := fs.String("size", "1KiB,64KiB", "object sizes")
	callers := fs.String("callers", "1,8,64", "numbers of concurrent callers")
	phase := fs.Duration("phase", 200*time.Millisecond, "how long each operation is timed (each of ping, put, get-after-put, get, delete, per mode, size and callers)")
	maxOps := fs.Int("max-ops", 20000, "the most operations of one phase (and at most 128 MiB of objects)")
	binary := fs.String("hoplite", "", "the hoplite binary whose node the processes mode starts (default: this one)")
	jsonPath := fs.String("json", "", "also write the report to this JSON file")
	logLevel := fs.String("log-level", "error", "the members' log level (to stderr)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected arguments %q", fs.Args())}
	}
	o := bench.OpsOptions{Phase: *phase, MaxOps: *maxOps, Binary: *binary, Progress: stderr}
	if *phase <= 0 || *maxOps < 1 {
		return usageError{"need --phase > 0 and --max-ops >= 1"}
	}
	for _, m := range strings.Split(*modes, ",") {
		if m = strings.TrimSpace(m); m != "" {
			o.Modes = append(o.Modes, m)
		}
	}
	var err error
	if o.Sizes, err = bench.ParseSizes(*sizes); err != nil {
		return usageError{fmt.Sprintf("-size: %v", err)}
	}
	for _, c := range strings.Split(*callers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil {
			return usageError{fmt.Sprintf("-callers %q: want numbers, e.g. 1,8,64", *callers)}
		}
		o.Callers = append(o.Callers, n)
	}
	lvl, err := parseLogLevel(*logLevel)
	if err != nil {
		return err
	}
	o.Log = logrus.New()
	o.Log.SetOutput(stderr)
	o.Log.SetLevel(lvl)
	if o.Binary == "" {
		if o.Binary, err = os.Executable(); err != nil {
			return err
		}
	}
	report, err := bench.RunOps(ctx, o)
	if report != nil {
		report.Command = append([]string{"hoplite", "bench", "ops"}, args...)
		report.WriteTable(stdout)
		for _, line := range report.ResultLines() {
			fmt.Fprintln(stdout, line)
		}
		if *jsonPath != "" && err == nil {
			if err := report.WriteJSON(*jsonPath); err != nil {
				return err
			}
			fmt.Fprintf(stderr, "wrote %s\n", *jsonPath)
		}
	}
	return err
}
