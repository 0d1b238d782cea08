package doctest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pageLimits are the pages that must stay short: the README is read in
// five minutes, and docs/benchmarks.md is a reference (method, one table
// per machine, how to reproduce), its experiments' notes kept beside
// their results in bench/results.
var pageLimits = map[string]int{
	"README.md":                            200,
	filepath.Join("docs", "benchmarks.md"): 400,
}

func TestPagesStayShort(t *testing.T) {
	for page, limit := range pageLimits {
		b, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(b), "\n"); n > limit {
			t.Errorf("%s has %d lines, more than %d: move detail to docs/ (or, for experiments, to a notes file beside their results)", page, n, limit)
		}
	}
}
