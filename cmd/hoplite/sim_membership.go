package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/hoplite-go/hoplite/sim"
)

// membershipOpts are the flags only the membership scenario reads.
type membershipOpts struct {
	refresh, timeout, spread, idle *time.Duration
	misses, seeds                  *int
}

func membershipFlags(fs *flag.FlagSet) membershipOpts {
	return membershipOpts{
		refresh: fs.Duration("refresh", 200*time.Millisecond, "membership: the members' round interval (a node's --refresh default)"),
		timeout: fs.Duration("health-timeout", 2*time.Second, "membership: a health check's bound"),
		misses:  fs.Int("misses", 3, "membership: checks in a row a member may miss and stay"),
		seeds:   fs.Int("seeds", 3, "membership: endpoints each member is given, the first members' (0: all)"),
		spread:  fs.Duration("start-spread", 0, "membership: members start at random times within this"),
		idle:    fs.Duration("idle", 20*time.Second, "membership: how long the formed cluster idles (its traffic measured) before the kill"),
	}
}

// simMembership runs the membership scenario at each N: formation, a
// kill, a pause (--pause-for; 3s unless given), one table row each.
func simMembership(ctx context.Context, fs *flag.FlagSet, o membershipOpts, ns []int, seed uint64, lat, cost, pauseFor time.Duration,
	jsonPath string, stdout io.Writer) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["pause-for"] {
		pauseFor = 3 * time.Second
	}
	for _, c := range []struct {
		bad bool
		msg string
	}{
		{*o.refresh <= 0, fmt.Sprintf("--refresh %v: want a positive duration", *o.refresh)},
		{*o.timeout <= 0, fmt.Sprintf("--health-timeout %v: want a positive duration", *o.timeout)},
		{*o.misses < 1, fmt.Sprintf("--misses %d: want at least 1", *o.misses)},
		{*o.seeds < 0, fmt.Sprintf("--seeds %d: want 0 (all) or more", *o.seeds)},
		{*o.spread < 0, fmt.Sprintf("--start-spread %v: want 0 or more", *o.spread)},
		{*o.idle <= 0, fmt.Sprintf("--idle %v: want a positive duration", *o.idle)},
		{pauseFor <= 0, fmt.Sprintf("--pause-for %v: want a positive duration", pauseFor)},
		{lat < 0, fmt.Sprintf("--latency %v: want 0 or more", lat)},
		{cost < 0, fmt.Sprintf("--msg-cost %v: want 0 or more", cost)},
	} {
		if c.bad {
			return usageError{c.msg}
		}
	}
	for _, n := range ns {
		if n < 4 || *o.seeds > n {
			return usageError{fmt.Sprintf("--nodes %d: the membership scenario wants at least 4 members and --seeds (%d) of them at most", n, *o.seeds)}
		}
	}
	// A Markdown table, a row as each N is done: a run at 1,024 takes
	// minutes.
	fmt.Fprintln(stdout, "| N | formed | rounds | kill detected | kill known | rounds | paused kept | checks/round | msgs/member/s | B/member/s | CPU/member |")
	fmt.Fprintln(stdout, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	var outs []*sim.MembershipOutcome
	var broke []string
	for _, n := range ns {
		if err := ctx.Err(); err != nil {
			return err
		}
		out, err := sim.RunMembershipContext(ctx, sim.MembershipConfig{N: n, Seed: seed, Refresh: *o.refresh, Timeout: *o.timeout, Misses: *o.misses,
			Latency: lat, MsgCost: cost, Seeds: *o.seeds, StartSpread: *o.spread, Idle: *o.idle, PauseFor: pauseFor})
		if err != nil {
			return fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "sim: "))
		}
		outs = append(outs, out)
		fmt.Fprintf(stdout, "| %d | %v | %d | %v | %v | %d | %v | %.1f | %.1f | %.0f | %.3f %% |\n", n,
			out.Formed.Round(time.Millisecond), out.FormationRounds, out.Detected.Round(time.Millisecond), out.Known.Round(time.Millisecond),
			out.KnownRounds, !out.Expelled, out.Targets, out.IdleMessages, out.IdleBytes, 100*out.IdleCPU)
		for _, v := range out.Violations {
			broke = append(broke, fmt.Sprintf("N=%d: %s", n, v))
		}
	}
	if jsonPath != "" {
		b, err := json.MarshalIndent(outs, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(jsonPath, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if len(broke) > 0 {
		return fmt.Errorf("membership broke an invariant: %s", strings.Join(broke, "; "))
	}
	return nil
}
