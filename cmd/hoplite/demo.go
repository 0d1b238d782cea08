package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/bench"
	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/internal/experiments"
)

func demoCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(flagOutput(stderr, "demo"))
	nodes := fs.Int("nodes", 8, "number of nodes in the embedded cluster")
	sizeFlag := fs.String("size", "64MiB", "object size (KiB/MiB/GiB binary, KB/MB/GB decimal)")
	linkMbps := fs.Float64("link-mbps", 1000, "emulated per-node link bandwidth in Mbit/s (0: memory speed)")
	chunkFlag := fs.String("chunk-size", "1MiB", "transfer chunk size")
	reduceFlag := fs.String("reduce-size", "16MiB", "size of each reduce source (0 skips the reduce part)")
	reduceNum := fs.Int("reduce-num", 0, "how many of the nodes' sources to reduce (0: all but two)")
	interval := fs.Duration("arrival-interval", 20*time.Millisecond, "time between the sources' Puts")
	recovery := fs.Bool("recovery", true, "end with a node killed mid-broadcast and mid-reduce, and the recovery events")
	recoveryFlag := fs.String("recovery-size", "16MiB", "object size of the recovery part")
	// The earlier flags, in MiB and KiB: accepted, not shown.
	sizeMiB := fs.Int("size-mib", 0, "legacy: object size in MiB")
	chunkKiB := fs.Int("chunk-kib", 0, "legacy: chunk size in KiB")
	reduceMiB := fs.Int("reduce-mib", -1, "legacy: reduce source size in MiB")
	recoveryMiB := fs.Int("recovery-mib", 0, "legacy: recovery object size in MiB")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: hoplite demo [flags]\n\nThe embedded demo: a broadcast (tree vs naive), a reduce, and recovery from a killed node.\n\nflags:")
		printFlags(fs, "size-mib", "chunk-kib", "reduce-mib", "recovery-mib")
	}
	verbose := fs.Bool("v", false, "log at debug level")
	fs.StringVar(&demoUI, "ui", "", "serve the live view of each embedded cluster at http://HOST:PORT/live/ while it runs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected arguments %q", fs.Args())}
	}
	size, chunk, reduceSize, recoverySize, err := demoSizes(*sizeFlag, *chunkFlag, *reduceFlag, *recoveryFlag)
	if err != nil {
		return usageError{err.Error()}
	}
	// The legacy flags win when given.
	if *sizeMiB > 0 {
		size = *sizeMiB << 20
	}
	if *chunkKiB > 0 {
		chunk = *chunkKiB << 10
	}
	if *reduceMiB >= 0 {
		reduceSize = *reduceMiB << 20
	}
	if *recoveryMiB > 0 {
		recoverySize = *recoveryMiB << 20
	}
	if *nodes < 2 || size < 1<<20 {
		return usageError{"need at least 2 nodes and a 1 MiB object"}
	}
	if *reduceNum < 0 || *reduceNum > *nodes {
		return usageError{fmt.Sprintf("-reduce-num %d: want 1..%d (0: all but two)", *reduceNum, *nodes)}
	}
	log := logrus.New()
	log.SetOutput(stderr)
	log.SetLevel(logrus.WarnLevel)
	if *verbose {
		log.SetLevel(logrus.DebugLevel)
	}
	data := randomData(size)
	link := *linkMbps * 1e6 / 8
	fmt.Fprintf(stdout, "Hoplite demo: %d nodes, %s object, link %s per node, chunks of %s\n\n",
		*nodes, bench.SizeName(int64(size)), linkName(*linkMbps), bench.SizeName(int64(chunk)))
	if demoUI != "" {
		fmt.Fprintf(stdout, "live view: http://%s/live/ (each part's cluster in turn)\n\n", demoUI)
	}

	var results [2]broadcastRun
	for k, naive := range []bool{false, true} {
		name := "receiver-driven tree"
		if naive {
			name = "naive (every receiver from the creator)"
		}
		fmt.Fprintf(stdout, "== Broadcast, %s ==\n", name)
		cfg := cluster.Config{Nodes: *nodes, LinkBandwidth: link, ChunkSize: chunk, Capacity: int64(size) * 2, Log: log, UI: demoUI}
		experiments.In(&cfg).Naive = naive
		l, err := cluster.StartLocal(cfg)
		if err != nil {
			return err
		}
		r, err := runBroadcast(ctx, l, "demo-object", data, func(f []float64) {
			fmt.Fprintf(stdout, "  %s\n", progressLine(f))
		})
		stopQuietly(l, log)
		if err != nil {
			return err
		}
		results[k] = r
		fmt.Fprintf(stdout, "  all %d receivers have the same %d bytes (verified) in %v\n", *nodes-1, size, r.Elapsed.Round(1e6))
		fmt.Fprintln(stdout, "  who fetched from whom:")
		printTree(stdout, r.Info, "node-0")
		fmt.Fprintln(stdout)
	}
	tree, naive := results[0].Elapsed, results[1].Elapsed
	fmt.Fprintf(stdout, "tree %v vs naive %v: the tree is %.2fx the speed of the naive pattern\n",
		tree.Round(1e6), naive.Round(1e6), naive.Seconds()/tree.Seconds())
	recoveryPart := func() error {
		if !*recovery {
			return nil
		}
		fmt.Fprintf(stdout, "\n== Recovery: a node killed mid-broadcast and mid-reduce (8 nodes, link %s) ==\n", linkName(*linkMbps))
		return runRecovery(ctx, stdout, recoverySize, link, chunk, log)
	}
	if reduceSize <= 0 {
		return recoveryPart()
	}
	if *reduceNum == 0 {
		*reduceNum = max(1, *nodes-2)
	}
	fmt.Fprintf(stdout, "\n== Reduce: SUM of %d of %d float32 sources of %s, one per node, Put one by one every %v ==\n",
		*reduceNum, *nodes, bench.SizeName(int64(reduceSize)), *interval)
	var reduceTimes [2]time.Duration
	for k, naive := range []bool{false, true} {
		cfg := cluster.Config{Nodes: *nodes, LinkBandwidth: link, ChunkSize: chunk, Capacity: int64(reduceSize) * int64(*nodes+2), Log: log, UI: demoUI}
		experiments.In(&cfg).Naive = naive
		l, err := cluster.StartLocal(cfg)
		if err != nil {
			return err
		}
		r, err := runReduce(ctx, l, "demo-sum", reduceSize, *reduceNum, *interval, 7)
		stopQuietly(l, log)
		if err != nil {
			return err
		}
		reduceTimes[k] = r.Elapsed
		if naive {
			fmt.Fprintf(stdout, "  naive (gather all at the caller, reduce there): %v, result checked element by element\n", r.Elapsed.Round(time.Millisecond))
			continue
		}
		fmt.Fprintf(stdout, "  sources were Put in the order: %s\n", strings.Join(r.Order, ", "))
		printPlan(stdout, r.Reply.GetPlan())
		fmt.Fprintf(stdout, "  reduced %v, left as backups %v\n", r.Reply.GetReducedIds(), r.Reply.GetUnreducedIds())
		fmt.Fprintf(stdout, "  tree reduce: %v from the Reduce call to the complete target; result checked element by element\n", r.Elapsed.Round(time.Millisecond))
	}
	fmt.Fprintf(stdout, "reduce tree %v vs naive gather %v: %.2fx\n", reduceTimes[0].Round(time.Millisecond),
		reduceTimes[1].Round(time.Millisecond), reduceTimes[1].Seconds()/reduceTimes[0].Seconds())
	return recoveryPart()
}

