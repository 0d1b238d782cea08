package memberwatch

import "time"

// QuietFactor is how many base intervals a member may wait between
// rounds once nothing changes.
const QuietFactor = 10

// Pace spaces a member's rounds: every base interval while something
// changes, twice as long after each round that changed nothing, up to
// QuietFactor times base. Kick brings it back to base (the shell starts
// a round at once): a member heard of a change that its checks will show.
type Pace struct {
	base, max, cur time.Duration
}

// NewPace returns a Pace of base interval base.
func NewPace(base time.Duration) Pace {
	return Pace{base: base, max: QuietFactor * base, cur: base}
}

// Next is the wait before the round after one that changed (or not)
// something.
func (p *Pace) Next(changed bool) time.Duration {
	if changed {
		p.cur = p.base
	} else {
		p.cur = min(2*p.cur, p.max)
	}
	return p.cur
}

// Kick makes the interval base again.
func (p *Pace) Kick() { p.cur = p.base }

// Current is the interval the last Next gave (or base after a Kick).
func (p *Pace) Current() time.Duration { return p.cur }
