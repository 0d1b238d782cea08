package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// TestStartRetriesOnATakenPort: a start whose peer logged a failed bind is
// tried again (up to three times); any other failure is returned at once.
func TestStartRetriesOnATakenPort(t *testing.T) {
	var log strings.Builder
	calls := 0
	v, err := retryOnPortTaken(t.Context(), &log, func(w io.Writer) (int, error) {
		calls++
		if calls == 1 {
			fmt.Fprintln(w, "hoplite bench p2p-peer: listen tcp 127.0.0.1:42269: bind: address already in use")
			return 0, errors.New("the peer process exited before it was ready")
		}
		return 7, nil
	})
	if err != nil || v != 7 || calls != 2 {
		t.Fatalf("after a taken port: %d, %v after %d calls; want 7 after 2", v, err, calls)
	}
	if !strings.Contains(log.String(), "address already in use") || !strings.Contains(log.String(), "trying other ports") {
		t.Fatalf("the log does not say what happened:\n%s", log.String())
	}

	calls = 0
	_, err = retryOnPortTaken(t.Context(), io.Discard, func(w io.Writer) (int, error) {
		calls++
		return 0, errors.New("start the cluster member: open missing.pem: no such file or directory")
	})
	if err == nil || calls != 1 {
		t.Fatalf("another failure: %v after %d calls; want it returned after 1", err, calls)
	}

	calls = 0
	_, err = retryOnPortTaken(t.Context(), io.Discard, func(w io.Writer) (int, error) {
		calls++
		return 0, fmt.Errorf("join: listen tcp 127.0.0.1:%d: bind: address already in use", 20000+calls)
	})
	if err == nil || calls != 3 {
		t.Fatalf("a port taken every time: %v after %d calls; want an error after 3", err, calls)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	calls = 0
	_, err = retryOnPortTaken(ctx, io.Discard, func(w io.Writer) (int, error) {
		calls++
		return 0, errors.New("bind: address already in use")
	})
	if err == nil || calls != 1 {
		t.Fatalf("a cancelled start: %v after %d calls; want no retry", err, calls)
	}
}