// demoUI is -ui: where every embedded cluster of the demo serves its
// live view (cluster.Config.UI), the recovery part's included.
var demoUI string

func linkName(mbps float64) string {
	if mbps <= 0 {
		return "unlimited (memory speed)"
	}
	return fmt.Sprintf("%.0f Mbit/s", mbps)
}

// stopQuietly stops an embedded cluster with its log at error level:
// members stopping together watch one another go, and their warnings
// about it would read as failures of the demo.
func stopQuietly(l *cluster.Local, log *logrus.Logger) {
	level := log.GetLevel()
	log.SetLevel(min(level, logrus.ErrorLevel))
	l.Stop()
	log.SetLevel(level)
}

// demoSizes parses the demo's sizes ("0" is allowed for the reduce: skip).
func demoSizes(size, chunk, reduce, recovery string) (s, c, r, rec int, err error) {
	parse := func(name, v string, zeroOK bool) int {
		if err != nil {
			return 0
		}
		if zeroOK && strings.TrimSpace(v) == "0" {
			return 0
		}
		n, e := bench.ParseSize(v)
		if e != nil || n > 1<<40 {
			err = fmt.Errorf("--%s: %v", name, e)
		}
		return int(n)
	}
	s, c, r, rec = parse("size", size, false), parse("chunk-size", chunk, false), parse("reduce-size", reduce, true), parse("recovery-size", recovery, false)
	return
}
