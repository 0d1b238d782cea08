package storeproto

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/messages"
)

var putT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const putRequester = "requester"

func putReq(mod func(*PutRequest)) PutRequest {
	r := PutRequest{RequestID: 5, ObjectID: "x", Size: 100, Fingerprint: 42, Creator: &messages.NodeRef{NodeId: "n0"},
		Requester: putRequester, Deadline: putT0.Add(time.Second)}
	if mod != nil {
		mod(&r)
	}
	return r
}

// answerOf returns the one answer a step sends to the requester, and
// whether there was one.
func answerOf(t *testing.T, s PutStep) (*messages.Error, bool) {
	t.Helper()
	var got []any
	for _, snd := range s.Sends {
		if snd.To == putRequester {
			got = append(got, snd.Msg)
		}
	}
	switch len(got) {
	case 0:
		return nil, false
	case 1:
		switch m := got[0].(type) {
		case *messages.PutReply:
			return m.GetError(), true
		case *messages.StoreReducedReply:
			return m.GetError(), true
		}
		t.Fatalf("answer %T", got[0])
	}
	t.Fatalf("%d answers in one step", len(got))
	return nil, false
}

// shardSends returns what a step sends to the object's shard.
func shardSends(s PutStep) []any {
	var out []any
	for _, snd := range s.Sends {
		if snd.To == directory.ShardOf("x") {
			out = append(out, snd.Msg)
		}
	}
	return out
}

func startedPut(t *testing.T, req PutRequest) *PutRegistration {
	t.Helper()
	p := NewPutRegistration(req)
	s := p.onStart(putT0)
	sh := shardSends(s)
	if len(sh) != 1 {
		t.Fatalf("start sends %v to the shard, want one CreateObject", sh)
	}
	c, ok := sh[0].(*messages.CreateObject)
	if !ok || c.GetRequestId() != req.RequestID || c.GetObjectId() != "x" || c.GetSize() != 100 || c.GetFingerprint() != 42 ||
		c.GetReduceId() != req.ReduceID || c.GetHasInline() != req.Inline {
		t.Fatalf("start sends %v", sh[0])
	}
	if len(s.Timers) != 1 || !s.Timers[0].At.Equal(req.Deadline) || s.Timers[0].Msg != (PutDeadline{ID: req.RequestID}) {
		t.Fatalf("start arms %v, want the deadline", s.Timers)
	}
	return p
}

func wantPublish(t *testing.T, s PutStep, creator bool) {
	t.Helper()
	sh := shardSends(s)
	if len(sh) != 1 {
		t.Fatalf("sends %v to the shard, want one PublishLocation", sh)
	}
	pl, ok := sh[0].(*messages.PublishLocation)
	if !ok || pl.GetState() != messages.LocationState_COMPLETE || pl.GetCreator() != creator || pl.GetSize() != 100 || pl.GetFingerprint() != 42 {
		t.Fatalf("sends %v, want PublishLocation COMPLETE creator=%v", sh[0], creator)
	}
}

func wantUnpublish(t *testing.T, s PutStep) {
	t.Helper()
	sh := shardSends(s)
	if len(sh) != 1 {
		t.Fatalf("sends %v to the shard, want one UnpublishLocation", sh)
	}
	if u, ok := sh[0].(*messages.UnpublishLocation); !ok || u.GetNode().GetNodeId() != "n0" {
		t.Fatalf("sends %v, want UnpublishLocation of n0", sh[0])
	}
}

func wantAnswer(t *testing.T, s PutStep, code error) {
	t.Helper()
	err, ok := answerOf(t, s)
	if !ok || !s.Done {
		t.Fatalf("step %+v does not answer", s)
	}
	if code == nil && err != nil || code != nil && !errors.Is(err, code) {
		t.Fatalf("answer %v, want %v", err, code)
	}
}

