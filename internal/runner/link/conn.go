package link

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Defaults of Config.
const (
	DefaultMaxMessageBytes   = 1 << 20
	DefaultHeartbeatInterval = 5 * time.Second
	DefaultHeartbeatTimeout  = 10 * time.Second
	DefaultCancelGrace       = 5 * time.Second
	// minMessageBytes leaves room for a message's envelope around a chunk.
	minMessageBytes = 4 << 10
	// MaxRefusalsInFlight bounds a connection's refusals ("unknown_method",
	// "busy") being sent at once: each is written aside, so that a peer
	// flooding calls while never reading could otherwise make this side
	// start a goroutine per call. One more is a protocol violation.
	MaxRefusalsInFlight = 16
)

// ErrClosed is the error of a call the connection's end cut off; the
// cause is wrapped with it.
var ErrClosed = errors.New("runner connection closed")

// Handler answers one call: its result is encoded as the call's result, an
// error as the call's error (a *RemoteError as it is, any other as
// CodeFailed with its message). ctx ends when the caller cancels or the
// connection closes.
type Handler func(ctx context.Context, req *Request) (any, error)

// Config tunes a Conn. A nil *Config means defaults.
type Config struct {
	// MaxMessageBytes bounds a frame either way; a larger incoming one
	// closes the connection. Default DefaultMaxMessageBytes; at least 4 KiB.
	MaxMessageBytes int64
	// HeartbeatInterval is how often this side pings. Default
	// DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
	// HeartbeatTimeout is how long a pong may take before the connection
	// is closed as dead. Default DefaultHeartbeatTimeout.
	HeartbeatTimeout time.Duration
	// CancelGrace is added to HeartbeatTimeout for the answer of a
	// cancelled call made with CallOptions.AwaitCancelled (time for the
	// peer to end what the call ran); past it the connection is closed.
	// Default DefaultCancelGrace.
	CancelGrace time.Duration
	// Handlers answer the peer's calls, by method. Default none: any call
	// of the peer is a protocol violation (closes the connection).
	Handlers map[string]Handler
	// MaxIncoming bounds the peer's calls open at once (a runner's
	// capacity); one more is answered "busy". Default 0: no bound.
	MaxIncoming int
	// Logger receives protocol violations (warn). Default slog.Default().
	Logger *slog.Logger
}

