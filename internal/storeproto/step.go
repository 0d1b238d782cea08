package storeproto

import (
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// Events of a Deletion beside the shard's *messages.DeleteObjectReply
// and its own timer, DeleteDeadline.
type (
	// DeleteStart asks the shard and arms the deadline.
	DeleteStart struct{}
	// DeleteDropped: the store node named Node dropped its copy (or is
	// gone).
	DeleteDropped struct{ Node string }
	// DeleteFailed ends the Delete with Err (the node stops, or the
	// shard could not be asked).
	DeleteFailed struct{ Err *messages.Error }
)

// Step applies one event: DeleteStart, the shard's
// *messages.DeleteObjectReply, DeleteDropped, DeleteFailed or the
// DeleteDeadline timer coming back. The Delete reads no clock: now is
// taken for the one contract every core keeps. Any other event asks for
// nothing.
func (d *Deletion) Step(_ time.Time, ev any) DeleteStep {
	switch e := ev.(type) {
	case DeleteStart:
		return d.onStart()
	case *messages.DeleteObjectReply:
		return d.onReply(e)
	case DeleteDropped:
		return d.onDropped(e.Node)
	case DeleteFailed:
		return d.onFailed(e.Err)
	case DeleteDeadline:
		return d.onDeadline()
	}
	return DeleteStep{}
}

// Events of a PutRegistration beside the shard's
// *messages.CreateObjectReply and its own timer, PutDeadline.
type (
	// PutStart sends the CreateObject and arms the deadline.
	PutStart struct{}
	// PutFailed ends the registration with Err.
	PutFailed struct{ Err *messages.Error }
	// PutCopiedIn: the copy-in the step asked for (PutStep.CopyIn)
	// ended, Complete or with Err.
	PutCopiedIn struct {
		Complete bool
		Err      *messages.Error
	}
)

// Step applies one event at now: PutStart, the shard's
// *messages.CreateObjectReply, PutFailed, PutCopiedIn or the
// PutDeadline timer coming back. Any other event asks for nothing.
func (p *PutRegistration) Step(now time.Time, ev any) PutStep {
	switch e := ev.(type) {
	case PutStart:
		return p.onStart(now)
	case *messages.CreateObjectReply:
		return p.onReply(now, e)
	case PutFailed:
		return p.onFailed(e.Err)
	case PutCopiedIn:
		return p.onCopiedIn(e.Complete, e.Err)
	case PutDeadline:
		return p.onDeadline()
	}
	return PutStep{}
}

// Events of a PositionRuns beside a newer *messages.ReduceTask and the
// coordinator's *messages.ReduceInvalidate.
type (
	// RunsStart runs the first task (the worker started).
	RunsStart struct{}
	// RunStarted is run Run's report that its output exists (Err nil)
	// or could not be made; Dead says this node's store has failed.
	RunStarted struct {
		Run  uint64
		Err  *messages.Error
		Dead bool
	}
	// RunEnded is run Run's last report; Dead as RunStarted's.
	RunEnded struct {
		Run  uint64
		End  RunEnd
		Dead bool
	}
	// RunsRelease ends the position at the coordinator's word, keeping
	// the output if Keep (the Reduce's result).
	RunsRelease struct{ Keep bool }
	// CoordinatorGone ends the position when its coordinator stopped;
	// TargetComplete keeps a target that is the result.
	CoordinatorGone struct{ TargetComplete bool }
	// RunsStop cancels the active run: the worker is stopping or
	// restarting.
	RunsStop struct{}
)

// Step applies one event: RunsStart, a newer *messages.ReduceTask, a
// *messages.ReduceInvalidate, RunStarted, RunEnded, RunsRelease,
// CoordinatorGone or RunsStop. The runs read no clock: now is taken for
// the one contract every core keeps. Any other event asks for nothing.
func (p *PositionRuns) Step(_ time.Time, ev any) RunStep {
	switch e := ev.(type) {
	case RunsStart:
		return p.onStart()
	case *messages.ReduceTask:
		return p.onNewTask(e)
	case *messages.ReduceInvalidate:
		return p.onInvalidate(e.GetGeneration())
	case RunStarted:
		return p.onRunStarted(e.Run, e.Err, e.Dead)
	case RunEnded:
		return p.onRunEnded(e.Run, e.End, e.Dead)
	case RunsRelease:
		return p.onRelease(e.Keep)
	case CoordinatorGone:
		return p.onCoordinatorGone(e.TargetComplete)
	case RunsStop:
		return p.onStop()
	}
	return RunStep{}
}

// Events of a FetchProtocol. State is what the node's store holds of
// the object when the event comes (the shell reads it; the protocol
// owns no store).
type (
	// FetchStart starts the fetch.
	FetchStart struct{ State ObjectState }
	// FetchStoreDone is the store's answer to the operation the last
	// step asked for (FetchOutput.Store).
	FetchStoreDone struct {
		Result StoreResult
		State  ObjectState
	}
	// FetchLocated is the shard's answer to a Locate.
	FetchLocated struct {
		Reply *messages.LocateReply
		State ObjectState
	}
	// FetchLocateFailed: the Locate of Attempt could not be asked or
	// answered.
	FetchLocateFailed struct {
		Attempt uint64
		Err     error
		State   ObjectState
	}
	// FetchTimed is the fetch's Timer coming back.
	FetchTimed struct {
		Timer FetchTimer
		State ObjectState
	}
	// FetchSenderFailed: the store node named Node failed.
	FetchSenderFailed struct{ Node string }
	// FetchStreamEnded: stream Stream ended (Err nil: the object is
	// whole).
	FetchStreamEnded struct {
		Stream uint64
		Err    error
		State  ObjectState
	}
	// FetchIntoStreamEnded: stream Stream, into a caller's buffer,
	// ended with UpTo bytes written.
	FetchIntoStreamEnded struct {
		Stream uint64
		UpTo   int64
		Err    error
	}
	// FetchStop ends the fetch (the node stops).
	FetchStop struct{}
	// FetchDropped: the copy being written was dropped from the store.
	FetchDropped struct{}
)

// Step applies one of the events above at now. Any other event asks
// for nothing.
func (p *FetchProtocol) Step(now time.Time, ev any) FetchOutput {
	switch e := ev.(type) {
	case FetchStart:
		return p.onStart(e.State, now)
	case FetchStoreDone:
		return p.onStoreDone(e.Result, e.State, now)
	case FetchLocated:
		return p.onLocated(e.Reply, e.State, now)
	case FetchLocateFailed:
		return p.onLocateFailed(e.Attempt, e.Err, e.State, now)
	case FetchTimed:
		return p.onTimer(e.Timer, e.State, now)
	case FetchSenderFailed:
		return p.onSenderFailed(e.Node)
	case FetchStreamEnded:
		return p.onStreamEnded(e.Stream, e.Err, e.State, now)
	case FetchIntoStreamEnded:
		return p.onIntoStreamEnded(e.Stream, e.UpTo, e.Err, now)
	case FetchStop:
		return p.onStop()
	case FetchDropped:
		return p.onDropped()
	}
	return FetchOutput{}
}
