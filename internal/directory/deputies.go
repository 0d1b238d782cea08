package directory

// DeputyMinMembers is the cluster size from which members send their
// Locates of other members' shards through Locate deputies by default,
// and DefaultLocateDeputies how many deputy groups they form then
// (internal/member/locate_deputy.go). In the simulator 16 groups took a
// 1 KiB broadcast from 7.14 to 2.69 ms at 512 hosts and from 18.1 to
// 4.93 ms at 1,024, every 32 MiB collective within 0.3 %; at 128 and
// 256 hosts they took it from 1.63 to 1.08 and from 3.06 to 1.56 ms,
// but an AllReduce of 32 MiB lost 6 % and 1.9 %: the first Locates
// that follow a probe of its result, held 1 ms at the deputy, change
// the order in which its broadcast's receivers reach the shard
// (docs/simulator.md).
const (
	DeputyMinMembers      = 512
	DefaultLocateDeputies = 16
)

// LocateDeputies is how many deputy groups a cluster of n members forms
// when it is configured with r (MemberConfig.LocateDeputies): r itself if
// positive, none if negative, and for 0 DefaultLocateDeputies from
// DeputyMinMembers members on, none below. Fewer than 2 means none.
func LocateDeputies(r, n int) int {
	switch {
	case r < 0:
		return 0
	case r > 0:
		return r
	case n >= DeputyMinMembers:
		return DefaultLocateDeputies
	}
	return 0
}
