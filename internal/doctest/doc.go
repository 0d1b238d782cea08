// Package doctest holds the tests of the repository's documentation:
// every Go snippet in README.md and docs/ compiles, every relative link
// resolves, the README's two commands are what CI runs, and the README
// and docs/benchmarks.md stay short. It has no code of its own.
package doctest