func (c *Config) withDefaults() (Config, error) {
	var out Config
	if c != nil {
		out = *c
	}
	switch {
	case out.MaxMessageBytes < 0:
		return out, errors.New("link config: MaxMessageBytes is negative")
	case out.MaxMessageBytes > 0 && out.MaxMessageBytes < minMessageBytes:
		return out, fmt.Errorf("link config: MaxMessageBytes must be at least %d", minMessageBytes)
	case out.HeartbeatInterval < 0:
		return out, errors.New("link config: HeartbeatInterval is negative")
	case out.HeartbeatTimeout < 0:
		return out, errors.New("link config: HeartbeatTimeout is negative")
	case out.CancelGrace < 0:
		return out, errors.New("link config: CancelGrace is negative")
	case out.MaxIncoming < 0:
		return out, errors.New("link config: MaxIncoming is negative")
	}
	if out.MaxMessageBytes == 0 {
		out.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if out.HeartbeatInterval == 0 {
		out.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if out.HeartbeatTimeout == 0 {
		out.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if out.CancelGrace == 0 {
		out.CancelGrace = DefaultCancelGrace
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	return out, nil
}

// Conn is one side of a runner connection: it reads the peer's frames,
// answers its calls with Config.Handlers, makes this side's calls (Call)
// and keeps the heartbeat, until Close or the first failure.
type Conn struct {
	ws  *websocket.Conn
	cfg Config

	// ctx ends with the connection; its cause is why (Err).
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{}

	// callMu makes a call's numbering and sending one step.
	callMu sync.Mutex

	mu sync.Mutex
	// lastID is the id of this side's last call.
	lastID uint64
	// pending are this side's calls waiting for their answer.
	pending map[uint64]*pendingCall
	// lastPeerID is the highest id the peer has used for a call.
	lastPeerID uint64
	// incoming are the peer's calls being answered, by id.
	incoming map[uint64]context.CancelCauseFunc
	// refusing counts the refusals being sent (MaxRefusalsInFlight).
	refusing int

	handlers sync.WaitGroup
}

type pendingCall struct {
	onOutput func(stream string, data []byte)
	// abandoned: the caller gave up (cancel sent); the answer is dropped.
	abandoned bool
	answer    chan *Message
}

// New starts a Conn over ws (after the handshake). It panics on an
// invalid cfg: a wiring mistake.
func New(ws *websocket.Conn, cfg *Config) *Conn {
	c, err := cfg.withDefaults()
	if err != nil {
		panic(err.Error())
	}
	ws.SetReadLimit(c.MaxMessageBytes)
	ctx, cancel := context.WithCancelCause(context.Background())
	conn := &Conn{
		ws: ws, cfg: c, ctx: ctx, cancel: cancel, done: make(chan struct{}),
		pending:  map[uint64]*pendingCall{},
		incoming: map[uint64]context.CancelCauseFunc{},
	}
	go conn.readLoop()
	go conn.heartbeat()
	return conn
}

// Done is closed when the connection has ended and every handler
// returned.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is why the connection ended (nil while it is open).
func (c *Conn) Err() error {
	if c.ctx.Err() == nil {
		return nil
	}
	return context.Cause(c.ctx)
}

// Close ends the connection with a normal closure saying reason.
func (c *Conn) Close(reason string) {
	c.closeWith(websocket.StatusNormalClosure, errors.New(reason))
}

// CloseWith ends the connection with code and reason (e.g.
// StatusPolicyViolation when a key was revoked).
func (c *Conn) CloseWith(code websocket.StatusCode, reason string) {
	c.closeWith(code, errors.New(reason))
}

func (c *Conn) closeWith(code websocket.StatusCode, cause error) {
	if c.ctx.Err() != nil {
		return
	}
	c.cancel(cause)
	reason := cause.Error()
	if len(reason) > 120 { // a close frame's reason is at most 123 bytes
		reason = reason[:120]
	}
	// Close waits (bounded by the library) for the peer's close frame; a
	// dead peer must not hold this goroutine, so do it aside.
	go func() { _ = c.ws.Close(code, reason) }()
}

// MaxMessageBytes is the frame limit of this side (Config's): a caller
// splits what it sends into parts that fit (both sides use the same).
func (c *Conn) MaxMessageBytes() int64 { return c.cfg.MaxMessageBytes }

// InFlight reports this side's calls waiting for an answer and the peer's
// calls being answered (tests check that nothing leaks).
func (c *Conn) InFlight() (outgoing, incoming int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending), len(c.incoming)
}

// violation closes the connection: the peer broke the protocol.
func (c *Conn) violation(format string, args ...any) {
	err := fmt.Errorf("protocol violation: "+format, args...)
	c.cfg.Logger.Warn("runner link", "err", err)
	c.closeWith(websocket.StatusPolicyViolation, err)
}

func (c *Conn) readLoop() {
	defer func() {
		c.mu.Lock()
		for id, p := range c.pending {
			delete(c.pending, id)
			close(p.answer)
		}
		for _, cancel := range c.incoming {
			cancel(ErrClosed)
		}
		c.mu.Unlock()
		c.handlers.Wait()
		close(c.done)
	}()
	for {
		// Not c.ctx: a read cancelled by a context closes the socket at
		// once, before Close could send its close frame. The read ends
		// when the socket does.
		typ, data, err := c.ws.Read(context.Background())
		if err != nil {
			if c.ctx.Err() == nil {
				code := websocket.StatusGoingAway
				if websocket.CloseStatus(err) == websocket.StatusMessageTooBig || errors.Is(err, websocket.ErrMessageTooBig) {
					code = websocket.StatusMessageTooBig
					err = fmt.Errorf("a frame over the limit of %d bytes: %w", c.cfg.MaxMessageBytes, err)
				}
				c.closeWith(code, fmt.Errorf("read: %w", err))
			}
			return
		}
		if typ != websocket.MessageText {
			c.violation("a binary frame")
			return
		}
		var m Message
		if err := decodeStrict(data, &m); err != nil {
			c.violation("a frame that is no message: %v", err)
			return
		}
		if err := m.check(); err != nil {
			c.violation("%s message %d: %v", truncate(m.Type), m.ID, err)
			return
		}
		if !c.dispatch(&m) {
			return
		}
	}
}

// dispatch handles one checked message; false means the connection was
// closed for it.
func (c *Conn) dispatch(m *Message) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch m.Type {
	case TypeCall:
		if m.ID <= c.lastPeerID {
			c.violation("call id %d is not above %d, the last one", m.ID, c.lastPeerID)
			return false
		}
		c.lastPeerID = m.ID
		if len(c.cfg.Handlers) == 0 {
			// This side takes no calls at all (the server of a runner):
			// a peer that calls it is not following the protocol.
			c.violation("a call of %q to a side that takes no calls", truncate(m.Method))
			return false
		}
		h, ok := c.cfg.Handlers[m.Method]
		switch {
		case !ok:
			return c.refuse(m.ID, Errorf(CodeUnknownMethod, "no method %q", truncate(m.Method)))
		case c.cfg.MaxIncoming > 0 && len(c.incoming) >= c.cfg.MaxIncoming:
			return c.refuse(m.ID, Errorf(CodeBusy, "%d calls already running, the most this side takes", len(c.incoming)))
		default:
			ctx, cancel := context.WithCancelCause(c.ctx)
			c.incoming[m.ID] = cancel
			c.handlers.Add(1)
			go c.serve(ctx, h, &Request{Method: m.Method, Params: m.Params, conn: c, id: m.ID})
		}
	case TypeCancel:
		if m.ID > c.lastPeerID {
			c.violation("cancel of call %d, which was never made", m.ID)
			return false
		}
		if cancel, ok := c.incoming[m.ID]; ok {
			cancel(errCallerCancelled)
		}
	case TypeOutput, TypeResult, TypeError:
		p, ok := c.pending[m.ID]
		if !ok {
			c.violation("%s for call %d, which is not waiting for one", m.Type, m.ID)
			return false
		}
		if m.Type == TypeOutput {
			if !p.abandoned && p.onOutput != nil {
				p.onOutput(m.Stream, m.Data)
			}
			return true
		}
		delete(c.pending, m.ID)
		p.answer <- m // buffered, one answer only
	}
	return true
}

// refuse answers call id with err aside, at most MaxRefusalsInFlight at
// once (c.mu held); false means the connection was closed instead.
func (c *Conn) refuse(id uint64, err error) bool {
	if c.refusing >= MaxRefusalsInFlight {
		c.violation("over %d refused calls waiting for their answer to be read", MaxRefusalsInFlight)
		return false
	}
	c.refusing++
	c.handlers.Add(1)
	go func() {
		defer c.handlers.Done()
		c.answer(id, nil, err)
		c.mu.Lock()
		c.refusing--
		c.mu.Unlock()
	}()
	return true
}

// errCallerCancelled is a handler's context's cause when the caller
// cancelled.
var errCallerCancelled = errors.New("the caller cancelled the call")

func (c *Conn) serve(ctx context.Context, h Handler, req *Request) {
	defer c.handlers.Done()
	res, err := safeCall(ctx, h, req)
	c.mu.Lock()
	if cancel, ok := c.incoming[req.id]; ok {
		cancel(nil)
		delete(c.incoming, req.id)
	}
	c.mu.Unlock()
	if err == nil && ctx.Err() != nil && errors.Is(context.Cause(ctx), errCallerCancelled) {
		err = Errorf(CodeCancelled, "cancelled by the caller")
	}
	c.answer(req.id, res, err)
}

// safeCall runs h, turning a panic into the call's error: one bad call
// must not take the runner down.
func safeCall(ctx context.Context, h Handler, req *Request) (res any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = Errorf(CodeFailed, "the handler of %s panicked", req.Method)
		}
	}()
	return h(ctx, req)
}

