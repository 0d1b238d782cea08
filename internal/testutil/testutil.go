// Package testutil holds the small helpers that the cluster's in-process
// tests and its multi-process tests (cluster/processtest) share.
package testutil

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/loopback"
	"github.com/hoplite-go/hoplite/messages"
)

// RandomBytes are n bytes drawn from seed (the same seed, the same bytes).
func RandomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for k := 0; k < 8; k++ {
			b[i+k] = byte(v >> (8 * k))
		}
	}
	for i := n - n%8; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

// Eventually waits until cond holds, failing t after d.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// FreePorts returns n loopback ports from loopback.Ports (free, below the
// kernel's ephemeral range, never handed out twice in one test binary).
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	out, err := loopback.Ports(n)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// MemberSlots returns n members' loopback addresses: each member's actor
// system address and its manage (health) endpoint, from FreePorts.
func MemberSlots(t testing.TB, n int) (binds, manages []string) {
	t.Helper()
	ports := FreePorts(t, 2*n)
	for i := range n {
		binds = append(binds, fmt.Sprintf("127.0.0.1:%d", ports[2*i]))
		manages = append(manages, fmt.Sprintf("127.0.0.1:%d", ports[2*i+1]))
	}
	return binds, manages
}

// FreeAddr is one such port on 127.0.0.1, as HOST:PORT.
func FreeAddr() (string, error) {
	p, err := loopback.Ports(1)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("127.0.0.1:%d", p[0]), nil
}

// SyncBuffer collects output written from several goroutines.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// SenderOf returns who each receiver fetched from, per the shard's records.
func SenderOf(info *messages.ObjectInfo) map[string]string {
	m := map[string]string{}
	for _, tr := range info.GetTransfers() {
		if !tr.GetAborted() {
			m[tr.GetReceiver()] = tr.GetSender()
		}
	}
	return m
}

// Pattern is n bytes that differ from those of other seeds and do not
// repeat within 256 bytes, so a misplaced chunk shows.
func Pattern(seed byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7) + byte(i>>8)
	}
	return b
}

// WantErr fails t unless errors.Is(err, target).
func WantErr(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error = %v, want %v", err, target)
	}
}

// Recv returns the next value on ch, failing t if none comes within ten
// seconds: a safety net against hangs, never a timing assertion.
func Recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: did not return", what)
		panic("unreachable")
	}
}

// NeedFile skips the test on a system without path (no /proc on macOS, no
// bash in a minimal image), saying why; any other error reading it fails
// the test.
func NeedFile(t testing.TB, path, why string) {
	t.Helper()
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		t.Skipf("skipped on a system without %s: %s", path, why)
	} else if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
