package sim

import (
	"encoding/json"
	"testing"

	"github.com/hoplite-go/hoplite/internal/directory"
)

// deputyCfg is cfg with n/16 Locate deputies (at least 2).
func deputyCfg(scenario string, n int, size int64, seed uint64) Config {
	c := cfg(scenario, n, size, seed)
	c.Params.Deputies = max(2, n/16)
	return c
}

// straightCfg is cfg with every Locate sent straight to its shard.
func straightCfg(scenario string, n int, size int64, seed uint64) Config {
	c := cfg(scenario, n, size, seed)
	c.Params.Deputies = -1
	return c
}

// TestLocateDeputiesSpreadASmallBroadcast: to 256 hosts, a 1 KiB
// broadcast's Locates reach its shard's home in batches from 16 deputies,
// not one by one: the home takes in fewer messages than there are
// receivers, the broadcast takes less time than with every Locate sent
// straight, and every copy holds the creator's bytes (run's invariants).
func TestLocateDeputiesSpreadASmallBroadcast(t *testing.T) {
	const n = 256
	straight := run(t, straightCfg("broadcast", n, 1<<10, 1))
	deputies := run(t, deputyCfg("broadcast", n, 1<<10, 1))
	if straight.DeputyBatches != 0 {
		t.Fatalf("%d deputy batches without deputies", straight.DeputyBatches)
	}
	if deputies.DeputyBatches == 0 || deputies.DeputyBatches >= n-1 {
		t.Fatalf("%d batches for %d receivers: want some, and fewer than the receivers", deputies.DeputyBatches, n-1)
	}
	if deputies.Time >= straight.Time {
		t.Errorf("%v through deputies, %v straight: want shorter", deputies.Time, straight.Time)
	}
}

// TestLocateDeputiesLeaveAStreamedBroadcast: a streamed object's
// answers (each a sender of its own) go back from the home one by one as
// the table makes them, not held for their batch, and once a deputy saw
// one it passes the object's Locates on as they come: a broadcast of 4
// MiB to 64 hosts through deputies takes within 2 % of its time with
// every Locate sent straight.
func TestLocateDeputiesLeaveAStreamedBroadcast(t *testing.T) {
	const n = 64
	straight := run(t, straightCfg("broadcast", n, 4<<20, 1))
	deputies := run(t, deputyCfg("broadcast", n, 4<<20, 1))
	if deputies.DeputyBatches == 0 {
		t.Fatal("no Locate went through a deputy")
	}
	if float64(deputies.Time) > 1.02*float64(straight.Time) {
		t.Errorf("%v through deputies, %v straight: want within 2%%", deputies.Time, straight.Time)
	}
}

// TestLocateDeputiesSurviveTheirDeaths: the object's shard home and its
// first deputy die halfway through a small broadcast to 64 hosts (and,
// with other seeds, three hosts more): the receivers whose Locates were
// at either ask again, through a live deputy and at the shard's new home,
// and every Get ends with the creator's bytes (run's invariants). The
// same seed gives the same outcome.
func TestLocateDeputiesSurviveTheirDeaths(t *testing.T) {
	const n = 64
	home := directory.ShardIndex("object", DefaultParams(n).Shards) % n
	for seed := uint64(1); seed <= 3; seed++ {
		c := deputyCfg("broadcast", n, 1<<10, seed)
		c.KillHosts, c.KillAt = []int{home, (home + 1) % n}, 0.5
		if seed > 1 {
			c.Kill = 3
		}
		o := run(t, c)
		again := run(t, c)
		a, _ := json.Marshal(o)
		b, _ := json.Marshal(again)
		if string(a) != string(b) {
			t.Errorf("seed %d: two runs differ:\n%s\n%s", seed, a, b)
		}
	}
}

// Members form 16 deputy groups by default from 512 on, and none below
// (directory.LocateDeputies): the simulator's default is theirs.
func TestDeputiesByDefaultFrom512Hosts(t *testing.T) {
	for _, c := range []struct{ n, want int }{{64, 0}, {511, 0}, {512, 16}, {1024, 16}} {
		if got := DefaultParams(c.n).deputies(); got != c.want {
			t.Errorf("N=%d: %d deputy groups by default, want %d", c.n, got, c.want)
		}
	}
	p := DefaultParams(1024)
	p.Deputies = -1
	if p.deputies() != 0 {
		t.Error("Deputies -1 still forms groups")
	}
}
