package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/hoplite-go/hoplite/cluster"
)

// The operator commands use a running cluster from a shell through
// cluster.Dial: a client that is not a member.

const opsUsage = `usage: hoplite %s --addr HOST:PORT %s

%s

flags:
`

// opsCommand is one operator command: its arguments and what it does
// with a dialed client.
type opsCommand struct {
	name, args, doc string
	nargs           [2]int // min, max positional arguments
	run             func(ctx context.Context, c *cluster.Client, args []string, io opsIO) error
}

// opsIO is where an operator command reads and writes; progress is drawn
// on stderr when it is a terminal.
type opsIO struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	tty            bool
}

var opsCommands = map[string]opsCommand{
	"put": {name: "put", args: "ID [FILE]", nargs: [2]int{1, 2},
		doc: "Stores FILE (or standard input, or FILE -) as object ID, created on the member at --addr.",
		run: opPut},
	"get": {name: "get", args: "ID [FILE]", nargs: [2]int{1, 2},
		doc: "Writes object ID to FILE (or standard output). A Get waits for an object that does not exist yet, until --timeout.",
		run: opGet},
	"rm": {name: "rm", args: "ID...", nargs: [2]int{1, 1 << 20},
		doc: "Deletes objects (every copy; an id is never reused).", run: opRm},
	"stat": {name: "stat", args: "ID", nargs: [2]int{1, 1},
		doc: "Shows where an object's copies are and its transfers.", run: opStat},
	"ls": {name: "ls", args: "", nargs: [2]int{0, 0},
		doc: "Lists the objects, directory shard by shard (--limit per page; --all for every page).", run: nil},
	"members": {name: "members", args: "", nargs: [2]int{0, 0},
		doc: "Lists the live members as the member at --addr sees them.", run: opMembers},
	"status": {name: "status", args: "", nargs: [2]int{0, 0},
		doc: "Shows each member: directory shards, store use, and the latency and bandwidth it measured.", run: opStatus},
}

