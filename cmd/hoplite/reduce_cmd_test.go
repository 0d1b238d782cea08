package main

import (
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/testutil"
)

// int32File writes v as little-endian int32s to a file in dir.
func int32File(t *testing.T, dir, name string, v ...int32) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, int32Bytes(v...), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestReduceAndEventsCommands: reduce and allreduce from a shell against
// three `hoplite node` processes, given every member's address, with
// `hoplite events` running beside them and printing each Reduce's
// ReduceDone; a first address that is not a member is passed over; bad
// flags exit 2.
func TestReduceAndEventsCommands(t *testing.T) {
	bin := builtHoplite(t)
	addrs := startMembers(t, bin, 3)
	all := "--addr=" + strings.Join(addrs, ",")
	end := time.Now().Add(30 * time.Second)
	for {
		code, out, _ := cli(t, bin, nil, "members", all)
		if code == 0 && strings.Count(out, "\n") == 3 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("members: %s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ev := exec.CommandContext(ctx, bin, "events", all, "--for", "90s")
	var evOut, evErr testutil.SyncBuffer
	ev.Stdout, ev.Stderr = &evOut, &evErr
	if err := ev.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = ev.Process.Kill()
		_ = ev.Wait()
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			select {
			case <-ctx.Done():
				t.Fatalf("%s; events printed:\n%s\n%s", what, evOut.String(), evErr.String())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	waitFor("events never subscribed", func() bool { return strings.Contains(evErr.String(), "subscribed") })

	dir := t.TempDir()
	if code, _, errs := cli(t, bin, nil, "put", all, "s1", int32File(t, dir, "s1", 1, 2, 3)); code != 0 {
		t.Fatalf("put s1: exit %d, %s", code, errs)
	}
	if code, _, errs := cli(t, bin, nil, "put", "--addr="+addrs[2], "s2", int32File(t, dir, "s2", 10, 20, 30)); code != 0 {
		t.Fatalf("put s2: exit %d, %s", code, errs)
	}
	code, out, errs := cli(t, bin, nil, "reduce", all, "--dtype", "int32", "sum", "s1", "s2")
	if code != 0 || !strings.HasPrefix(out, "reduced sum: sum of 2 sources in ") {
		t.Fatalf("reduce: exit %d, %q %s", code, out, errs)
	}
	// A first address where nothing listens: the client uses the next.
	dead := freeLoopback(t)
	code, out, errs = cli(t, bin, nil, "get", "--addr="+dead+","+addrs[1], "sum")
	if want := string(int32Bytes(11, 22, 33)); code != 0 || out != want {
		t.Fatalf("get the sum: exit %d, %v, %s", code, []byte(out), errs)
	}
	code, out, errs = cli(t, bin, nil, "allreduce", all, "--dtype", "int32", "--op", "max", "--num", "1", "first", "s1", "s2")
	if code != 0 || !strings.HasPrefix(out, "allreduced first: max of 1 sources in ") || !strings.Contains(out, "\nnot reduced: s") {
		t.Fatalf("allreduce of the first 1: exit %d, %q %s", code, out, errs)
	}
	waitFor("no ReduceDone of both targets", func() bool {
		s := evOut.String()
		return strings.Contains(s, "ReduceDone") && strings.Contains(s, " target=sum reduced=") && strings.Contains(s, " target=first reduced=")
	})

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"reduce", all, "--op", "avg", "t", "s1"}, "--op \"avg\""},
		{[]string{"reduce", all, "--dtype", "int8", "t", "s1"}, "--dtype \"int8\""},
		{[]string{"allreduce", all, "--num", "3", "t", "s1", "s2"}, "--num 3: only 2 sources"},
		{[]string{"reduce", all, "t"}, "TARGET SOURCE"},
		{[]string{"events", all, "--for", "-1s"}, "--for"},
		{[]string{"events", "--addr=a:1,nonsense"}, "--addr"},
	} {
		code, _, errs := cli(t, bin, nil, c.args...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", c.args, code, errs, c.want)
		}
	}
}

func int32Bytes(v ...int32) []byte {
	b := make([]byte, 4*len(v))
	for i, e := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(e))
	}
	return b
}