// answer sends a call's result or error.
func (c *Conn) answer(id uint64, res any, err error) {
	m := &Message{ID: id}
	if err != nil {
		var re *RemoteError
		if !errors.As(err, &re) {
			re = &RemoteError{Code: CodeFailed, Message: err.Error()}
		}
		m.Type, m.Error = TypeError, re
	} else {
		data, merr := json.Marshal(res)
		if merr != nil {
			m.Type, m.Error = TypeError, Errorf(CodeFailed, "encode the result: %v", merr)
		} else {
			m.Type, m.Result = TypeResult, data
		}
	}
	ctx, cancel := c.writeContext()
	defer cancel()
	if err := c.send(ctx, m); err != nil && c.ctx.Err() == nil {
		// An answer that cannot be sent (too large) must not leave the
		// caller waiting for ever.
		_ = c.send(ctx, &Message{Type: TypeError, ID: id, Error: Errorf(CodeFailed, "send the answer: %v", err)})
	}
}

// writeContext bounds a write this side makes on its own (an answer, an
// output chunk): a peer that stops reading must not hold it for ever. It
// is not tied to c.ctx: a write cancelled by a context closes the socket
// at once, and the close frame must get out first.
func (c *Conn) writeContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), c.cfg.HeartbeatTimeout)
}