func opsMain(ctx context.Context, name string, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	oc := opsCommands[name]
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), opsUsage, oc.name, oc.args, oc.doc)
		fs.PrintDefaults()
	}
	addr := fs.String("addr", "", "a member's actor system address HOST:PORT (as hoplite node prints it)")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	tlsCert := fs.String("tls-cert", "", "mutual TLS: a certificate the cluster's CA signed (with -tls-key and -tls-ca)")
	tlsKey := fs.String("tls-key", "", "mutual TLS: the key of -tls-cert")
	tlsCA := fs.String("tls-ca", "", "mutual TLS: the cluster's CA certificate")
	var limit int
	var all bool
	var cursor string
	if name == "ls" {
		fs.IntVar(&limit, "limit", 100, "objects per page (1..1000)")
		fs.BoolVar(&all, "all", false, "list every page")
		fs.StringVar(&cursor, "after", "", "continue from the cursor a previous page printed")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if n := fs.NArg(); n < oc.nargs[0] || n > oc.nargs[1] {
		return usageError{fmt.Sprintf("want %s, got %d arguments", cmp(oc.args, "no arguments"), n)}
	}
	if *addr == "" {
		return usageError{"--addr is required"}
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	opts := []cluster.DialOption{cluster.WithTimeout(*timeout)}
	if *tlsCert != "" || *tlsKey != "" || *tlsCA != "" {
		cfg, err := cluster.TLSConfig(*tlsCert, *tlsKey, *tlsCA)
		if err != nil {
			return err
		}
		opts = append(opts, cluster.WithTLS(cfg))
	}
	c, err := cluster.Dial(ctx, *addr, opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	if name == "ls" {
		return opLs(ctx, c, cursor, limit, all, stdout)
	}
	return oc.run(ctx, c, fs.Args(), opsIO{stdin: stdin, stdout: stdout, stderr: stderr, tty: isTerminal(stderr)})
}

// usageError is a bad command line (exit status 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func cmp(s, empty string) string {
	if s == "" {
		return empty
	}
	return s
}

func opPut(ctx context.Context, c *cluster.Client, args []string, o opsIO) error {
	in := o.stdin
	var size int64 // 0: unknown (standard input)
	if len(args) == 2 && args[1] != "-" {
		f, err := os.Open(args[1])
		if err != nil {
			return err
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			size = st.Size()
		}
		in = f
	}
	prog := newTransferProgress(o.stderr, o.tty, "put "+args[0], size)
	defer prog.end()
	// Objects are immutable and stored whole: read it all first, so that
	// a read error stores nothing.
	prog.counting("reading", size)
	data, err := io.ReadAll(progressReader{r: in, p: prog})
	if err != nil {
		return fmt.Errorf("read the object: %w", err)
	}
	prog.waiting(fmt.Sprintf("storing %s", bytesString(int64(len(data)))))
	if err := c.Put(ctx, args[0], data); err != nil {
		return err
	}
	prog.end()
	fmt.Fprintf(o.stdout, "put %s (%d bytes)\n", args[0], len(data))
	return nil
}

func opGet(ctx context.Context, c *cluster.Client, args []string, o opsIO) error {
	toFile := len(args) == 2 && args[1] != "-"
	// The size is unknown until the object arrives: draw while it is
	// fetched, then while a large one is written.
	prog := newTransferProgress(o.stderr, o.tty && (toFile || !isTerminal(o.stdout)), "get "+args[0], 0)
	defer prog.end()
	prog.waiting("fetching")
	data, err := c.Get(ctx, args[0])
	if err != nil {
		return err
	}
	if !toFile {
		prog.end()
		_, err = o.stdout.Write(data)
		return err
	}
	f, err := os.Create(args[1])
	if err != nil {
		return err
	}
	prog.counting("writing", int64(len(data)))
	if err := writeCounted(f, data, prog); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func opRm(ctx context.Context, c *cluster.Client, args []string, o opsIO) error {
	stdout := o.stdout
	for _, id := range args {
		if err := c.Delete(ctx, id); err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		fmt.Fprintf(stdout, "deleted %s\n", id)
	}
	return nil
}

func opStat(ctx context.Context, c *cluster.Client, args []string, o opsIO) error {
	stdout := o.stdout
	info, err := c.Info(ctx, args[0], false)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "object %s\nsize %d\ninline %v\n", info.GetObjectId(), info.GetSize(), info.GetHasInline())
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "COPY ON\tSTATE\tCREATOR\tSERVING")
	for _, l := range info.GetLocations() {
		fmt.Fprintf(w, "%s\t%s\t%v\t%v\n", l.GetNode().GetNodeId(), l.GetState(), l.GetCreator(), l.GetServing())
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, tr := range info.GetTransfers() {
		state := "in progress"
		switch {
		case tr.GetAborted():
			state = "aborted"
		case tr.GetEndSeq() != 0:
			state = "done"
		}
		fmt.Fprintf(stdout, "transfer %s -> %s: %s\n", tr.GetSender(), tr.GetReceiver(), state)
	}
	return nil
}

func opLs(ctx context.Context, c *cluster.Client, cursor string, limit int, all bool, stdout io.Writer) error {
	if limit < 1 || limit > 1000 {
		return usageError{fmt.Sprintf("--limit %d: want 1..1000", limit)}
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tSIZE\tCOMPLETE\tPARTIAL\tINLINE")
	for {
		page, err := c.List(ctx, cursor, limit)
		if err != nil {
			return err
		}
		for _, o := range page.Objects {
			fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%v\n", o.GetObjectId(), o.GetSize(), o.GetCompleteCopies(), o.GetPartialCopies(), o.GetInline())
		}
		if err := w.Flush(); err != nil {
			return err
		}
		if page.Next == "" {
			return nil
		}
		if !all {
			fmt.Fprintf(stdout, "more: hoplite ls --after %q\n", page.Next)
			return nil
		}
		cursor = page.Next
	}
}

func opMembers(ctx context.Context, c *cluster.Client, _ []string, o opsIO) error {
	stdout := o.stdout
	ms, err := c.Members(ctx)
	if err != nil {
		return err
	}
	for _, m := range ms {
		fmt.Fprintf(stdout, "%s\t%s\n", m.ID, m.Address)
	}
	return nil
}

func opStatus(ctx context.Context, c *cluster.Client, _ []string, o opsIO) error {
	stdout := o.stdout
	st, err := c.Status(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d members, %d directory shards\n", len(st.Members), st.Shards)
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "MEMBER\tSHARDS\tOBJECTS\tUSED\tPINNED\tCAPACITY\tLATENCY\tBANDWIDTH")
	for _, m := range st.Members {
		if m.Err != nil {
			fmt.Fprintf(w, "%s\t%d\t(no answer: %v)\n", m.ID, m.Shards, m.Err)
			continue
		}
		n := m.Node
		bw := bytesString(int64(n.GetBandwidthBytesPerSecond())) + "/s"
		if n.GetBandwidthSamples() == 0 {
			bw = "unmeasured"
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\t%s\t%v\t%s\n", m.ID, m.Shards, n.GetObjects(), bytesString(n.GetUsed()),
			bytesString(n.GetPinned()), bytesString(n.GetCapacity()), time.Duration(n.GetLatencyUs())*time.Microsecond, bw)
	}
	return w.Flush()
}

// bytesString is n in binary units.
func bytesString(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n), 0
	for f >= unit && i < 4 {
		f /= unit
		i++
	}
	return fmt.Sprintf("%.1f %s", f, [...]string{"B", "KiB", "MiB", "GiB", "TiB"}[i])
}
