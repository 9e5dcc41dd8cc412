package main

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/internal/engine"
	"github.com/longhaul-dev/longhaul/internal/store/sqlite"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

var (
	stepLineRE  = regexp.MustCompile(`(?m)^step +(\d+)  `)
	sessionIDRE = regexp.MustCompile(`Session:\s+(ses_\S+)`)
)

// stepNumbers returns the step numbers of the demo's progress lines.
func stepNumbers(out string) []string {
	var n []string
	for _, m := range stepLineRE.FindAllStringSubmatch(out, -1) {
		n = append(n, m[1])
	}
	return n
}

func TestDemoAgainstRunningServer(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	out := cliOK(t, "demo", "--server", s.url, "--pace", "0")

	m := sessionIDRE.FindStringSubmatch(out)
	require.NotNil(t, m, out)
	ctx := context.Background()
	sess, err := s.client.GetSession(ctx, m[1])
	require.NoError(t, err)
	require.Equal(t, lt.SessionIdle, sess.Status)

	// One progress line per step (model call), numbered in order.
	require.EqualValues(t, 7, sess.Usage.ModelCalls, "six steps and the acceptance check")
	require.Equal(t, []string{"1", "2", "3", "4", "5", "6"}, stepNumbers(out), out)
	require.Contains(t, out, "lookup_customer(cus_1042) → answered by the demo app: ACME Corp")
	require.Contains(t, out, "shell(sh stats.sh) → approved (policy scripts-need-approval)")
	require.Contains(t, out, "finish(report.md)")
	require.Contains(t, out, "acceptance check: 3 of 3 criteria met")
	require.Greater(t, sess.Usage.CostUSD, 0.0)

	arts, err := s.client.ListArtifacts(ctx, sess.ID)
	require.NoError(t, err)
	require.Len(t, arts.Data, 1)
	art := arts.Data[0]
	require.True(t, art.Final)
	require.Equal(t, "report.md", art.Name)
	require.Contains(t, out, "longhaul artifact get "+art.ID)
	require.Contains(t, out, "longhaul show "+sess.ID)
	require.Contains(t, out, "longhaul events "+sess.ID)

	data, _, err := s.client.ArtifactContent(ctx, art.ID)
	require.NoError(t, err)
	require.Contains(t, string(data), "ACME Corp (cus_1042)")

	// The shell commands ran in the workspace: their output is journaled.
	events, err := s.client.ListEvents(ctx, sess.ID, 0, 500)
	require.NoError(t, err)
	var shellOut strings.Builder
	for _, ev := range events.Data {
		if ev.Type == lt.EventToolCompleted {
			shellOut.Write(ev.Data)
		}
	}
	require.Contains(t, shellOut.String(), "notes.md")
	require.Contains(t, shellOut.String(), `"ACME Corp"`)
}

func TestDemoEmbedded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := cliOK(t, "demo", "--data", dir, "--pace", "0")
	require.Contains(t, out, "Started an embedded server on http://127.0.0.1:")
	require.Contains(t, out, "longhaul serve --data "+dir)
	m := sessionIDRE.FindStringSubmatch(out)
	require.NotNil(t, m, out)
	steps := stepNumbers(out)

	// The embedded server is gone; its data stays. Read it back directly.
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dir, dbFile), nil)
	require.NoError(t, err)
	defer st.Close()
	eng, err := engine.New(st, &engine.Config{WorkspaceRoot: filepath.Join(dir, workspacesDir)})
	require.NoError(t, err)
	sess, err := eng.GetSession(ctx, m[1])
	require.NoError(t, err)
	require.Equal(t, lt.SessionIdle, sess.Status)
	require.Len(t, steps, int(sess.Usage.ModelCalls)-1, "one model call per step, and the acceptance check")
	turns, err := eng.ListTurns(ctx, sess.ID)
	require.NoError(t, err)
	require.Len(t, turns, 1)
	require.Equal(t, lt.TurnCompleted, turns[0].Status)
	require.Len(t, steps, turns[0].Steps)
	require.NotNil(t, turns[0].Acceptance)
	require.True(t, turns[0].Acceptance.AllMet)
	arts, err := eng.ListArtifacts(ctx, sess.ID)
	require.NoError(t, err)
	require.Len(t, arts, 1)
	require.True(t, arts[0].Final)
	require.FileExists(t, filepath.Join(dir, nodeIDFile))
}

// TestDemoLeavesTheApprovalToYou: with --ask the demo does not approve the
// script; it prints how to, and goes on once a person approves from the CLI.
func TestDemoLeavesTheApprovalToYou(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	done := make(chan string, 1)
	go func() {
		r := cliRun(t, "demo", "--server", s.url, "--pace", "0", "--ask")
		done <- r.stdout + r.stderr
	}()
	ctx := context.Background()
	var act lt.Action
	require.Eventually(t, func() bool {
		l, err := s.client.ListAllActions(ctx, lt.ListActionsParams{Status: string(lt.ActionPending), Type: string(lt.ActionApproval)})
		if err != nil || len(l.Data) == 0 {
			return false
		}
		act = l.Data[0]
		return true
	}, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, "scripts-need-approval", act.Policy)
	inbox := cliOK(t, "inbox", "--server", s.url)
	require.Contains(t, inbox, act.ID)
	require.Contains(t, inbox, "sh stats.sh")
	cliOK(t, "approve", act.ID, "--server", s.url)
	var out string
	select {
	case out = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the demo did not finish after the approval")
	}
	require.Contains(t, out, "longhaul approve "+act.ID)
	// The demo showed what the approval is about, not only its title: the
	// script the command runs and what it can reach.
	require.Contains(t, out, "Evidence:")
	require.Contains(t, out, "stats.sh")
	require.Contains(t, out, "Consequence:")
	require.Contains(t, out, "the session's workspace (2 files)")
	require.Contains(t, out, "shell(sh stats.sh) → decided by you")
	require.Contains(t, out, "Status:    idle")
}
