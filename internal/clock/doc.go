// Package clock sleeps until a point in time more precisely than a Go
// timer does on an idle process.
package clock
