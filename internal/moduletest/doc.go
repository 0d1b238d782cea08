// Package moduletest holds tests that use Hoplite the way another module
// does: a dependent module that requires it (and builds the README's
// program, an application's actors and the hoplite command), and a
// module proxy that serves it (go install hoplite@version). Go ignores a
// dependency's replace directives, so only these tests see what a user
// builds; the package has no code of its own.
package moduletest
