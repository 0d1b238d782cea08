// Command upstream runs, in one process, an actor system of upstream
// Proto.Actor (github.com/asynkron/protoactor-go) and an embedded Hoplite
// cluster, whose actors run on the copy of Proto.Actor inside Hoplite's
// module: an object Put on one member is fetched on another and handed to
// an upstream actor, whose answer is printed. Upstream's cluster package
// is linked too, for the protobuf files it registers at init (every one
// of upstream's).
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	_ "github.com/asynkron/protoactor-go/cluster"
	"github.com/hoplite-go/hoplite/cluster"
)

// greet asks the greeter for a greeting of name.
type greet struct{ name string }

func main() {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	greeter := system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(greet); ok {
			c.Respond("hello, " + m.name)
		}
	}))

	l, err := cluster.StartLocal(cluster.Config{Nodes: 2})
	check(err)
	defer l.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	check(l.Client(0).Put(ctx, "name", []byte("hoplite")))
	name, err := l.Client(1).Get(ctx, "name")
	check(err)

	answer, err := system.Root.RequestFuture(greeter, greet{string(name)}, 10*time.Second).Result()
	check(err)
	fmt.Println(answer)
}

// check ends the program on an error.
func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
