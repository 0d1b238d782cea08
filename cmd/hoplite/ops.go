package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/messages"
)

// The operator commands use a running cluster from a shell through
// cluster.Dial: a client that is not a member.

const opsUsage = `usage: hoplite %s --addr HOST:PORT[,HOST:PORT...] %s

%s

flags:
`

// opsCommand is one operator command: its arguments and what it does
// with a dialed client.
type opsCommand struct {
	name, args, doc string
	nargs           [2]int // min, max positional arguments
	run             func(ctx context.Context, c *cluster.Client, args []string, io opsIO) error
	// flags adds the command's own flags; what it returns is checked
	// after parsing and reaches run as opsIO.extra.
	flags func(fs *flag.FlagSet) opsExtra
	// live: --timeout bounds the dial only; run lasts until interrupted.
	live bool
}

// opsExtra is a command's own flags.
type opsExtra interface{ check() error }

// opsOpts are the flags every operator command shares, and those of get
// and ls.
type opsOpts struct {
	addr, tlsCert, tlsKey, tlsCA string
	timeout, wait                time.Duration
	limit                        int
	all                          bool
	cursor                       string
}

// opsIO is where an operator command reads and writes; progress is drawn
// on stderr when it is a terminal.
type opsIO struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	tty            bool
	opts           opsOpts
	extra          opsExtra
}