func TestPutRegistrationSucceeds(t *testing.T) {
	p := startedPut(t, putReq(nil))
	s := p.onReply(putT0.Add(10*time.Millisecond), &messages.CreateObjectReply{ObjectId: "x", RequestId: 5})
	if s.Latency != 5*time.Millisecond {
		t.Errorf("latency %v, want half the round trip", s.Latency)
	}
	if !s.CopyIn || s.Readable || !s.ForgetDeleted || s.Abort != nil || s.Done || len(s.Sends) != 0 {
		t.Fatalf("registered: %+v, want a copy-in only", s)
	}
	if s := p.onDeadline(); s.Done || s.Abort != nil || len(s.Sends) != 0 {
		t.Fatalf("deadline during the copy-in: %+v, want nothing (the copy is not cut short)", s)
	}
	s = p.onCopiedIn(true, nil)
	wantPublish(t, s, true)
	wantAnswer(t, s, nil)
}

func TestPutRegistrationSteps(t *testing.T) {
	deleted := messages.Errorf(messages.ErrorCode_DELETED, "deleted")
	conflict := messages.Errorf(messages.ErrorCode_CONFLICT, "other bytes")
	tests := []struct {
		name  string
		mod   func(*PutRequest)
		steps func(t *testing.T, p *PutRegistration) PutStep
		check func(t *testing.T, s PutStep)
	}{{
		name: "an inline object is readable from its registration on",
		mod:  func(r *PutRequest) { r.Inline, r.InlineData = true, make([]byte, 100) },
		steps: func(t *testing.T, p *PutRegistration) PutStep {
			return p.onReply(putT0, &messages.CreateObjectReply{RequestId: 5})
		},
		check: func(t *testing.T, s PutStep) {
			if !s.CopyIn || !s.Readable {
				t.Fatalf("%+v, want a readable copy-in", s)
			}
		},
	}, {
		name: "the shard's refusal fails the Put and drops the copy",
		steps: func(t *testing.T, p *PutRegistration) PutStep {
			return p.onReply(putT0, &messages.CreateObjectReply{RequestId: 5, Error: conflict})
		},
		check: func(t *testing.T, s PutStep) {
			if !errors.Is(s.Abort, messages.ErrConflict) || s.CopyIn || s.ForgetDeleted || len(shardSends(s)) != 0 {
				t.Fatalf("%+v, want abort without copy or shard sends", s)
			}
			wantAnswer(t, s, messages.ErrConflict)
		},
	}, {
		name: "an object that existed elsewhere is an idempotent success without a copy here",
		steps: func(t *testing.T, p *PutRegistration) PutStep {
			return p.onReply(putT0, &messages.CreateObjectReply{RequestId: 5, Existed: true})
		},
		check: func(t *testing.T, s PutStep) {
			if !errors.Is(s.Abort, messages.ErrNotFound) || s.CopyIn || !s.ForgetDeleted {
				t.Fatalf("%+v, want the copy dropped", s)
			}
			wantAnswer(t, s, nil)
		},
	}, {
		name: "a promoted placeholder of an object that existed keeps the bytes unpinned",
		mod:  func(r *PutRequest) { r.Promoted = true },
		steps: func(t *testing.T, p *PutRegistration) PutStep {
			s := p.onReply(putT0, &messages.CreateObjectReply{RequestId: 5, Existed: true})
			if !s.Unpin || !s.CopyIn || !s.Readable || s.Abort != nil {
				t.Fatalf("%+v, want unpin and a readable copy-in", s)
			}
			return p.onCopiedIn(true, nil)
		},
		check: func(t *testing.T, s PutStep) {
			wantPublish(t, s, false)
			wantAnswer(t, s, nil)
		},
	}, {
		name: "no reply by the deadline: TIMEOUT, the copy dropped and withdrawn",
		steps: func(t *testing.T, p *PutRegistration) PutStep {
			s := p.onDeadline()
			if !errors.Is(s.Abort, messages.ErrTimeout) {
				t.Fatalf("abort %v, want TIMEOUT", s.Abort)
			}
			wantUnpublish(t, s)
			wantAnswer(t, s, messages.ErrTimeout)
			// The shard's answer after all changes nothing.
			return p.onReply(putT0, &messages.CreateObjectReply{RequestId: 5})
		},
		check: func(t *testing.T, s PutStep) {
			if s.CopyIn || s.Done || len(s.Sends) != 0 || s.Latency != 0 {
				t.Fatalf("late reply: %+v, want nothing", s)
			}
		},
	}, {
		name: "the shard stopped: UNAVAILABLE, withdrawn",
		steps: func(t *testing.T, p *PutRegistration) PutStep {
			return p.onFailed(messages.Errorf(messages.ErrorCode_UNAVAILABLE, "gone"))
		},
		check: func(t *testing.T, s PutStep) {
			wantUnpublish(t, s)
			wantAnswer(t, s, messages.ErrUnavailable)
		},
	}, {
		name: "a reply to another request is not ours",
		steps: func(t *testing.T, p *PutRegistration) PutStep {
			return p.onReply(putT0, &messages.CreateObjectReply{RequestId: 6, Error: conflict})
		},
		check: func(t *testing.T, s PutStep) {
			if s.Done || s.Abort != nil || len(s.Sends) != 0 {
				t.Fatalf("%+v, want nothing", s)
			}
		},
	}, {
		name: "deleted mid-copy before readable fails DELETED, unpublished",
		steps: func(t *testing.T, p *PutRegistration) PutStep {
			p.onReply(putT0, &messages.CreateObjectReply{RequestId: 5})
			return p.onCopiedIn(false, deleted)
		},
		check: func(t *testing.T, s PutStep) {
			if len(shardSends(s)) != 0 {
				t.Fatalf("sends %v to the shard, want none", shardSends(s))
			}
			wantAnswer(t, s, messages.ErrDeleted)
		},
	}, {
		name: "deleted after readable succeeds without a publish",
		steps: func(t *testing.T, p *PutRegistration) PutStep {
			p.onReply(putT0, &messages.CreateObjectReply{RequestId: 5})
			return p.onCopiedIn(false, nil)
		},
		check: func(t *testing.T, s PutStep) {
			if len(shardSends(s)) != 0 {
				t.Fatalf("sends %v to the shard, want none", shardSends(s))
			}
			wantAnswer(t, s, nil)
		},
	}, {
		name: "StoreReduced registers for its Reduce and answers StoreReducedReply",
		mod:  func(r *PutRequest) { r.ReduceID, r.Reduced = "red", true },
		steps: func(t *testing.T, p *PutRegistration) PutStep {
			p.onReply(putT0, &messages.CreateObjectReply{RequestId: 5})
			return p.onCopiedIn(true, nil)
		},
		check: func(t *testing.T, s PutStep) {
			for _, snd := range s.Sends {
				if r, ok := snd.Msg.(*messages.StoreReducedReply); ok && r.GetReduceId() == "red" && r.GetError() == nil {
					return
				}
			}
			t.Fatalf("sends %v, want a StoreReducedReply", s.Sends)
		},
	}, {
		name: "a tell is answered to nobody",
		mod:  func(r *PutRequest) { r.Requester = nil },
		steps: func(t *testing.T, p *PutRegistration) PutStep {
			return p.onDeadline()
		},
		check: func(t *testing.T, s PutStep) {
			if !s.Done || len(s.Sends) != 1 {
				t.Fatalf("%+v, want done with only the UnpublishLocation", s)
			}
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := startedPut(t, putReq(tc.mod))
			tc.check(t, tc.steps(t, p))
		})
	}
}

