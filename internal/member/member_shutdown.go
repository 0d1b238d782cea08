package member

import (
	"context"
	"errors"
	"fmt"
)

// Done is closed when the member has stopped: by Stop or Leave, or by
// itself (the others declared it failed; Err says so).
func (m *Member) Done() <-chan struct{} { return m.done }

// Err is why the member stopped by itself, or nil.
func (m *Member) Err() error {
	m.errMu.Lock()
	defer m.errMu.Unlock()
	return m.err
}

// fail stops the member on its own: the others declared it failed, and a
// failed member does not come back under the same incarnation.
func (m *Member) fail(err error) {
	m.errMu.Lock()
	if m.err == nil {
		m.err = err
	}
	m.errMu.Unlock()
	m.log.WithError(err).Error("member stopping")
	// Not a leave: the others declared it failed already.
	go m.teardown(false)
}

// Stop leaves the cluster and stops the member: Leave, bounded by
// DefaultTimeout, for a program that has no use for the lost objects'
// ids (they are logged). For the other members it is a leave, not a
// failure: they move its shards and spread no failure notice.
func (m *Member) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.DefaultTimeout)
	defer cancel()
	_, _ = m.Leave(ctx)
}

// Leave leaves the cluster gracefully: the directory shards move off this
// member while its store still serves their rebuild, objects whose only
// copy is here are reported lost (deleted from the directory and logged,
// so Gets of them fail at once instead of waiting), then the member stops.
// A member that is the last of its cluster hands nothing off: everything
// it holds is lost. It returns the ids of the lost objects. A ctx
// without a deadline gets DefaultTimeout. A second Leave (or Stop) waits
// for the first, within ctx, and returns no ids.
func (m *Member) Leave(ctx context.Context) ([]string, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, m.cfg.DefaultTimeout)
		defer cancel()
	}
	first := false
	m.leaveOnce.Do(func() { first = true })
	select {
	case <-m.done:
		first = false // stopped already (crashed, expelled): nothing to leave
	default:
	}
	if !first {
		select {
		case <-m.done:
			return nil, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the member to stop: %w", ctx.Err())
		}
	}
	lost, err := m.leave(ctx)
	m.teardown(true)
	return lost, err
}

// quiesce makes this member ignore the departure of every other one:
// the whole cluster stops (Local.Stop), and members that stop together
// neither failed nor left. No failure notice, no moved or rebuilt
// shard, no NodeFailed.
func (m *Member) quiesce() {
	m.closing.Store(true)
	m.failures.Close()
}

func (m *Member) teardown(graceful bool) {
	m.stopOnce.Do(func() {
		m.failures.Close()
		if m.pc != nil && graceful {
			// Tell the provider first: the others see us leave.
			safely(func() { _ = m.provider.Shutdown(true) })
		}
		if node := m.node.Load(); node != nil {
			if err := stopUntilGone(m.system, node); err != nil {
				m.log.WithError(err).Warn("the member's actors did not stop in time")
			}
		}
		close(m.quit)
		if m.system != nil {
			for _, s := range m.subs {
				m.system.EventStream.Unsubscribe(s)
			}
		}
		if m.closeData != nil {
			m.closeData()
		}
		if m.pc == nil && m.provider != nil {
			// Created but never started (a later step of the start
			// failed): it still holds a client connection.
			safely(func() { _ = m.provider.Shutdown(false) })
		}
		if m.pc != nil {
			if !graceful {
				safely(func() { _ = m.provider.Shutdown(true) })
			}
			safely(func() { m.pc.Gossip.Shutdown() })
			if m.pc.IdentityLookup != nil {
				safely(m.pc.IdentityLookup.Shutdown)
			}
			if m.pc.Remote != nil {
				safely(func() { m.pc.Remote.Shutdown(false) })
			}
		}
		if m.liveView != nil {
			m.liveView.hub.Close()
		}
		if m.health != nil {
			_ = m.health.Close()
			_ = m.health.Listener.Close() // when the provider never started
		}
		if m.system != nil {
			m.system.Shutdown()
		}
		if m.releaseLag != nil {
			m.releaseLag()
		}
		m.doneOnce.Do(func() { close(m.done) })
	})
}

// crash stops the member the way SIGKILL stops a process: first nobody
// can reach it any more (its remote endpoints close, its data plane stops
// serving, its membership entry goes), then its actors, which can no
// longer tell anyone, are stopped to free the process's resources. The
// other members learn of it only through their own failure path.
func (m *Member) crash(gone error) {
	m.stopOnce.Do(func() {
		m.crashed.Store(true) // first: nothing it runs reaches another member any more
		m.failures.Close()
		if m.pc != nil && m.pc.Remote != nil {
			safely(func() { m.pc.Remote.Shutdown(false) })
		}
		if m.closeData != nil {
			m.closeData()
		}
		m.silenced.Store(true)
		if m.store != nil {
			m.store.Fail(gone)
		}
		if m.provider != nil {
			safely(func() { _ = m.provider.Shutdown(false) })
		}
		if node := m.node.Load(); node != nil {
			if err := stopUntilGone(m.system, node); err != nil {
				m.log.WithError(err).Warn("crash: the member's actors did not stop in time")
			}
		}
		close(m.quit)
		for _, s := range m.subs {
			m.system.EventStream.Unsubscribe(s)
		}
		if m.pc != nil {
			safely(func() { m.pc.Gossip.Shutdown() })
			if m.pc.IdentityLookup != nil {
				safely(m.pc.IdentityLookup.Shutdown)
			}
		}
		if m.system != nil {
			m.system.Shutdown()
		}
		if m.releaseLag != nil {
			m.releaseLag()
		}
		m.doneOnce.Do(func() { close(m.done) })
	})
}

// safely runs a Proto.Actor shutdown step that may panic on a half-started
// cluster.
func safely(f func()) {
	defer func() { _ = recover() }()
	f()
}

var errNotRunning = errors.New("member is not running")