// send writes one message, refusing one over the frame limit.
func (c *Conn) send(ctx context.Context, m *Message) error {
	data, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode %s message: %w", m.Type, err)
	}
	if c.ctx.Err() != nil {
		return fmt.Errorf("%w: %w", ErrClosed, context.Cause(c.ctx))
	}
	if int64(len(data)) > c.cfg.MaxMessageBytes {
		return fmt.Errorf("a %s message of %d bytes is over the limit of %d", m.Type, len(data), c.cfg.MaxMessageBytes)
	}
	if err := c.ws.Write(ctx, websocket.MessageText, data); err != nil {
		if c.ctx.Err() != nil {
			return fmt.Errorf("%w: %w", ErrClosed, context.Cause(c.ctx))
		}
		return fmt.Errorf("send %s message: %w", m.Type, err)
	}
	return nil
}

// CallOptions are a call's optional parts.
type CallOptions struct {
	// OnOutput receives the call's output chunks, in order. It runs on the
	// connection's read loop: it must not block (append to a bounded
	// buffer, never wait).
	OnOutput func(stream string, data []byte)
	// AwaitCancelled makes a cancelled Call wait for the callee's answer
	// (its handler is over: the command it ran has ended) before it
	// returns the context's error, so that nothing of the call still runs
	// on the other side once it returned. The wait is bounded: a peer
	// that answers pings but not the cancelled call (a runner built to
	// lie) has the connection closed after HeartbeatTimeout and a grace
	// (Config.CancelGrace), which ends what it runs for this side.
	AwaitCancelled bool
}

