package directory

// DeputyMinMembers is the cluster size from which members send their
// Locates of other members' shards through Locate deputies by default,
// and DefaultLocateDeputies how many deputy groups they form then
// (internal/member/locate_deputy.go). The simulator found deputies
// slower under 128 hosts (a hop more for every Locate) and 16 groups
// taking a 1 KiB broadcast to 1,024 hosts from 18.1 to 4.6 ms, with the
// 32 MiB collectives within 0.2 % (docs/simulator.md).
const (
	DeputyMinMembers      = 128
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