var opsCommands = map[string]opsCommand{
	"put": {name: "put", args: "ID [FILE]", nargs: [2]int{1, 2},
		doc: "Stores FILE (or standard input, or FILE -) as object ID, created on the member at --addr, which fetches it from this process on its data plane: any size up to the member's capacity. A file is read as the member fetches it; standard input is read to its end first (held in 4 MiB chunks).",
		run: opPut},
	"get": {name: "get", args: "ID [FILE]", nargs: [2]int{1, 2},
		doc: "Writes object ID to FILE (or standard output) as it streams from the member's data plane, chunk by chunk (never whole in memory). An id that does not exist is NOT_FOUND at once; --wait waits that long for its creation.",
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
	fs.SetOutput(flagOutput(stderr, name))
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), opsUsage, oc.name, oc.args, oc.doc)
		fs.PrintDefaults()
	}
	var o opsOpts
	fs.StringVar(&o.addr, "addr", "", "a member's actor system address HOST:PORT (as hoplite node prints it; a name of its host will do), or several, comma-separated: the client moves to another when its member fails")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "give up after this long")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "mutual TLS: a certificate the cluster's CA signed (with -tls-key and -tls-ca)")
	fs.StringVar(&o.tlsKey, "tls-key", "", "mutual TLS: the key of -tls-cert")
	fs.StringVar(&o.tlsCA, "tls-ca", "", "mutual TLS: the cluster's CA certificate")
	switch name {
	case "ls":
		fs.IntVar(&o.limit, "limit", 100, "objects per page (1..1000)")
		fs.BoolVar(&o.all, "all", false, "list every page")
		fs.StringVar(&o.cursor, "after", "", "continue from the cursor a previous page printed")
	case "get":
		fs.DurationVar(&o.wait, "wait", 0, "wait this long for an object that does not exist yet to be created (0: NOT_FOUND at once)")
	}
	var extra opsExtra
	if oc.flags != nil {
		extra = oc.flags(fs)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if extra != nil {
		if err := extra.check(); err != nil {
			return usageError{err.Error()}
		}
	}
	if n := fs.NArg(); n < oc.nargs[0] || n > oc.nargs[1] {
		return usageError{fmt.Sprintf("want %s, got %d arguments", cmp(oc.args, "no arguments"), n)}
	}
	if o.addr == "" {
		return usageError{"--addr is required"}
	}
	if _, err := cluster.SplitEndpoints(o.addr); err != nil {
		return usageError{fmt.Sprintf("--addr %q: want HOST:PORT, a member's address (or several, comma-separated)", o.addr)}
	}
	if name == "ls" && (o.limit < 1 || o.limit > 1000) {
		return usageError{fmt.Sprintf("--limit %d: want 1..1000", o.limit)}
	}
	if o.timeout <= 0 || o.wait < 0 {
		return usageError{"--timeout must be positive and --wait not negative"}
	}
	if tls := []string{o.tlsCert, o.tlsKey, o.tlsCA}; slices.Contains(tls, "") && slices.ContainsFunc(tls, func(f string) bool { return f != "" }) {
		return usageError{"mutual TLS needs --tls-cert, --tls-key and --tls-ca together"}
	}
	runCtx := ctx
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	dopts := []cluster.DialOption{cluster.WithTimeout(o.timeout)}
	if o.tlsCert != "" || o.tlsKey != "" || o.tlsCA != "" {
		cfg, err := cluster.TLSConfig(o.tlsCert, o.tlsKey, o.tlsCA)
		if err != nil {
			return err
		}
		dopts = append(dopts, cluster.WithTLS(cfg))
	}
	c, err := cluster.Dial(ctx, o.addr, dopts...)
	if err != nil {
		return err
	}
	defer c.Close()
	if name == "ls" {
		return opLs(ctx, c, o, stdout)
	}
	if oc.live {
		ctx = runCtx
	}
	return oc.run(ctx, c, fs.Args(), opsIO{stdin: stdin, stdout: stdout, stderr: stderr, tty: isTerminal(stderr), opts: o, extra: extra})
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
	in, size := o.stdin, int64(-1) // unknown: standard input, a pipe
	var file *os.File
	if len(args) == 2 && args[1] != "-" {
		f, err := os.Open(args[1])
		if err != nil {
			return err
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			file, size = f, st.Size()
		}
		in = f
	}
	prog := newTransferProgress(o.stderr, o.tty, "put "+args[0], max(size, 0))
	defer prog.end()
	storing := func(n int64) { prog.waiting(fmt.Sprintf("storing %s", bytesString(n))) }
	if file != nil {
		// The member reads the file as it fetches the object, at the
		// offsets it asks for (again from another member if it fails):
		// it is never whole in this process.
		prog.counting("sending", size)
		r := &countingFile{f: file, size: size, p: prog, atEnd: storing}
		if err := c.PutFrom(ctx, args[0], r, size); err != nil {
			return err
		}
		prog.end()
		fmt.Fprintf(o.stdout, "put %s (%d bytes)\n", args[0], size)
		return nil
	}
	// Of unknown length: the member fetches it from this process in
	// segments as they are read (two at most in memory here), and
	// creates the object at its end; a read error stores nothing.
	prog.counting("sending", 0)
	r := &countingReader{r: progressReader{r: in, p: prog}, atEOF: storing}
	if err := c.PutFrom(ctx, args[0], r, -1); err != nil {
		return err
	}
	prog.end()
	fmt.Fprintf(o.stdout, "put %s (%d bytes)\n", args[0], r.n)
	return nil
}

// countingReader counts what is read through it and calls atEOF once,
// with the count, when the input ends.
type countingReader struct {
	r     io.Reader
	n     int64
	atEOF func(n int64)
}

func (r *countingReader) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	r.n += int64(n)
	if err == io.EOF && r.atEOF != nil {
		r.atEOF(r.n)
		r.atEOF = nil
	}
	return n, err
}

// countingFile is a file of size bytes that PutFrom reads at offsets
// (io.ReaderAt), on the data plane's goroutines: it counts what they
// read and calls atEnd once, when they have read size bytes.
type countingFile struct {
	f     *os.File
	size  int64
	p     *transferProgress
	n     atomic.Int64
	atEnd func(n int64)
	once  sync.Once
}

func (c *countingFile) Read(b []byte) (int, error) {
	n, err := c.f.Read(b)
	c.count(n)
	return n, err
}

func (c *countingFile) ReadAt(b []byte, off int64) (int, error) {
	n, err := c.f.ReadAt(b, off)
	c.count(n)
	return n, err
}