// Call calls method on the peer with params and decodes its result into
// result (unless nil). A failure the peer reported is a *RemoteError.
// When ctx ends first, the peer is told to cancel, and Call returns ctx's
// error at once.
func (c *Conn) Call(ctx context.Context, method string, params, result any, opts *CallOptions) error {
	raw, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("encode the params of %s: %w", method, err)
	}
	p := &pendingCall{answer: make(chan *Message, 1)}
	if opts != nil {
		p.onOutput = opts.OnOutput
	}
	// Calls go out in the order of their ids (the peer refuses an id not
	// above the last one): numbering and sending are one step.
	c.callMu.Lock()
	c.mu.Lock()
	if c.ctx.Err() != nil {
		c.mu.Unlock()
		c.callMu.Unlock()
		return fmt.Errorf("%w: %w", ErrClosed, context.Cause(c.ctx))
	}
	c.lastID++
	id := c.lastID
	c.pending[id] = p
	c.mu.Unlock()

	// Not ctx: a write cut by its context closes the whole socket.
	wctx, wcancel := c.writeContext()
	err = c.send(wctx, &Message{Type: TypeCall, ID: id, Method: method, Params: raw})
	wcancel()
	c.callMu.Unlock()
	if err != nil {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return err
	}
	select {
	case m, ok := <-p.answer:
		if !ok {
			return fmt.Errorf("%s: %w: %w", method, ErrClosed, context.Cause(c.ctx))
		}
		if m.Type == TypeError {
			return m.Error
		}
		if result != nil {
			if err := json.Unmarshal(m.Result, result); err != nil {
				return fmt.Errorf("decode the result of %s: %w", method, err)
			}
		}
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		if _, ok := c.pending[id]; ok {
			p.abandoned = true
		}
		c.mu.Unlock()
		// Bounded: a cancel that cannot be written (the connection is
		// stuck) is the heartbeat's to notice.
		wctx, wcancel := c.writeContext()
		_ = c.send(wctx, &Message{Type: TypeCancel, ID: id})
		wcancel()
		if opts != nil && opts.AwaitCancelled {
			c.awaitCancelled(method, p)
		}
		return ctx.Err()
	}
}

// awaitCancelled waits for the answer of a cancelled call, at most
// HeartbeatTimeout plus CancelGrace: then the connection is
// closed as the peer's violation, since closing it is what ends the
// peer's programs of this connection (a lost connection's calls never
// overlap their retries).
func (c *Conn) awaitCancelled(method string, p *pendingCall) {
	wait := c.cfg.HeartbeatTimeout + c.cfg.CancelGrace
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-p.answer: // closed if the connection ends first
	case <-t.C:
		c.cfg.Logger.Warn("runner link: a cancelled call was not answered in time: closing the connection", "method", truncate(method))
		c.closeWith(websocket.StatusPolicyViolation, fmt.Errorf("the cancelled call %s was not answered within %s", truncate(method), wait))
	}
}

// heartbeat pings every interval; a pong later than the timeout ends the
// connection.
func (c *Conn) heartbeat() {
	t := time.NewTicker(c.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.HeartbeatTimeout)
		err := c.ws.Ping(ctx)
		cancel()
		if err != nil && c.ctx.Err() == nil {
			c.cancel(fmt.Errorf("heartbeat: no pong within %s", c.cfg.HeartbeatTimeout))
			// A peer that does not answer pings will not answer a close
			// frame either: drop the socket.
			_ = c.ws.CloseNow()
			return
		}
	}
}

// Request is one of the peer's calls, as a Handler sees it.
type Request struct {
	Method string
	Params json.RawMessage

	conn *Conn
	id   uint64
}

// DecodeParams decodes the call's params strictly into v; a failure is a
// CodeBadParams error naming what is wrong.
func (r *Request) DecodeParams(v any) error {
	if err := decodeStrict(r.Params, v); err != nil {
		return Errorf(CodeBadParams, "params of %s: %v", r.Method, err)
	}
	return nil
}

// Output streams data of stream (StreamStdout or StreamStderr) to the
// caller, in chunks that fit the frame limit.
func (r *Request) Output(ctx context.Context, stream string, data []byte) error {
	if stream != StreamStdout && stream != StreamStderr {
		return fmt.Errorf("output stream %q: neither %s nor %s", stream, StreamStdout, StreamStderr)
	}
	chunk := ChunkBytes(r.conn.cfg.MaxMessageBytes)
	for len(data) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(chunk, len(data))
		wctx, cancel := r.conn.writeContext()
		err := r.conn.send(wctx, &Message{Type: TypeOutput, ID: r.id, Stream: stream, Data: data[:n]})
		cancel()
		if err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// ChunkBytes is the largest chunk of output one frame of maxMessage bytes
// carries: base64 makes 3 bytes 4, and the envelope needs under 1 KiB.
func ChunkBytes(maxMessage int64) int {
	return int((maxMessage - 1024) / 4 * 3)
}
