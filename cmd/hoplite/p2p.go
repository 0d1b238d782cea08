package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/experiments"
	"github.com/hoplite-go/hoplite/internal/loopback"
	"github.com/hoplite-go/hoplite/messages"
)

// p2pPeerCommand is the hidden `hoplite bench p2p-peer`: the second process
// of `hoplite bench p2p`.
const p2pPeerCommand = "p2p-peer"

const p2pUsage = `usage: hoplite bench p2p [flags]   (also: hoplite bench p2p-tcp)

Moves one object between two processes on loopback, each a cluster member
(this process and a peer it starts): Hoplite's data plane (a Get of an
object the peer Put, into a fresh buffer of the store; and a GetInto of
another into one reused buffer) against a plain Go TCP copy of the same
bytes from the same peer (into a fresh buffer, and into the same reused
buffer), interleaved in the same run; then small-object (inline) Gets
across the processes against a plain Proto.Actor request/response round
trip between them.

With --testbed or any of the scenario flags (--nodes, --bandwidth, --peers,
--json, --plot, ...), "hoplite bench p2p" is the p2p scenario of
"hoplite bench -h" instead.

flags:
`

// p2pCommand is `hoplite bench p2p`: the loopback benchmark, or the p2p
// scenario when scenario flags are given.
func p2pCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if !legacyP2P(args) { // the p2p scenario (hoplite bench -h)
		return benchCommand(ctx, append([]string{"p2p"}, args...), stdout, stderr)
	}
	return p2pTCPCommand(ctx, "bench p2p", args, stdout, stderr)
}

