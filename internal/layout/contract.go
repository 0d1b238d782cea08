package layout

// Unstepped are the cores, as "package.Type", that still have entry
// methods beside Step (or no Step at all) returning their output, each
// with what is left to do. The contract test fails for any other such
// type, and for an entry here that keeps the contract already.
var Unstepped = map[string]string{}
