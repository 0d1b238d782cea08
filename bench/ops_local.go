package bench

import (
	"context"
	"time"

	"github.com/hoplite-go/hoplite/cluster"
)

// opsLocal is the in-process mode: node 0 of a two-member embedded
// cluster calls, node 1 is the other member.
type opsLocal struct {
	l         *cluster.Local
	caller    *cluster.Member
	other     *cluster.Member
	otherData string // the other member's data address
}

func openOpsLocal(o *OpsOptions) (*opsLocal, error) {
	l, err := cluster.StartLocal(cluster.Config{Nodes: 2, Capacity: 1 << 30, DefaultTimeout: o.OpTimeout, Log: o.Log})
	if err != nil {
		return nil, err
	}
	b := &opsLocal{l: l, caller: l.Member(0), other: l.Member(1)}
	b.otherData = b.other.DataAddress()
	return b, nil
}

func (b *opsLocal) put(ctx context.Context, id string, data []byte) error {
	return b.caller.Client().Put(ctx, id, data)
}

func (b *opsLocal) putOther(ctx context.Context, d DataSpec, data []byte) error {
	return b.other.Client().Put(ctx, d.ID, data)
}

func (b *opsLocal) get(ctx context.Context, id string) ([]byte, error) {
	return b.caller.Client().Get(ctx, id)
}

func (b *opsLocal) del(ctx context.Context, id string) error {
	return b.caller.Client().Delete(ctx, id)
}

func (b *opsLocal) ping(ctx context.Context) error { return b.caller.PingData(ctx, b.otherData) }

func (b *opsLocal) otherShard(id string) bool { return b.caller.ShardOwner(id) == b.other.ID() }

// cpu is the process's: both members, and the callers.
func (b *opsLocal) cpu(context.Context) (time.Duration, error) { return processCPU() }

func (b *opsLocal) close() { b.l.Stop() }