// p2pTCPCommand is the two-process loopback benchmark (`hoplite bench
// p2p-tcp`, or bench p2p without scenario flags: name).
func p2pTCPCommand(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(flagOutput(stderr, name))
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), p2pUsage)
		fs.PrintDefaults()
	}
	sizeFlag := fs.String("size", "1GiB", "object size")
	reps := fs.Int("reps", 3, "repetitions of each transfer variant")
	chunkFlag := fs.String("chunk-size", "4MiB", "data plane chunk size")
	small := fs.Int("small", 1000, "small-object Gets (and round trips) to time")
	smallSize := fs.Int("small-size", 1024, "small object size in bytes (below the 64 KiB inline limit)")
	logLevel := fs.String("log-level", "error", "log level of both members")
	actorLocates := fs.Bool("actor-locates", false, "also run a pair whose member sends its Locates as actor messages (instead of on the data plane) at the same time, alternating, and compare their inline Gets")
	withTLS := fs.Bool("tls", false, "also run a second pair of members over mutual TLS (certificates made for the run) at the same time, every measurement alternating between the pairs, and report the TLS cost")
	if err := fs.Parse(args); err != nil {
		return err
	}
	size, err := parseSize(*sizeFlag)
	if err != nil {
		return usageError{fmt.Sprintf("-size: %v", err)}
	}
	chunk, err := parseSize(*chunkFlag)
	if err != nil || chunk > 64<<20 {
		return usageError{fmt.Sprintf("-chunk-size %q: want 1 byte .. 64MiB", *chunkFlag)}
	}
	if *reps < 1 || *small < 1 || *smallSize < 1 || *smallSize >= 64<<10 {
		return usageError{"need -reps >= 1, -small >= 1 and 1 <= -small-size < 65536"}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected arguments %q", fs.Args())}
	}
	o := p2pOpts{size: size, chunk: chunk, reps: *reps, small: *small, smallSize: *smallSize, logLevel: *logLevel}
	want := p2pData(size)
	// Both pairs run at once and every measurement alternates between them
	// (and the plain TCP copy), so load from elsewhere on the host falls on
	// both alike.
	pairs := []*p2pPair{}
	defer func() {
		for _, p := range pairs {
			p.close()
		}
	}()
	names := []string{"hoplite data plane"}
	suffixes := []string{""}
	start := func(tlsFiles *p2pTLS, o p2pOpts) error {
		p, err := p2pStart(ctx, o, tlsFiles, stderr)
		if err != nil {
			return err
		}
		pairs = append(pairs, p)
		return nil
	}
	if err := start(nil, o); err != nil {
		return err
	}
	if *withTLS {
		dir, err := os.MkdirTemp("", "hoplite-p2p-tls-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		ca, cert, key, err := cluster.GenerateCerts(dir, []string{"127.0.0.1"})
		if err != nil {
			return err
		}
		if err := start(&p2pTLS{ca: ca, cert: cert, key: key}, o); err != nil {
			return err
		}
		names, suffixes = append(names, "hoplite over mTLS"), append(suffixes, ", mTLS")
	}
	if *actorLocates {
		ao := o
		ao.actorLocates = true
		if err := start(nil, ao); err != nil {
			return err
		}
		names, suffixes = append(names, "hoplite, actor Locates"), append(suffixes, ", actor Locates")
	}
	fmt.Fprintf(stdout, "p2p: %s between two processes on loopback (members %s and %s), %d reps, variants interleaved\n",
		sizeName(size), pairs[0].a.Address(), pairs[0].peer.GetAddress(), *reps)
	if *withTLS {
		fmt.Fprintf(stdout, "     and between two members over mutual TLS (%s and %s) at the same time\n",
			pairs[1].a.Address(), pairs[1].peer.GetAddress())
	}

	ours := make([][]time.Duration, len(pairs))
	// The plain copy twice: into a fresh buffer for every copy, as the
	// store allocates every object (it never recycles one: Gets share an
	// object's buffer read-only), and into one buffer reused by every
	// copy, its pages already mapped: the bound without the page faults.
	// GetInto (the first pair's) goes into that same buffer: like for like.
	var plain, plainReused, into []time.Duration
	reused := make([]byte, len(want))
	for i := range reused {
		reused[i] = 1 // fault the pages in before timing
	}
	for rep := 0; rep < *reps; rep++ {
		n := len(pairs) + 3
		for k := range n {
			variant := (rep + k) % n
			if variant == len(pairs)+2 {
				d, err := p2pGetInto(ctx, pairs[0].a, p2pIntoID, want, reused)
				if err != nil {
					return err
				}
				into = append(into, d)
				continue
			}
			if variant >= len(pairs) {
				var buf []byte // fresh
				if variant == len(pairs)+1 {
					buf = reused
				}
				d, err := p2pPlain(ctx, pairs[0].raw, want, buf)
				if err != nil {
					return err
				}
				if buf == nil {
					plain = append(plain, d)
				} else {
					plainReused = append(plainReused, d)
				}
				continue
			}
			d, err := p2pGet(ctx, pairs[variant].a, fmt.Sprintf("p2p-%d", rep), want)
			if err != nil {
				return err
			}
			ours[variant] = append(ours[variant], d)
		}
	}
	line := func(name string, ds []time.Duration) time.Duration {
		slices.Sort(ds)
		m := ds[len(ds)/2]
		fmt.Fprintf(stdout, "%-28s median %-12v %7.0f MB/s   (min %v, max %v)\n", name, m.Round(time.Millisecond),
			float64(size)/m.Seconds()/1e6, ds[0].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
		return m
	}
	var medians []time.Duration
	for i := range pairs {
		medians = append(medians, line(names[i], ours[i]))
	}
	im := line("hoplite into a reused buffer", into)
	pm := line("plain TCP, fresh", plain)
	rm := line("plain TCP, reused", plainReused)
	fmt.Fprintf(stdout, "hoplite / plain TCP throughput, both into fresh buffers: %.2fx by median, %.2fx best vs best\n",
		pm.Seconds()/medians[0].Seconds(), plain[0].Seconds()/ours[0][0].Seconds())
	fmt.Fprintf(stdout, "hoplite (fresh) / plain TCP into a reused buffer:        %.2fx by median, %.2fx best vs best\n",
		rm.Seconds()/medians[0].Seconds(), plainReused[0].Seconds()/ours[0][0].Seconds())
	fmt.Fprintf(stdout, "hoplite / plain TCP, both into one reused buffer: %.2fx by median, %.2fx best vs best\n",
		rm.Seconds()/im.Seconds(), plainReused[0].Seconds()/into[0].Seconds())

	// Small objects: each peer creates them (through its store node, on
	// remote), their directory shard is on the peer, and the local member
	// Gets each once: a Locate across the processes answered inline.
	payload := bytes.Repeat([]byte{0x5a}, *smallSize)
	ids := make([][]string, len(pairs))
	for i, p := range pairs {
		for j := 0; len(ids[i]) < *small; j++ {
			if id := fmt.Sprintf("small-%d", j); p.a.ShardOwner(id) == p.peer.GetNodeId() {
				ids[i] = append(ids[i], id)
			}
		}
		for _, id := range ids[i] {
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := p.a.ClientOf(p.peer).Put(pctx, id, payload)
			cancel()
			if err != nil {
				return fmt.Errorf("put %s on the peer: %w", id, err)
			}
		}
	}
	// Gets and round trips alternate (which goes first alternates too), so
	// that both see the same load.
	gets := make([][]time.Duration, len(pairs))
	rtts := make([][]time.Duration, len(pairs))
	for j := 0; j < *small; j++ {
		for k := range 2 * len(pairs) {
			v := (j + k) % (2 * len(pairs))
			i := v / 2
			p := pairs[i]
			if v%2 == 0 {
				gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				t := time.Now()
				b, err := p.a.Client().Get(gctx, ids[i][j])
				d := time.Since(t)
				cancel()
				if err != nil {
					return fmt.Errorf("get %s: %w", ids[i][j], err)
				}
				if !bytes.Equal(b, payload) {
					return fmt.Errorf("get %s returned other bytes", ids[i][j])
				}
				gets[i] = append(gets[i], d)
				continue
			}
			echo := actor.NewPID(p.peer.GetAddress(), p2pEcho)
			t := time.Now()
			reply, err := p.a.System().Root.RequestFuture(echo, &messages.MemberLeaving{MemberId: "ping"}, 10*time.Second).Result()
			d := time.Since(t)
			if err != nil {
				return fmt.Errorf("round trip: %w", err)
			}
			if _, ok := reply.(*messages.MemberLeaving); !ok {
				return fmt.Errorf("round trip: unexpected reply %T", reply)
			}
			rtts[i] = append(rtts[i], d)
		}
	}
	for i := range pairs {
		suffix := suffixes[i]
		fmt.Fprintf(stdout, "inline Get across processes (%d B, %d objects%s): p50 %v  p99 %v\n", *smallSize, len(gets[i]), suffix,
			percentile(gets[i], 50), percentile(gets[i], 99))
		fmt.Fprintf(stdout, "Proto.Actor request/response round trip%s:    p50 %v  p99 %v\n", suffix, percentile(rtts[i], 50), percentile(rtts[i], 99))
		fmt.Fprintf(stdout, "inline Get / round trip%s: p50 %.2fx  p99 %.2fx\n", suffix,
			percentile(gets[i], 50).Seconds()/percentile(rtts[i], 50).Seconds(), percentile(gets[i], 99).Seconds()/percentile(rtts[i], 99).Seconds())
	}
	if *actorLocates {
		a := len(pairs) - 1
		fmt.Fprintf(stdout, "inline Get, Locate on the data plane / as an actor message: p50 %.2fx  p99 %.2fx\n",
			percentile(gets[0], 50).Seconds()/percentile(gets[a], 50).Seconds(), percentile(gets[0], 99).Seconds()/percentile(gets[a], 99).Seconds())
	}
	if *withTLS {
		pct := func(plain, tls time.Duration) float64 {
			return 100 * (tls.Seconds() - plain.Seconds()) / plain.Seconds()
		}
		g0, g1 := percentile(gets[0], 50), percentile(gets[1], 50)
		r0, r1 := percentile(rtts[0], 50), percentile(rtts[1], 50)
		fmt.Fprintf(stdout, "TLS cost: %s Get median %v -> %v (%+.0f%% time, %.0f -> %.0f MB/s); inline Get p50 %v -> %v (%+.0f%%); round trip p50 %v -> %v (%+.0f%%)\n",
			sizeName(size), medians[0].Round(time.Millisecond), medians[1].Round(time.Millisecond), pct(medians[0], medians[1]),
			float64(size)/medians[0].Seconds()/1e6, float64(size)/medians[1].Seconds()/1e6,
			g0, g1, pct(g0, g1), r0, r1, pct(r0, r1))
	}
	for _, p := range pairs {
		p.close()
	}
	pairs = nil
	return nil
}

// p2pOpts are the parameters of a p2p benchmark.
type p2pOpts struct {
	size, chunk            int64
	reps, small, smallSize int
	logLevel               string
	actorLocates           bool // the local member's actor-locates experiment
}

// p2pTLS are the certificate files of a pair over mutual TLS.
type p2pTLS struct{ ca, cert, key string }

// p2pPair is a member in this process and a peer process it started,
// which Put the benchmark's objects and serves the same bytes on raw.
type p2pPair struct {
	a    *cluster.Member
	peer *messages.NodeRef
	raw  string
	stop func()
}

// close stops the peer first (it exits when its stdin closes), so that
// the local member's stop is not a failure it reports, then the member.
func (p *p2pPair) close() {
	if p.stop != nil {
		p.stop()
		p.stop = nil
	}
}

// p2pStart starts a pair, over mutual TLS with tlsFiles (nil: plaintext),
// and waits until the peer has Put its objects. A start that met a port
// another process bound first is tried again on other ports.
func p2pStart(ctx context.Context, o p2pOpts, tlsFiles *p2pTLS, stderr io.Writer) (*p2pPair, error) {
	return retryOnPortTaken(ctx, stderr, func(w io.Writer) (*p2pPair, error) {
		return p2pStartOnce(ctx, o, tlsFiles, w)
	})
}

// retryOnPortTaken runs start up to three times while it fails because a
// port it chose was bound by another process first, as its error or the
// log it wrote through w says.
func retryOnPortTaken[T any](ctx context.Context, stderr io.Writer, start func(w io.Writer) (T, error)) (T, error) {
	for try := 1; ; try++ {
		seen := &addrInUseWriter{w: stderr}
		v, err := start(seen)
		if err == nil || try == 3 || ctx.Err() != nil ||
			!(seen.seen.Load() || errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), addrInUse)) {
			return v, err
		}
		fmt.Fprintf(stderr, "hoplite bench: a port was taken before it was bound (%v); trying other ports\n", err)
	}
}