// TestPutRegistrationRandomEvents feeds a registration seeded random
// sequences of replies (its own, others', duplicates), failures,
// deadlines and copy-in reports, and checks the protocol's promises: the
// requester gets exactly one answer; a copy is published only after a
// successful registration and copy-in, with a success answer; a failed
// registration is withdrawn; no copy-in starts after the answer.
func TestPutRegistrationRandomEvents(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			p := startedPut(t, putReq(func(r *PutRequest) { r.Promoted = rng.IntN(2) == 0 }))
			answers, copies, published := 0, 0, false
			copying := false
			for step := 0; step < 12; step++ {
				var s PutStep
				switch rng.IntN(6) {
				case 0:
					var e *messages.Error
					if rng.IntN(3) == 0 {
						e = messages.Errorf(messages.ErrorCode_CONFLICT, "no")
					}
					s = p.onReply(putT0, &messages.CreateObjectReply{RequestId: uint64(4 + rng.IntN(3)), Error: e, Existed: rng.IntN(3) == 0})
				case 1:
					s = p.onDeadline()
				case 2:
					s = p.onFailed(messages.Errorf(messages.ErrorCode_UNAVAILABLE, "gone"))
				default:
					if !copying {
						continue // the shell reports only copy-ins it started
					}
					copying = false
					var e *messages.Error
					if rng.IntN(2) == 0 {
						e = messages.Errorf(messages.ErrorCode_DELETED, "deleted")
					}
					s = p.onCopiedIn(rng.IntN(2) == 0, e)
				}
				if s.CopyIn {
					if answers > 0 {
						t.Fatalf("copy-in after the answer")
					}
					copies++
					copying = true
				}
				if err, ok := answerOf(t, s); ok {
					answers++
					for _, m := range shardSends(s) {
						switch m.(type) {
						case *messages.PublishLocation:
							published = true
							if err != nil {
								t.Fatalf("published with a failed answer %v", err)
							}
						case *messages.UnpublishLocation:
							if err == nil || s.Abort == nil {
								t.Fatalf("withdrawn without failing and dropping the copy")
							}
						}
					}
				} else if len(s.Sends) != 0 {
					t.Fatalf("sends %v without answering", s.Sends)
				}
			}
			if answers > 1 || copies > 1 {
				t.Fatalf("%d answers, %d copy-ins", answers, copies)
			}
			if published && copies != 1 {
				t.Fatalf("published without a copy-in")
			}
			if answers == 0 && !copying {
				// Only a copy-in under way may hold the answer back; the
				// deadline answers a registration that got no reply.
				if s := p.onDeadline(); !s.Done {
					t.Fatalf("registration neither answered nor copying, and the deadline does not end it")
				}
			}
		})
	}
}

