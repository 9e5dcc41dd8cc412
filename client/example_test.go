package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"

	"github.com/longhaul-dev/longhaul/client"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// demoServer plays a server with one session whose first turn has finished.
func demoServer() *httptest.Server {
	journal := []lt.Event{
		{Seq: 1, Type: lt.EventSessionCreated, SessionID: "ses_demo", Data: json.RawMessage(`{}`)},
		{Seq: 2, Type: lt.EventTurnCreated, SessionID: "ses_demo", TurnID: "turn_1", Data: json.RawMessage(`{}`)},
		{Seq: 3, Type: lt.EventTurnCompleted, SessionID: "ses_demo", TurnID: "turn_1", Data: json.RawMessage(`{"output":"done"}`)},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sessions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(lt.Session{ID: "ses_demo", Status: lt.SessionQueued})
	})
	mux.HandleFunc("GET /v1/sessions/ses_demo/events/stream", func(w http.ResponseWriter, r *http.Request) {
		after, _ := strconv.ParseInt(r.Header.Get("Last-Event-ID"), 10, 64)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range journal[min(after, int64(len(journal))):] {
			data, _ := json.Marshal(ev)
			fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", ev.Seq, ev.Type, data)
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	return httptest.NewServer(mux)
}

func Example() {
	srv := demoServer()
	defer srv.Close()
	ctx := context.Background()

	c, err := client.New(srv.URL, &client.Config{APIKey: "lh_example"})
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := c.CreateSession(ctx, &lt.CreateSessionRequest{Agent: "researcher", Input: "Write a brief"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(s.ID, s.Status)

	for ev, err := range c.StreamEvents(ctx, s.ID, 0) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(ev.Seq, ev.Type)
		if ev.Type == lt.EventTurnCompleted {
			break
		}
	}
	// Output:
	// ses_demo queued
	// 1 session.created
	// 2 turn.created
	// 3 turn.completed
}
