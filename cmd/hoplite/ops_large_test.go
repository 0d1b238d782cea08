package main

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeRandomFile writes size random bytes drawn from seed to path, a
// MiB at a time.
func writeRandomFile(t *testing.T, path string, seed uint64, size int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := rand.New(rand.NewPCG(seed, seed+1))
	buf := make([]byte, 1<<20)
	for left := size; left > 0; left -= int64(len(buf)) {
		for i := 0; i < len(buf); i += 8 {
			v := r.Uint64()
			for k := range 8 {
				buf[i+k] = byte(v >> (8 * k))
			}
		}
		if _, err := f.Write(buf[:min(left, int64(len(buf)))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// sameFiles fails t unless a and b hold the same bytes.
func sameFiles(t *testing.T, a, b string) {
	t.Helper()
	fa, err := os.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	ba, bb := make([]byte, 1<<20), make([]byte, 1<<20)
	for off := int64(0); ; off += int64(len(ba)) {
		na, ea := io.ReadFull(fa, ba)
		nb, eb := io.ReadFull(fb, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			t.Fatalf("%s and %s differ in the MiB at %d (%d and %d bytes there)", a, b, off, na, nb)
		}
		if ea != nil || eb != nil {
			return
		}
	}
}

// runWithStdin runs the binary with a file as its standard input.
func runWithStdin(t *testing.T, bin, stdin string, args ...string) (int, string, string) {
	t.Helper()
	in, err := os.Open(stdin)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	r := runWith(t, bin, in, nil, args...)
	return r.code, r.stdout, r.stderr
}

// ran is what a run of the binary did.
type ran struct {
	code           int
	stdout, stderr string
	maxRSS         int64 // bytes, the most the process held in memory at once
}

// runWith runs the binary with stdin as its standard input and its
// standard output to stdout (nil: kept in ran).
func runWith(t *testing.T, bin string, stdin io.Reader, stdout io.Writer, args ...string) ran {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin = stdin
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	if stdout != nil {
		cmd.Stdout = stdout
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	stop := peakRSS(cmd.Process.Pid)
	err := cmd.Wait()
	r := ran{stdout: out.String(), stderr: errs.String(), maxRSS: stop()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return r
}

// TestOperatorPutGetLarge: `hoplite put` and `get` of a 300 MiB object,
// past the 256 MiB one remote message carries: from a file and from
// standard input (a pipe, whose length it learns at EOF), read back
// through another member into a file and to standard output,
// byte-exact. Neither the put from the pipe nor the get to standard
// output holds the object in its memory: each stays under half its size
// at its peak.
func TestOperatorPutGetLarge(t *testing.T) {
	bin := builtHoplite(t)
	addrs := startMembers(t, bin, 2, "-capacity", "768MiB")
	a, b := "--addr="+addrs[0], "--addr="+addrs[1]
	end := time.Now().Add(30 * time.Second)
	for {
		code, out, _ := cli(t, bin, nil, "members", a)
		if code == 0 && strings.Count(out, "\n") == 2 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("members: %s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.bin"), filepath.Join(dir, "out.bin")
	const size = 300 << 20
	writeRandomFile(t, in, 11, size)

	if code, stdout, errs := runWithStdin(t, bin, os.DevNull, "put", a, "--timeout", "2m", "big-file", in); code != 0 || !strings.Contains(stdout, "put big-file (314572800 bytes)") {
		t.Fatalf("put of a 300 MiB file: exit %d, %s %s", code, stdout, errs)
	}
	if code, _, errs := runWithStdin(t, bin, os.DevNull, "get", b, "--timeout", "2m", "big-file", out); code != 0 {
		t.Fatalf("get of 300 MiB to a file through the other member: exit %d, %s", code, errs)
	}
	sameFiles(t, in, out)

	// Through a pipe: not a file the CLI could read at offsets.
	pr, pw := io.Pipe()
	go func() {
		f, err := os.Open(in)
		if err != nil {
			pw.CloseWithError(err)
			return
		}
		defer f.Close()
		_, err = io.Copy(pw, f)
		pw.CloseWithError(err)
	}()
	r := runWith(t, bin, pr, nil, "put", b, "--timeout", "2m", "big-stdin")
	pr.Close()
	if r.code != 0 || !strings.Contains(r.stdout, "put big-stdin (314572800 bytes)") {
		t.Fatalf("put of 300 MiB from standard input: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	t.Logf("put from standard input: %d MiB at its peak", r.maxRSS>>20)
	if r.maxRSS > size/2 {
		t.Fatalf("put of 300 MiB from standard input held %d MiB at its peak", r.maxRSS>>20)
	}
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	r = runWith(t, bin, nil, f, "get", a, "--timeout", "2m", "big-stdin")
	if r.code != 0 {
		t.Fatalf("get of 300 MiB to standard output: exit %d, %s", r.code, r.stderr)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("get to standard output: %d MiB at its peak", r.maxRSS>>20)
	if r.maxRSS > size/2 {
		t.Fatalf("get of 300 MiB to standard output held %d MiB at its peak", r.maxRSS>>20)
	}
	sameFiles(t, in, out)
}