// addrInUse is how a failed bind reads in an error or a peer's log.
const addrInUse = "address already in use"

// addrInUseWriter passes a peer's stderr on and notes whether it reported
// a bind that failed because the port was taken.
type addrInUseWriter struct {
	w    io.Writer
	seen atomic.Bool
}

func (a *addrInUseWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(addrInUse)) {
		a.seen.Store(true)
	}
	return a.w.Write(p)
}

func p2pStartOnce(ctx context.Context, o p2pOpts, tlsFiles *p2pTLS, stderr io.Writer) (_ *p2pPair, err error) {
	ports, err := loopback.Ports(5)
	if err != nil {
		return nil, err
	}
	hostA, hostB := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[2])
	seeds := fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d", ports[1], ports[3])
	raw := fmt.Sprintf("127.0.0.1:%d", ports[4])
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	peerCtx, stopPeer := context.WithCancel(ctx)
	cmd := exec.CommandContext(peerCtx, exe, "bench", p2pPeerCommand, "-bind", hostB, "-manage-port", strconv.Itoa(ports[3]),
		"-seeds", seeds, "-size", strconv.FormatInt(o.size, 10), "-reps", strconv.Itoa(o.reps), "-raw", raw,
		"-capacity", strconv.FormatInt(int64(o.reps+1)*o.size+64<<20, 10), "-chunk-size", strconv.FormatInt(o.chunk, 10),
		"-log-level", o.logLevel)
	if tlsFiles != nil {
		cmd.Args = append(cmd.Args, "-tls-cert", tlsFiles.cert, "-tls-key", tlsFiles.key, "-tls-ca", tlsFiles.ca)
	}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe() // the peer exits when this closes
	if err != nil {
		stopPeer()
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		stopPeer()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		stopPeer()
		return nil, err
	}
	peerDone := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(peerDone)
	}()
	pair := &p2pPair{raw: raw}
	pair.stop = func() {
		stdin.Close()
		select {
		case <-peerDone:
		case <-time.After(10 * time.Second):
			stopPeer()
			<-peerDone
		}
		stopPeer()
		if pair.a != nil {
			pair.a.Stop()
		}
	}
	defer func() {
		if err != nil {
			pair.close()
		}
	}()
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "READY" {
				ready <- nil
				_, _ = io.Copy(io.Discard, out)
				return
			}
		}
		ready <- errors.New("the peer process exited before it was ready")
	}()

	log := logrus.New()
	log.SetOutput(stderr)
	if lvl, err := logrus.ParseLevel(o.logLevel); err == nil {
		log.SetLevel(lvl)
	}
	mcfg := cluster.MemberConfig{Bind: hostA, ManagePort: ports[1], Seeds: strings.Split(seeds, ","),
		Capacity: o.size + 64<<20, ChunkSize: int(o.chunk), Log: log, DefaultTimeout: 5 * time.Minute}
	experiments.In(&mcfg).ActorLocates = o.actorLocates
	if tlsFiles != nil {
		mcfg.TLSCert, mcfg.TLSKey, mcfg.TLSCA = tlsFiles.cert, tlsFiles.key, tlsFiles.ca
	}
	if pair.a, err = cluster.Join(ctx, mcfg); err != nil {
		return nil, err
	}
	select {
	case err := <-ready:
		if err != nil {
			return nil, err
		}
	case <-time.After(5 * time.Minute):
		return nil, errors.New("the peer process was not ready within 5 minutes")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = pair.a.WaitMembers(wctx, 2)
	cancel()
	if err != nil {
		return nil, err
	}
	for _, n := range pair.a.Members() {
		if n.GetNodeId() != pair.a.ID() {
			pair.peer = n
		}
	}
	if pair.peer == nil {
		return nil, errors.New("the peer is not a member")
	}
	return pair, nil
}

