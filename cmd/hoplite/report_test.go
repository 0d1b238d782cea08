package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestBenchTablesAreGenerated: every benchmark table of README.md and
// docs/ is what hoplite bench report makes of bench/results, and the
// README and docs/benchmarks.md hold the tables they should.
func TestBenchTablesAreGenerated(t *testing.T) {
	results := filepath.Join("..", "..", "bench", "results")
	m, err := readManifest(results)
	if err != nil {
		t.Fatal(err)
	}
	docs, _ := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	docs = append(docs, filepath.Join("..", "..", "README.md"))
	// The README shows the headline; docs/benchmarks.md every machine's
	// table.
	want := map[string][]string{"README.md": {"headline"}}
	for _, t := range m.Tables {
		if t.Name != "headline" {
			want["benchmarks.md"] = append(want["benchmarks.md"], t.Name)
		}
	}
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		now, err := regenerate(string(b), results, filepath.Dir(doc), m)
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		if now != string(b) {
			rel, _ := filepath.Rel(filepath.Join("..", ".."), doc)
			t.Errorf("%s: a benchmark table differs from the reports; run hoplite bench report --update %s in the repository's root", rel, rel)
		}
		for _, name := range want[filepath.Base(doc)] {
			if !strings.Contains(string(b), reportBegin+name+" -->") {
				t.Errorf("%s has no %q table", doc, name)
			}
		}
	}
}

// TestBenchReportFindsAChangedFigure: a figure edited by hand is found
// and --update puts the report's back.
// firstFigure finds a table's first figure in bold ("| **0.743 s").
var firstFigure = regexp.MustCompile(`\| \*\*[0-9.]+ m?s`)

func TestBenchReportFindsAChangedFigure(t *testing.T) {
	results, _ := filepath.Abs(filepath.Join("..", "..", "bench", "results"))
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	// A copy elsewhere links the results from there: --update first.
	doc := filepath.Join(t.TempDir(), "README.md")
	if err := os.WriteFile(doc, readme, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := hoplite(t, "bench", "report", "--results", results, "--update", doc); code != 0 {
		t.Fatalf("--update: exit %d, %s", code, stderr)
	}
	if code, _, stderr := hoplite(t, "bench", "report", "--results", results, doc); code != 0 {
		t.Fatalf("check of a generated table: exit %d, %s", code, stderr)
	}
	copied, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	// The first figure of the table, whatever it is, edited by hand.
	loc := firstFigure.FindStringIndex(string(copied))
	if loc == nil {
		t.Fatal("the README's headline table has no figure in bold")
	}
	edited := string(copied[:loc[0]]) + "| **987.654 s" + string(copied[loc[1]:])
	if err := os.WriteFile(doc, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := hoplite(t, "bench", "report", "--results", results, doc); code != 1 || !strings.Contains(stderr, "differ") {
		t.Fatalf("check of an edited table: exit %d, %s", code, stderr)
	}
	if code, _, stderr := hoplite(t, "bench", "report", "--results", results, "--update", doc); code != 0 {
		t.Fatalf("--update: exit %d, %s", code, stderr)
	}
	if code, _, stderr := hoplite(t, "bench", "report", "--results", results, doc); code != 0 {
		t.Fatalf("check after --update: exit %d, %s", code, stderr)
	}
}
