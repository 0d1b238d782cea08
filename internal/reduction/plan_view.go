package reduction

import "github.com/hoplite-go/hoplite/messages"

// Plan is the plan the Reduction chose, as its reply will carry it: nil
// until the first arrival tells the sources' size (or while a knee
// policy gates). The caller must not change it.
func (r *Reduction) Plan() *messages.ReducePlan { return r.plan }
