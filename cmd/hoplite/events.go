package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/messages"
)

func init() {
	opsCommands["events"] = opsCommand{name: "events", args: "", nargs: [2]int{0, 0}, live: true, flags: eventsFlags, run: opEvents,
		doc: "Prints the recovery and collective events of every live member (and of those that join) as they happen, one line each (a failed member, a replaced tree position, a rebuilt shard, a Reduce done, ...), until interrupted or --for ends; --timeout bounds the connection only. Each surviving member reports a failure it saw; \"dropped\" counts events a member left out because this reader was too slow."}
}

// eventsOpts are the flags of events.
type eventsOpts struct{ forDur time.Duration }

func eventsFlags(fs *flag.FlagSet) opsExtra {
	e := &eventsOpts{}
	fs.DurationVar(&e.forDur, "for", 0, "stop after this long (0: until interrupted)")
	return e
}

func (e *eventsOpts) check() error {
	if e.forDur < 0 {
		return fmt.Errorf("--for %v: want 0 or more", e.forDur)
	}
	return nil
}

func opEvents(ctx context.Context, c *cluster.Client, _ []string, o opsIO) error {
	if d := o.extra.(*eventsOpts).forDur; d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	evs, err := c.Events(ctx)
	if err != nil {
		return err
	}
	// On stderr, so that a script reading stdout sees only events, and
	// knows when they start to come.
	fmt.Fprintln(o.stderr, "hoplite events: subscribed; one line per event")
	for ev := range evs {
		if err := writeEvent(o.stdout, ev); err != nil {
			return err
		}
	}
	if ctx.Err() == nil {
		return messages.Errorf(messages.ErrorCode_UNAVAILABLE, "every member subscribed to has gone, and none answers")
	}
	return nil
}

// writeEvent writes ev as one line: its time, the member that relayed
// it, its kind and its fields.
func writeEvent(w io.Writer, ev *messages.ClusterEvent) error {
	at := "-"
	if ev.GetAtUnixNano() != 0 {
		at = time.Unix(0, ev.GetAtUnixNano()).UTC().Format("15:04:05.000")
	}
	_, err := fmt.Fprintf(w, "%s member=%s %s\n", at, ev.GetMember(), eventText(ev))
	return err
}

func eventText(ev *messages.ClusterEvent) string {
	switch e := ev.GetEvent().(type) {
	case *messages.ClusterEvent_NodeFailed:
		m := e.NodeFailed
		return fields("NodeFailed", "node", m.GetNode(), "address", m.GetAddress(), "detected_by", m.GetDetectedBy(), "forwarder", m.GetForwarder())
	case *messages.ClusterEvent_SenderSwitched:
		m := e.SenderSwitched
		return fields("SenderSwitched", "object", m.GetObject(), "receiver", m.GetReceiver(), "from", m.GetFrom(), "to", m.GetTo(), "offset", fmt.Sprint(m.GetOffset()))
	case *messages.ClusterEvent_TreeNodeReplaced:
		m := e.TreeNodeReplaced
		return fields("TreeNodeReplaced", "reduce", m.GetReduce(), "position", fmt.Sprint(m.GetPosition()), "failed", m.GetFailed(), "replacement", m.GetReplacement())
	case *messages.ClusterEvent_AncestorsInvalidated:
		m := e.AncestorsInvalidated
		return fields("AncestorsInvalidated", "reduce", m.GetReduce(), "positions", strings.Trim(fmt.Sprint(m.GetPositions()), "[]"))
	case *messages.ClusterEvent_ShardRebuilt:
		m := e.ShardRebuilt
		return fields("ShardRebuilt", "shard", m.GetShard(), "host", m.GetHost())
	case *messages.ClusterEvent_ReduceDone:
		m := e.ReduceDone
		errText := ""
		if m.GetError() != nil {
			errText = m.GetError().Error()
		}
		return fields("ReduceDone", "reduce", m.GetReduce(), "target", m.GetTarget(), "reduced", strings.Join(m.GetReduced(), ","),
			"elapsed", (time.Duration(m.GetElapsedUs()) * time.Microsecond).String(), "error", errText)
	case *messages.ClusterEvent_AllReduceReplanned:
		m := e.AllReduceReplanned
		return fields("AllReduceReplanned", "reduce", m.GetReduce(), "node", m.GetNode(), "lost", strings.Join(m.GetLost(), ","), "num", fmt.Sprint(m.GetNum()), "from", m.GetFrom())
	case *messages.ClusterEvent_BarrierDeliveryFailed:
		m := e.BarrierDeliveryFailed
		return fields("BarrierDeliveryFailed", "barrier", m.GetBarrier(), "label", m.GetLabel(), "host", m.GetHost(), "reason", m.GetReason(), "manager", m.GetManager())
	case *messages.ClusterEvent_BarrierTookOver:
		m := e.BarrierTookOver
		return fields("BarrierTookOver", "barrier", m.GetBarrier(), "manager", m.GetManager(), "member", m.GetMember(), "epoch", fmt.Sprint(m.GetEpoch()))
	case *messages.ClusterEvent_Dropped:
		return fields("dropped", "count", fmt.Sprint(e.Dropped.GetCount()))
	}
	return "unknown"
}

// fields is kind followed by the non-empty key=value pairs of kv, a
// value with blanks quoted.
func fields(kind string, kv ...string) string {
	var b strings.Builder
	b.WriteString(kind)
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			continue
		}
		v := kv[i+1]
		if strings.ContainsAny(v, " \t\"") {
			v = fmt.Sprintf("%q", v)
		}
		fmt.Fprintf(&b, " %s=%s", kv[i], v)
	}
	return b.String()
}
