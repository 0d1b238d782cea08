package remote

import (
	"errors"
	"io"
	"log/slog"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"golang.org/x/net/context"
)

type endpointReader struct {
	suspended atomic.Bool // Hoplite patch: read by every stream, written by suspend
	remote    *Remote
}

func (s *endpointReader) mustEmbedUnimplementedRemotingServer() {
	// TODO implement me
	panic("implement me")
}

// Hoplite patch: upstream panicked here, and gRPC does not recover a
// handler's panic: one call from anyone who reached the port ended the
// process.
func (s *endpointReader) ListProcesses(ctx context.Context, request *ListProcessesRequest) (*ListProcessesResponse, error) {
	return nil, status.Error(codes.Unimplemented, "ListProcesses is not served")
}

// Hoplite patch: as ListProcesses.
func (s *endpointReader) GetProcessDiagnostics(ctx context.Context, request *GetProcessDiagnosticsRequest) (*GetProcessDiagnosticsResponse, error) {
	return nil, status.Error(codes.Unimplemented, "GetProcessDiagnostics is not served")
}

func newEndpointReader(r *Remote) *endpointReader {
	return &endpointReader{
		remote: r,
	}
}

func (s *endpointReader) Receive(stream Remoting_ReceiveServer) error {
	disconnectChan := make(chan bool, 1)
	s.remote.edpManager.endpointReaderConnections.Store(stream, disconnectChan)
	defer func() {
		s.remote.Logger().Info("EndpointReader is closing")
		// Hoplite patch: tell the goroutine below instead of closing the
		// channel, which the endpoint manager may be sending on (a race,
		// and a panic once closed).
		select {
		case disconnectChan <- false:
		default:
		}
	}()

	go func() {
		// endpointManager sends true
		// endpointReader sends false
		if <-disconnectChan {
			s.remote.Logger().Debug("EndpointReader is telling to remote that it's leaving")
			err := stream.Send(&RemoteMessage{
				MessageType: &RemoteMessage_DisconnectRequest{
					DisconnectRequest: &DisconnectRequest{},
				},
			})
			if err != nil {
				s.remote.Logger().Error("EndpointReader failed to send disconnection message", slog.Any("error", err))
			}
		} else {
			s.remote.edpManager.endpointReaderConnections.Delete(stream)
			s.remote.Logger().Debug("EndpointReader removed active endpoint from endpointManager")
		}
	}()

	from := ""
	for {
		msg, err := stream.Recv()
		switch {
		case errors.Is(err, io.EOF):
			s.remote.Logger().Info("EndpointReader stream closed")
			disconnectChan <- false
			return nil
		case err != nil:
			s.remote.Logger().Info("EndpointReader failed to read", slog.Any("error", err))
			return err
		case s.suspended.Load():
			continue
		}

		switch t := msg.MessageType.(type) {
		case *RemoteMessage_ConnectRequest:
			s.remote.Logger().Debug("EndpointReader received connect request", slog.Any("message", t.ConnectRequest))
			c := t.ConnectRequest
			// Hoplite patch: the peer's address, which replies are
			// matched with (pending_requests_hoplite.go).
			if sc, ok := c.ConnectionType.(*ConnectRequest_ServerConnection); ok {
				from = sc.ServerConnection.GetAddress()
			}
			_, err := s.OnConnectRequest(stream, c)
			if err != nil {
				s.remote.Logger().Error("EndpointReader failed to handle connect request", slog.Any("error", err))
				return err
			}
		case *RemoteMessage_MessageBatch:
			// Hoplite patch: a batch that does not decode, or whose
			// handling panics, ends this peer's stream only (see
			// safeMessageBatch); upstream's index errors ended the process.
			if err := s.safeMessageBatch(t.MessageBatch, from); err != nil {
				s.remote.rejected(stream, err)
				return err
			}
		default:
			{
				s.remote.Logger().Warn("EndpointReader received unknown message type")
			}
		}
	}
}

func (s *endpointReader) OnConnectRequest(stream Remoting_ReceiveServer, c *ConnectRequest) (bool, error) {
	switch tt := c.ConnectionType.(type) {
	case *ConnectRequest_ServerConnection:
		{
			sc := tt.ServerConnection
			s.onServerConnection(stream, sc)
		}
	case *ConnectRequest_ClientConnection:
		{
			// TODO implement me
			s.remote.Logger().Error("ClientConnection not implemented")
		}
	default:
		s.remote.Logger().Error("EndpointReader received unknown connection type")
		return true, nil
	}
	return false, nil
}

