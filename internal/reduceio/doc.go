// Package reduceio holds the streams a reduce worker reads and the loop
// that combines them: Combine (a position's reduction, chunk by chunk,
// into its output's Writer), LocalStream (an object of the node's own
// store as a Stream), NewSliceReader (a slice of an object, as a sliced
// AllReduce's chains read it), CopyStream and CopyStreamLazy (a whole
// stream into a buffer). They are the machinery of internal/actors/storeactor's
// reduce worker, not part of package storenode's API.
package reduceio
