/*
Package eventstream implements a publisher / subscriber.
*/
package eventstream
