package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/hoplite-go/hoplite/bench"
)

// --degree names the chain-leaf shape beside the degrees, and "all" (the
// degree scenario's default) compares it too.
func TestParseDegreesChainLeaf(t *testing.T) {
	for _, c := range []struct {
		in, scenario string
		want         []int
	}{
		{"", "degree", []int{1, 2, bench.DegreeN, bench.DegreeChainLeaf}},
		{"all", "reduce", []int{1, 2, bench.DegreeN, bench.DegreeChainLeaf}},
		{"chain-leaf", "degree", []int{bench.DegreeChainLeaf}},
		{"2, chain-leaf,n", "async", []int{2, bench.DegreeChainLeaf, bench.DegreeN}},
		{"chosen", "degree", []int{}},
	} {
		got, err := parseDegrees(c.in, c.scenario)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%q (%s): %v %v, want %v", c.in, c.scenario, got, err, c.want)
		}
	}
	for _, bad := range []string{"chain", "chain-leaf,0", "leaf"} {
		if _, err := parseDegrees(bad, "degree"); err == nil || !strings.Contains(err.Error(), "chain-leaf") {
			t.Errorf("%q: error %v, want one that names chain-leaf", bad, err)
		}
	}
}
