package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/coder/websocket"
)

// linkFrame is what a man in the middle reads of a link message.
type linkFrame struct {
	Type   string          `json:"type"`
	ID     uint64          `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// runnerMITM sits between a real runner and the server (the runner dials
// it as its server) and relays the connection, letting a test make the
// runner hostile: answer calls of the server itself, and see what the
// runner sends.
type runnerMITM struct {
	upstream string // the server's runner route
	// answer, when set, sees each of the server's calls: a frame to send
	// the server instead of relaying the call to the runner, or nil.
	answer func(call *linkFrame) []byte
	// sent, when set, sees each message the runner sends the server (it
	// is relayed).
	sent func(m *linkFrame)
}

func (f *runnerMITM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	up, _, err := websocket.Dial(r.Context(), f.upstream, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": r.Header["Authorization"]}})
	if err != nil {
		http.Error(w, "upstream", http.StatusBadGateway)
		return
	}
	defer up.CloseNow()
	down, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer down.CloseNow()
	up.SetReadLimit(64 << 20)
	down.SetReadLimit(64 << 20)
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	var wmu sync.Mutex // the writes to the server: relayed and made up
	toServer := func(typ websocket.MessageType, b []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		return up.Write(ctx, typ, b)
	}
	go func() { // runner → server: seen, relayed
		defer cancel()
		for {
			typ, b, err := down.Read(ctx)
			if err != nil {
				return
			}
			var m linkFrame
			if f.sent != nil && json.Unmarshal(b, &m) == nil {
				f.sent(&m)
			}
			if toServer(typ, b) != nil {
				return
			}
		}
	}()
	for { // server → runner: a call may be answered here
		typ, b, err := up.Read(ctx)
		if err != nil {
			return
		}
		var m linkFrame
		if f.answer != nil && json.Unmarshal(b, &m) == nil && m.Type == "call" {
			if res := f.answer(&m); res != nil {
				if toServer(websocket.MessageText, res) != nil {
					return
				}
				continue
			}
		}
		if down.Write(ctx, typ, b) != nil {
			return
		}
	}
}
