//go:build !race

package moduletest

// raceFlag: the programs these tests build are built as the test is, so
// that their dependencies come from the build cache the test's own build
// filled.
var raceFlag []string
