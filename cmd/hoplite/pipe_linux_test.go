package main

import (
	"os"
	"path/filepath"
	"testing"
)

// growPipe gives a pipe the larger buffer and leaves a file alone.
func TestGrowPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	before := pipeSize(w)
	if before <= 0 || before >= getPipeSize {
		t.Fatalf("a new pipe holds %d bytes: the test shows nothing", before)
	}
	growPipe(w)
	if got := pipeSize(w); got != getPipeSize {
		t.Fatalf("after growPipe the pipe holds %d bytes, want %d", got, getPipeSize)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	growPipe(f) // no pipe: nothing to do, and no error to report
	if got := pipeSize(f); got != 0 {
		t.Fatalf("a file has a pipe size of %d", got)
	}
}
