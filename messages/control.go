package messages

// Kinds of the control requests that travel on the data plane's
// connections (internal/transport's Caller) rather than as actor
// messages: each is a protobuf message of this package, answered by
// another.
const (
	// ControlLocate carries a Locate to the member hosting the object's
	// directory shard; the answer is its LocateReply.
	ControlLocate byte = 'L'
	// ControlCreate carries a fast Put's CreateObject to the member
	// hosting the object's directory shard; the answer is its
	// CreateObjectReply.
	ControlCreate byte = 'C'
	// ControlPing is answered at once with an empty reply, by any
	// member: a bare round trip on the data plane (the benchmark's
	// data-rtt floor).
	ControlPing byte = 'P'
	// ControlPush carries an AllReduce coordinator's Get that pushes an
	// inline result (Get.pushed) to a participant's member, which hands it
	// to its store node; the answer is the store node's GetReply.
	ControlPush byte = 'G'
	// ControlSubscribe carries a Reduce coordinator's SubscribeBatch to
	// the member hosting the sources' directory shards; the answer is a
	// SubscribeAnswer. ('S', a lone Subscribe, is retired: a member that
	// does not know a kind refuses it, and the coordinator then sends its
	// Subscribes as actor messages.)
	ControlSubscribe byte = 'B'
	// ControlLive carries the live view's gathering from the member a
	// browser watches: the one kind that is not protobuf, but the JSON of
	// liveview.Request, answered by a liveview.Batch.
	ControlLive byte = 'V'
	// ControlLocateVia carries a receiver's Locate to its Locate deputy,
	// a member that sends it on to the member hosting the object's
	// directory shard, alone or in a LocateBatch with others of the
	// object; the answer is the LocateReply.
	ControlLocateVia byte = 'D'
	// ControlLocateBatch carries a Locate deputy's LocateBatch to the
	// member hosting the object's directory shard; the answer is a
	// LocateBatchReply.
	ControlLocateBatch byte = 'H'
	// ControlDelete carries a Delete's DeleteObject from the deleting
	// node's member to the member hosting the object's directory shard;
	// the answer is its DeleteObjectReply.
	ControlDelete byte = 'X'
)

// MaxLocateBatch bounds the Locates of one LocateBatch.
const MaxLocateBatch = 256
