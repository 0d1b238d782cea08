package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/messages"
)

func init() {
	for _, all := range []bool{false, true} {
		name, doc := "reduce", "Makes TARGET from the first --num of the SOURCE objects to exist (all of them by default), combined element-wise with --op over --dtype (little-endian arrays of equal size), and says which sources it reduced. It waits --timeout for the sources to appear."
		if all {
			name, doc = "allreduce", "Is reduce, then a broadcast of TARGET to every member that held a reduced source: it returns when every such member has it."
		}
		opsCommands[name] = opsCommand{name: name, args: "TARGET SOURCE...", nargs: [2]int{2, 1 << 20}, doc: doc,
			flags: reduceFlags, run: func(ctx context.Context, c *cluster.Client, args []string, o opsIO) error {
				return opReduce(ctx, c, args, o, all)
			}}
	}
}

// reduceOpts are the flags of reduce and allreduce.
type reduceOpts struct {
	num       int
	op, dtype string
}

func reduceFlags(fs *flag.FlagSet) opsExtra {
	r := &reduceOpts{}
	fs.IntVar(&r.num, "num", 0, "reduce the first NUM sources to exist (0: all of them)")
	fs.StringVar(&r.op, "op", "sum", "the element-wise operation: sum, min, max or prod")
	fs.StringVar(&r.dtype, "dtype", "float32", "the elements' type: float32, float64, int32 or int64")
	return r
}

func (r *reduceOpts) check() error {
	if _, ok := messages.ReduceOp_value[strings.ToUpper(r.op)]; !ok || strings.EqualFold(r.op, "REDUCE_OP_UNSPECIFIED") {
		return fmt.Errorf("--op %q: want sum, min, max or prod", r.op)
	}
	if _, ok := messages.DType_value[strings.ToUpper(r.dtype)]; !ok || strings.EqualFold(r.dtype, "DTYPE_UNSPECIFIED") {
		return fmt.Errorf("--dtype %q: want float32, float64, int32 or int64", r.dtype)
	}
	if r.num < 0 {
		return fmt.Errorf("--num %d: want 1 or more (0: all the sources)", r.num)
	}
	return nil
}

func opReduce(ctx context.Context, c *cluster.Client, args []string, o opsIO, all bool) error {
	r := o.extra.(*reduceOpts)
	target, sources := args[0], args[1:]
	num := r.num
	if num == 0 {
		num = len(sources)
	}
	if num > len(sources) {
		return usageError{fmt.Sprintf("--num %d: only %d sources given", num, len(sources))}
	}
	op := messages.ReduceOp(messages.ReduceOp_value[strings.ToUpper(r.op)])
	dtype := messages.DType(messages.DType_value[strings.ToUpper(r.dtype)])
	reduce, verb := c.Reduce, "reduced"
	if all {
		reduce, verb = c.AllReduce, "allreduced"
	}
	begin := time.Now()
	reply, err := reduce(ctx, target, sources, num, op, dtype)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.stdout, "%s %s: %s of %d sources in %v: %s\n", verb, target, strings.ToLower(op.String()), len(reply.GetReducedIds()),
		time.Since(begin).Round(time.Millisecond), strings.Join(reply.GetReducedIds(), " "))
	if rest := reply.GetUnreducedIds(); len(rest) > 0 {
		fmt.Fprintf(o.stdout, "not reduced: %s\n", strings.Join(rest, " "))
	}
	return nil
}
