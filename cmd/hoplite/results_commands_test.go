package main

import (
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hoplite-go/hoplite/bench"
)

// TestResultCommandsNameTheirFiles: the command a report in bench/results
// records names, after --json, the file where the report is kept (its
// path from the repository's root), as docs/benchmarks.md says; or, for
// a report that keeps part of a run, the whole run's report beside it.
// A report written under a scratch or undated name has its --json
// rewritten when it is committed.
func TestResultCommandsNameTheirFiles(t *testing.T) {
	root := filepath.Join("..", "..")
	n := 0
	err := filepath.WalkDir(filepath.Join(root, "bench", "results"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".json") || d.Name() == "tables.json" {
			return err
		}
		r, err := bench.ReadJSON(path)
		if err != nil || len(r.Command) == 0 {
			return nil // not a report of hoplite bench
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		i := slices.IndexFunc(r.Command, func(a string) bool { return a == "--json" || a == "-json" })
		if i < 0 || i+1 == len(r.Command) {
			return nil
		}
		n++
		named := r.Command[i+1]
		if named == rel {
			return nil
		}
		if whole, err := bench.ReadJSON(filepath.Join(root, filepath.FromSlash(named))); err == nil && !filepath.IsAbs(named) && whole.Date.Equal(r.Date) {
			return nil
		}
		t.Errorf("%s: its command's --json is %s; want %s (where it is kept)", rel, named, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 100 {
		t.Errorf("checked %d reports' commands; bench/results holds more", n)
	}
}