func (c *countingFile) count(n int) {
	c.p.add(n)
	if c.n.Add(int64(n)) >= c.size {
		c.once.Do(func() { c.atEnd(c.size) })
	}
}

func opGet(ctx context.Context, c *cluster.Client, args []string, o opsIO) error {
	toFile := len(args) == 2 && args[1] != "-"
	// The size is unknown until the object arrives: count what is
	// written as it streams.
	prog := newTransferProgress(o.stderr, o.tty && (toFile || !isTerminal(o.stdout)), "get "+args[0], 0)
	defer prog.end()
	// The API's Get waits for an object to be created; from a shell, an
	// id that does not exist is more often a typo. Ask the directory
	// without waiting (or waiting --wait) first.
	prog.waiting("locating")
	if err := objectExists(ctx, c, args[0], o.opts.wait); err != nil {
		return err
	}
	out := o.stdout
	if f, ok := out.(*os.File); ok {
		growPipe(f)
	}
	var f *os.File
	if toFile {
		var err error
		if f, err = os.Create(args[1]); err != nil {
			return err
		}
		out = f
	}
	// GetTo writes each chunk as it arrives from the member's data
	// plane: the object is never whole in this process.
	prog.counting("fetching", 0)
	_, err := c.GetTo(ctx, args[0], progressWriter{w: out, p: prog})
	if f != nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			// A part of an object is not the object.
			_ = os.Remove(args[1])
		}
	}
	prog.end()
	return err
}

// objectExists asks the directory for id: NOT_FOUND at once when it
// does not exist, unless wait > 0 asks to wait that long for its
// creation.
func objectExists(ctx context.Context, c *cluster.Client, id string, wait time.Duration) error {
	if wait <= 0 {
		_, err := c.Info(ctx, id, false)
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	_, err := c.Info(wctx, id, true)
	if err != nil && (errors.Is(err, messages.ErrTimeout) || wctx.Err() != nil) && ctx.Err() == nil {
		return messages.Errorf(messages.ErrorCode_NOT_FOUND, "object %q was not created within --wait %v", id, wait)
	}
	return err
}

func opRm(ctx context.Context, c *cluster.Client, args []string, o opsIO) error {
	stdout := o.stdout
	for _, id := range args {
		if err := c.Delete(ctx, id); err != nil {
			return idError{id, err}
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

func opLs(ctx context.Context, c *cluster.Client, o opsOpts, stdout io.Writer) error {
	cursor := o.cursor
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tSIZE\tCOMPLETE\tPARTIAL\tINLINE")
	for {
		page, err := c.List(ctx, cursor, o.limit)
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
		if !o.all {
			fmt.Fprintf(stdout, "more: %s\n", lsHint(o, page.Next))
			return nil
		}
		cursor = page.Next
	}
}

// lsHint is the command that lists the next page: this one's flags, with
// --after the cursor, quoted for a POSIX shell.
func lsHint(o opsOpts, next string) string {
	args := []string{"hoplite", "ls", "--addr", o.addr}
	if o.limit != 100 {
		args = append(args, "--limit", fmt.Sprint(o.limit))
	}
	if o.timeout != 30*time.Second {
		args = append(args, "--timeout", o.timeout.String())
	}
	for _, f := range [][2]string{{"--tls-cert", o.tlsCert}, {"--tls-key", o.tlsKey}, {"--tls-ca", o.tlsCA}} {
		if f[1] != "" {
			args = append(args, f[0], f[1])
		}
	}
	args = append(args, "--after", next)
	for i, a := range args {
		args[i] = shellQuote(a)
	}
	return strings.Join(args, " ")
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,@%+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// idError is an error about one of several ids, said once ("ID: CODE:
// ..."): the command's prefix comes before it.
type idError struct {
	id  string
	err error
}

func (e idError) Error() string { return e.id + ": " + strings.TrimPrefix(e.err.Error(), "hoplite: ") }
func (e idError) Unwrap() error { return e.err }

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