func (s *endpointReader) onMessageBatch(m *MessageBatch, from string) error {
	var (
		sender *actor.PID
		target *actor.PID
	)

	for _, envelope := range m.Envelopes {
		data := envelope.MessageData

		if err := checkEnvelope(envelope, m); err != nil {
			return err
		}
		sender = deserializeSender(sender, envelope.Sender, envelope.SenderRequestId, m.Senders)
		target = deserializeTarget(target, envelope.Target, envelope.TargetRequestId, m.Targets)
		if target == nil {
			s.remote.Logger().Error("EndpointReader received message with unknown target", slog.Int("target", int(envelope.Target)), slog.Int("targetRequestId", int(envelope.TargetRequestId)))
			return &MalformedError{Reason: "the target PID is nil"}
		}
		// Hoplite patch: the sender reached this system's port under another
		// name (localhost for 127.0.0.1, a host name for its address): the
		// message is for this system. Upstream looked the address up as a
		// remote one and sent it back to itself over the network, for ever,
		// one core busy per such message.
		if addr := s.remote.actorSystem.Address(); target.Address != addr {
			target = &actor.PID{Address: addr, Id: target.Id, RequestId: target.RequestId}
		}

		message, err := Deserialize(data, m.TypeNames[envelope.TypeId], envelope.SerializerId)
		if err != nil {
			return &MalformedError{Reason: "message " + m.TypeNames[envelope.TypeId] + " does not decode", Err: err}
		}

		// translate from on-the-wire representation to in-process representation
		// this only applies to root level messages, and never on nested child messages
		if v, ok := message.(RootSerialized); ok {
			message, err = v.Deserialize()
			if err != nil {
				return &MalformedError{Reason: "message " + m.TypeNames[envelope.TypeId] + " does not decode", Err: err}
			}
		}
		if err := s.remote.checkDelivery(message); err != nil {
			return err
		}

		switch msg := message.(type) {
		case *actor.Terminated:
			rt := &remoteTerminate{
				Watchee: msg.Who,
				Watcher: target,
			}
			s.remote.edpManager.remoteTerminate(rt)
		case actor.SystemMessage:
			ref, _ := s.remote.actorSystem.ProcessRegistry.GetLocal(target.Id)
			ref.SendSystemMessage(target, msg)
		default:
			// Hoplite patch: a reply ends its request's wait; one to a
			// request this system answered already (its target's address
			// terminated first) is dropped (pending_requests_hoplite.go).
			if s.remote.pending.replied(from, target, message) {
				continue
			}
			// Hoplite patch: a full mailbox refuses a peer's message
			// (reader_guard.go).
			if s.remote.busy(target, sender, message) {
				continue
			}
			var header map[string]string

			// fast path
			if sender == nil && envelope.MessageHeader == nil {
				s.remote.actorSystem.Root.Send(target, message)
				continue
			}

			// slow path
			if envelope.MessageHeader != nil {
				header = envelope.MessageHeader.HeaderData
			}
			localEnvelope := &actor.MessageEnvelope{
				Header:  header,
				Message: message,
				Sender:  sender,
			}
			s.remote.actorSystem.Root.Send(target, localEnvelope)
		}
	}
	return nil
}

func deserializeSender(pid *actor.PID, index int32, requestId uint32, arr []*actor.PID) *actor.PID {
	if index == 0 {
		pid = nil
	} else {
		pid = arr[index-1]

		// if request id is used. make sure to clone the PID first, so we don't corrupt the lookup
		if requestId > 0 {
			pid, _ = proto.Clone(pid).(*actor.PID)
			pid.RequestId = requestId
		}
	}
	return pid
}

func deserializeTarget(pid *actor.PID, index int32, requestId uint32, arr []*actor.PID) *actor.PID {
	pid = arr[index]

	// if request id is used. make sure to clone the PID first, so we don't corrupt the lookup
	if requestId > 0 {
		pid, _ = proto.Clone(pid).(*actor.PID)
		pid.RequestId = requestId
	}

	return pid
}

func (s *endpointReader) onServerConnection(stream Remoting_ReceiveServer, sc *ServerConnection) {
	if s.remote.BlockList().IsBlocked(sc.SystemId) {
		s.remote.Logger().Debug("EndpointReader is blocked")

		err := stream.Send(
			&RemoteMessage{
				MessageType: &RemoteMessage_ConnectResponse{
					ConnectResponse: &ConnectResponse{
						Blocked:  true,
						MemberId: s.remote.actorSystem.ID,
					},
				},
			})
		if err != nil {
			s.remote.Logger().Error("EndpointReader failed to send ConnectResponse message", slog.Any("error", err))
		}

		address := sc.Address
		systemID := sc.SystemId

		// TODO
		_ = address
		_ = systemID
	} else {
		err := stream.Send(
			&RemoteMessage{
				MessageType: &RemoteMessage_ConnectResponse{
					ConnectResponse: &ConnectResponse{
						Blocked:  false,
						MemberId: s.remote.actorSystem.ID,
					},
				},
			})
		if err != nil {
			s.remote.Logger().Error("EndpointReader failed to send ConnectResponse message", slog.Any("error", err))
		}
	}
}

func (s *endpointReader) suspend(toSuspend bool) {
	s.suspended.Store(toSuspend)
	if toSuspend {
		s.remote.Logger().Debug("Suspended EndpointReader")
	}
}
