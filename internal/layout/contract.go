package layout

// Unstepped are the cores, as "package.Type", that still have entry
// methods beside Step (or no Step at all) returning their output, each
// with what is left to do. The contract test fails for any other such
// type, and for an entry here that keeps the contract already.
var Unstepped = map[string]string{}

// Stepless are the core packages that declare no type with a Step, each
// with why. Every other core package steps: it has a type that keeps
// the one contract. A package here is either not a state machine (a
// library of values and pure functions, which no shell or simulator
// drives) or one not on the contract yet, its reason then beginning
// "not there yet:" and saying what is left. The contract test fails for
// a core package that has no Step and is not listed, for an entry that
// has one or names no core package, and for a package that takes the
// time in an exported method (a state machine) listed as anything but
// not there yet: so the list only shrinks.
var Stepless = map[string]string{
	"events":                    "the domain events: values the shells publish",
	"fingerprint":               "a pure function of an object's bytes",
	"internal/outbox":           "the contract itself: the Box every output embeds, and Core",
	"internal/netmodel":         "the estimates of L and B: values the observations update and the planners read",
	"internal/rendezvous":       "the rendezvous hash: a pure function of names",
	"internal/reduction/kernel": "the reduce kernels: arithmetic over buffers",
	"internal/reduction/plan":   "Reduce's plans and their cost model: pure functions of the members and the estimates",
	"internal/history":          "the chaos oracle: checks a recorded history after the fact",
	"internal/nemesis":          "the nemesis's schedules and command lines: pure functions of a seed",
}