func p2pGet(ctx context.Context, a *cluster.Member, id string, want []byte) (time.Duration, error) {
	t := time.Now()
	b, err := a.Client().GetReadOnly(ctx, id)
	d := time.Since(t)
	if err != nil {
		return 0, fmt.Errorf("get %s: %w", id, err)
	}
	if !bytes.Equal(b, want) {
		return 0, fmt.Errorf("get %s returned other bytes", id)
	}
	return d, nil
}

// p2pIntoID is the object GetInto fetches every rep: it keeps no copy,
// so each fetch crosses the processes (an id the Gets fetched would be
// local).
const p2pIntoID = "p2p-into"

// p2pGetInto fetches id from the peer into buf, which it reuses.
func p2pGetInto(ctx context.Context, a *cluster.Member, id string, want, buf []byte) (time.Duration, error) {
	t := time.Now()
	n, err := a.Client().GetInto(ctx, id, buf)
	d := time.Since(t)
	if err != nil {
		return 0, fmt.Errorf("get %s into a buffer: %w", id, err)
	}
	if n != len(want) || !bytes.Equal(buf[:n], want) {
		return 0, fmt.Errorf("get %s into a buffer: other bytes", id)
	}
	clear(buf[:n]) // the next copy into it must not find these bytes in place (untimed)
	return d, nil
}

