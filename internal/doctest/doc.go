// Package doctest holds the tests of the repository's documentation:
// every Go snippet in README.md and docs/ compiles, and every relative
// link resolves. It has no code of its own.
package doctest
