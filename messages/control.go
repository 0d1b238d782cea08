package messages

// Kinds of the control requests that travel on the data plane's
// connections (transport.Caller) rather than as actor messages: each is
// a protobuf message of this package, answered by another.
const (
	// ControlLocate carries a Locate to the member hosting the object's
	// directory shard; the answer is its LocateReply.
	ControlLocate byte = 'L'
	// ControlPing is answered at once with an empty reply, by any
	// member: a bare round trip on the data plane (the benchmark's
	// data-rtt floor).
	ControlPing byte = 'P'
)
