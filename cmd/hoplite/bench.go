package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/cluster"
)

func benchCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "broadcast" {
		fmt.Fprintln(stderr, "usage: hoplite bench broadcast [flags]   (more scenarios come with later issues)")
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return flag.ErrHelp
		}
		return fmt.Errorf("unknown or missing scenario")
	}
	fs := flag.NewFlagSet("bench broadcast", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nodes := fs.Int("nodes", 8, "nodes (1 sender, the rest receive)")
	sizeMiB := fs.Int("size-mib", 64, "object size in MiB")
	linkMbps := fs.Float64("link-mbps", 0, "emulated per-node link in Mbit/s (0: memory speed)")
	reps := fs.Int("reps", 5, "repetitions of each variant")
	chunkKiB := fs.Int("chunk-kib", 1024, "chunk size in KiB")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *nodes < 2 || *sizeMiB < 1 || *reps < 1 || *chunkKiB < 1 {
		return fmt.Errorf("need -nodes >= 2, -size-mib >= 1, -reps >= 1 and -chunk-kib >= 1")
	}
	log := logrus.New()
	log.SetOutput(stderr)
	log.SetLevel(logrus.WarnLevel)
	size := *sizeMiB << 20
	data := randomData(size)
	fmt.Fprintf(stdout, "broadcast %d MiB to %d receivers, link %s, %d reps, variants interleaved\n",
		*sizeMiB, *nodes-1, linkName(*linkMbps), *reps)
	times := map[bool][]time.Duration{}
	for rep := 0; rep < *reps; rep++ {
		for _, naive := range []bool{false, true} {
			l, err := cluster.StartLocal(cluster.Config{Nodes: *nodes, LinkBandwidth: *linkMbps * 1e6 / 8,
				Naive: naive, ChunkSize: *chunkKiB << 10, Capacity: int64(size) * 2, Log: log})
			if err != nil {
				return err
			}
			r, err := runBroadcast(ctx, l, fmt.Sprintf("bench-%d", rep), data, nil)
			l.Stop()
			if err != nil {
				return err
			}
			times[naive] = append(times[naive], r.Elapsed)
		}
	}
	for _, naive := range []bool{false, true} {
		name := "tree "
		if naive {
			name = "naive"
		}
		ts := times[naive]
		sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
		fmt.Fprintf(stdout, "%s  median %-10v min %-10v max %-10v  (%.0f MB/s delivered per receiver)\n",
			name, ts[len(ts)/2].Round(time.Microsecond), ts[0].Round(time.Microsecond), ts[len(ts)-1].Round(time.Microsecond),
			mbps(size, ts[len(ts)/2]))
	}
	fmt.Fprintf(stdout, "naive/tree median ratio: %.2fx\n", times[true][len(times[true])/2].Seconds()/times[false][len(times[false])/2].Seconds())
	return nil
}
