// Package cluster runs Hoplite members. A Member (Join; what `hoplite
// node` runs) is one actor system with its store node, its data plane, a
// share of the directory shards placed by rendezvous hashing over the
// live members, a barrier host, and a failure path: probes and remote
// endpoint loss raise a suspicion, the revoke broadcast spreads it over a
// binomial graph, every member delivers it once (events.NodeFailed) and
// moves the failed member's shards. StartLocal runs N such members in one
// process (Local): the same runtime, with an in-memory data plane and an
// in-process membership provider; Kill stops a member as SIGKILL would.
//
// Four members in this process; an object Put on one is read on another:
//
//	l, err := cluster.StartLocal(cluster.Config{Nodes: 4})
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer l.Stop()
//	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
//	defer cancel()
//	if err := l.Client(0).Put(ctx, "greeting", []byte("hello")); err != nil {
//		log.Fatal(err)
//	}
//	b, err := l.Client(3).Get(ctx, "greeting") // streamed from member 0
//
// A member of a cluster of processes joins with Join (MemberConfig names
// its address and its seeds); a program that is not a member uses Dial.
package cluster
