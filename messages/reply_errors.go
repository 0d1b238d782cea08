package messages

// Every message with an error field has Err: the field as a plain error,
// nil on success. GetError() is a *Error, and a nil *Error stored in an
// error variable is not a nil error; reply.Err() is what a caller tests
// (`if err := reply.Err(); err != nil`). TestEveryErrorFieldHasErr keeps
// this list whole as messages gain error fields.

// Err is the error field as a plain error: nil on success.
func (x *BarrierClosed) Err() error { return x.GetError().Err() }

// Err is the error field as a plain error: nil on success.
func (x *BarrierCreated) Err() error { return x.GetError().Err() }

// Err is the error field as a plain error: nil on success.
func (x *BarrierRefused) Err() error { return x.GetError().Err() }

// Err is the error field as a plain error: nil on success.
func (x *BarrierReleased) Err() error { return x.GetError().Err() }

// Err is the error field as a plain error: nil on success.
func (x *BarrierStatusReply) Err() error { return x.GetError().Err() }

// Err is the error field as a plain error: nil on success.
func (x *BenchFetchReply) Err() error { return x.GetError().Err() }

// Err is the error field as a plain error: nil on success.
func (x *BenchPrepareReply) Err() error { return x.GetError().Err() }

// Err is the error field as a plain error: nil on success.
func (x *BenchPutReply) Err() error { return x.GetError().Err() }

// Err is the error field as a plain error: nil on success.
func (x *BenchReduceReply) Err() error { return x.GetError().Err() }

// Err is the error field as a plain error: nil on success.
func (x *BenchRoundTripsReply) Err() error { return x.GetError().Err() }

// Err is the error field as a plain error: nil on success.
func (x *BenchTargetIDReply) Err() error { return x.GetError().Err() }

// Err is the error field as a plain error: nil on success.
func (x *BenchVerifyReply) Err() error { return x.GetError().Err() }

// Err is the error field as a plain error: nil on success.
func (x *CreateObjectReply) Err() error { return x.GetError().Err() }

// Err is the error field as a plain error: nil on success.
func (x *DeleteObjectReply) Err() error { return x.GetError().Err() }

// Err is the error field as a plain error: nil on success.
func (x *DeleteReply) Err() error { return x.GetError().Err() }

// Err is the error field as a plain error: nil on success.
func (x *GetReply) Err() error { return x.GetError().Err() }

// Err is the error field as a plain error: nil on success.
func (x *ListObjectsReply) Err() error { return x.GetError().Err() }

// Err is the error field as a plain error: nil on success.
func (x *LocateReply) Err() error { return x.GetError().Err() }

// Err is the error field as a plain error: nil on success.
func (x *LocationUpdate) Err() error { return x.GetError().Err() }

// Err is the error field as a plain error: nil on success.
func (x *ObjectInfo) Err() error { return x.GetError().Err() }

// Err is the error field as a plain error: nil on success.
func (x *PutReply) Err() error { return x.GetError().Err() }

// Err is the error field as a plain error: nil on success.
func (x *ReduceDoneEvent) Err() error { return x.GetError().Err() }

// Err is the error field as a plain error: nil on success.
func (x *ReduceReply) Err() error { return x.GetError().Err() }

// Err is the error field as a plain error: nil on success.
func (x *ReduceTaskDone) Err() error { return x.GetError().Err() }

// Err is the error field as a plain error: nil on success.
func (x *ReduceTaskStarted) Err() error { return x.GetError().Err() }

// Err is the error field as a plain error: nil on success.
func (x *ReportLostReply) Err() error { return x.GetError().Err() }

// Err is the error field as a plain error: nil on success.
func (x *StoreReducedReply) Err() error { return x.GetError().Err() }

// Err is the error field as a plain error: nil on success.
func (x *SubscribeEventsReply) Err() error { return x.GetError().Err() }

// Err is the error field as a plain error: nil on success.
func (x *WaitObjectsReply) Err() error { return x.GetError().Err() }