// p2pPlain copies the object from the peer's raw port into buf, or into a
// fresh buffer if buf is nil.
func p2pPlain(ctx context.Context, raw string, want, buf []byte) (time.Duration, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", raw)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	t := time.Now()
	reused := buf != nil
	if !reused {
		buf = make([]byte, len(want)) // a fresh buffer, like a store's new object (timed, as the store's is)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Minute))
	if _, err := io.ReadFull(c, buf); err != nil {
		return 0, fmt.Errorf("plain copy: %w", err)
	}
	elapsed := time.Since(t)
	if !bytes.Equal(buf, want) {
		return 0, errors.New("plain copy: other bytes")
	}
	if reused {
		clear(buf) // as after a GetInto (p2pGetInto): both leave it alike
	}
	return elapsed, nil
}

func percentile(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := min(len(s)-1, (len(s)*p+99)/100-1)
	return s[max(0, i)].Round(time.Microsecond)
}

func sizeName(n int64) string {
	switch {
	case n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// p2pData is the benchmark's object: the same bytes in both processes.
func p2pData(size int64) []byte {
	b := make([]byte, size)
	r := rand.NewChaCha8([32]byte{'h', 'o', 'p', 'l', 'i', 't', 'e'})
	_, _ = r.Read(b)
	return b
}

// p2pEcho is the peer's echo actor: the reference round trip.
const p2pEcho = "p2p-echo"

// p2pPeer is the peer process: a member that Puts the object once per
// rep, serves the same bytes on a plain TCP port and echoes requests; it
// prints READY, and exits when its stdin closes.
func p2pPeer(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench "+p2pPeerCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f nodeFlags
	f.register(fs)
	size := fs.Int64("size", 1<<30, "object size in bytes")
	reps := fs.Int("reps", 3, "objects to Put")
	raw := fs.String("raw", "", "plain TCP address serving the same bytes")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := f.logger(stderr)
	if err != nil {
		return err
	}
	cfg, err := f.config(log)
	if err != nil {
		return err
	}
	if err := f.checkPlaintext(log); err != nil {
		return err
	}
	cfg.DefaultTimeout = 5 * time.Minute
	m, err := cluster.Join(ctx, cfg)
	if err != nil {
		return err
	}
	defer m.Stop()
	if _, err := m.System().Root.SpawnNamed(actorutil.PropsFromFunc(func(c actor.Context) {
		if msg, ok := c.Message().(*messages.MemberLeaving); ok {
			c.Respond(msg)
		}
	}), p2pEcho); err != nil {
		return err
	}
	data := p2pData(*size)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = m.WaitMembers(wctx, 2)
	cancel()
	if err != nil {
		return err
	}
	for rep := 0; rep <= *reps; rep++ {
		id := fmt.Sprintf("p2p-%d", rep)
		if rep == *reps {
			id = p2pIntoID
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		err := m.Client().Put(pctx, id, data)
		cancel()
		if err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", *raw)
	if err != nil {
		return err
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = c.Write(data)
			}()
		}
	}()
	fmt.Fprintln(stdout, "READY")
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	select {
	case <-eof:
	case <-ctx.Done():
	}
	return nil
}
