// Package revokeactor holds the revoke broadcaster actor: the supervised shell
// around one member's pure revoke.Broadcaster (package
// github.com/hoplite-go/hoplite/internal/revoke). It sends the core's decisions as
// RevokeNotice messages to the members' broadcaster actors and delivers
// each notice locally once.
package revokeactor