// A registration asked to be recorded COMPLETE (a fast Put's) says so in
// its CreateObject. Once the directory did, the copy-in's end publishes
// nothing and a failed copy-in withdraws the copy; once it did not (a
// shard built before the field), the copy is published COMPLETE as ever.
func TestPutRecordedCompletePublishesNothingAfterTheCopyIn(t *testing.T) {
	req := putReq(func(r *PutRequest) { r.Inline, r.InlineData, r.Complete = true, make([]byte, 100), true })
	for _, recorded := range []bool{true, false} {
		p := NewPutRegistration(req)
		start := p.onStart(putT0)
		if c, ok := shardSends(start)[0].(*messages.CreateObject); !ok || !c.GetComplete() {
			t.Fatalf("start sends %v, want a CreateObject asking to record the copy COMPLETE", shardSends(start))
		}
		s := p.onReply(putT0, &messages.CreateObjectReply{ObjectId: "x", RequestId: req.RequestID, RecordedComplete: recorded})
		if !s.CopyIn || s.Recorded != recorded {
			t.Fatalf("recorded %v: reply step %+v, want the copy-in and Recorded %v", recorded, s, recorded)
		}
		done := p.onCopiedIn(true, nil)
		if e, ok := answerOf(t, done); !ok || e != nil {
			t.Fatalf("recorded %v: answer %v, %v, want OK", recorded, e, ok)
		}
		if recorded {
			if sh := shardSends(done); len(sh) != 0 {
				t.Errorf("recorded: the copy-in's end sends %v to the shard, want nothing", sh)
			}
		} else {
			wantPublish(t, done, true)
		}
	}
	p := NewPutRegistration(req)
	p.onStart(putT0)
	p.onReply(putT0, &messages.CreateObjectReply{ObjectId: "x", RequestId: req.RequestID, RecordedComplete: true})
	failed := p.onCopiedIn(false, messages.Errorf(messages.ErrorCode_INTERNAL, "the store failed"))
	if e, ok := answerOf(t, failed); !ok || e == nil {
		t.Fatalf("a failed copy-in answers %v, %v, want its error", e, ok)
	}
	wantUnpublish(t, failed)
	// A registration that does not ask (the node's own Puts) never is.
	if c, ok := shardSends(NewPutRegistration(putReq(func(r *PutRequest) { r.Inline, r.InlineData = true, make([]byte, 100) })).onStart(putT0))[0].(*messages.CreateObject); !ok || c.GetComplete() {
		t.Errorf("an ordinary inline Put's CreateObject asks to be recorded COMPLETE")
	}
}
