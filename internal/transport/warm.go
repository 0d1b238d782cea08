package transport

// IdleConns is how many idle connections to addr this transport holds in
// its pool for the next stream or control request: a warmed member's
// connections to its peers (cluster's warm-up pings them in).
func (t *TCP) IdleConns(addr string) int { return t.poolSize(addr) }
