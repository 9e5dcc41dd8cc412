package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func TestAgentsPutAndList(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	require.Contains(t, cliOK(t, "agents", "ls", "--server", s.url), "No agents.")

	file := writeFile(t, "writer.yaml", `
name: writer
spec:
  model: {provider: scripted, name: demo, script: [{text: "Drafted."}]}
  instructions: Write clearly.
  tools: [{name: write_file}, {name: finish}]
`)
	require.Contains(t, cliOK(t, "agents", "put", file, "--server", s.url), "Agent writer version 1 created.")
	require.Contains(t, cliOK(t, "agents", "put", file, "--server", s.url), "Agent writer is unchanged at version 1.")
	a := cliJSON[lt.Agent](t, "agents", "put", file, "--force", "--json", "--server", s.url)
	require.Equal(t, 2, a.Version)

	agents := cliJSON[[]lt.Agent](t, "agents", "ls", "--json", "--server", s.url)
	require.Len(t, agents, 1)
	require.Equal(t, "writer", agents[0].Name)
	require.Equal(t, 2, agents[0].Version)
	require.Equal(t, &lt.Actor{Name: "local", Role: lt.RoleAdmin}, agents[0].CreatedBy, "who defined the version: the loopback caller")
	out := cliOK(t, "agents", "ls", "--server", s.url)
	require.Regexp(t, `(?m)^default +writer +2 +scripted/demo +write_file, finish .* local \(admin\)$`, out)

	// The same name in another project is another agent, at its own
	// version 1; --project keeps ls to one project.
	require.Contains(t, cliOK(t, "agents", "put", file, "--project", "support", "--server", s.url), "Agent writer version 1 created.")
	support := cliJSON[[]lt.Agent](t, "agents", "ls", "--project", "support", "--json", "--server", s.url)
	require.Len(t, support, 1)
	require.Equal(t, "support", support[0].Project)
	require.Equal(t, 1, support[0].Version)
	require.Len(t, cliJSON[[]lt.Agent](t, "agents", "ls", "--json", "--server", s.url), 2, "every project's")
	r := cliRun(t, "agents", "put", writeFile(t, "p.yaml", "name: p\nproject: a\nspec: {model: {provider: scripted}}\n"), "--project", "b", "--server", s.url)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, `the file names project "a" and --project "b"`)

	// Sessions of a named agent, filtered by agent.
	cliOK(t, "run", "--agent", "writer", "--server", s.url, "draft it")
	sessions := cliJSON[[]lt.Session](t, "ls", "--agent", "writer", "--json", "--server", s.url)
	require.Len(t, sessions, 1)
	require.Equal(t, lt.AgentRef{Name: "writer", Version: 2}, sessions[0].Agent)
	require.Empty(t, cliJSON[[]lt.Session](t, "ls", "--agent", "other", "--json", "--server", s.url))

	// A file without a name, or with a field the API does not know, is
	// refused before anything is sent.
	r = cliRun(t, "agents", "put", writeFile(t, "a.yaml", "spec: {model: {provider: scripted}}\n"), "--server", s.url)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "a.yaml:1: name: required")
	r = cliRun(t, "agents", "put", writeFile(t, "b.json", `{"name": "b", "spec": {"modle": {}}}`), "--server", s.url)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, `b.json: spec.modle: unknown field "modle" (did you mean "model"?)`)
	// The server's refusal names the field.
	r = cliRun(t, "agents", "put", writeFile(t, "c.yaml", "name: c\nspec: {model: {provider: scripted, script: [{text: hi}]}, tools: [{name: teleport}]}\n"), "--server", s.url)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "field:   spec.tools[0].name")
}

// TestAgentsShowAndVersions: one agent whole, at the latest version or
// another, and every version, the latest first; an unknown name gets the
// close names of the project's agents (here and in run).
func TestAgentsShowAndVersions(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	put := func(instructions string) {
		t.Helper()
		file := writeFile(t, "researcher.yaml", "name: researcher\nspec:\n  model: {provider: scripted, name: demo, script: [{text: Done.}]}\n  instructions: "+instructions+"\n  tools: [{name: write_file}]\n")
		cliOK(t, "agents", "put", file, "--server", s.url)
	}
	put("First draft.")
	put("Second draft.")

	out := cliOK(t, "agents", "show", "researcher", "--server", s.url)
	require.Contains(t, out, "Agent:    researcher\n")
	require.Contains(t, out, "Version:  2\n")
	require.Contains(t, out, "Model:    scripted/demo\n")
	require.Contains(t, out, `"instructions": "Second draft."`)
	v1 := cliJSON[lt.Agent](t, "agents", "show", "researcher", "--version", "1", "--json", "--server", s.url)
	require.Equal(t, 1, v1.Version)
	require.Equal(t, "First draft.", v1.Spec.Instructions)

	versions := cliJSON[[]lt.Agent](t, "agents", "versions", "researcher", "--json", "--server", s.url)
	require.Len(t, versions, 2)
	require.Equal(t, []int{2, 1}, []int{versions[0].Version, versions[1].Version})
	out = cliOK(t, "agents", "versions", "researcher", "--server", s.url)
	require.Regexp(t, `(?m)^VERSION +CREATED +BY +MODEL +TOOLS +INSTRUCTIONS\n2 +.* +scripted/demo +write_file +Second draft\.\n1 +.*First draft\.$`, out)

	for _, args := range [][]string{
		{"agents", "show", "reseacher"},
		{"agents", "versions", "reseacher"},
		{"run", "--agent", "reseacher", "go"},
	} {
		r := cliRun(t, append(args, "--server", s.url)...)
		require.Equal(t, exitFailure, r.code, "%v: %s", args, r.stderr)
		require.Contains(t, r.stderr, `Hint: did you mean "researcher"?`, "%v", args)
	}
	r := cliRun(t, "agents", "show", "zzz", "--server", s.url)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "Hint: 'longhaul agents ls' lists the agents.")
	r = cliRun(t, "agents", "show", "researcher", "--version", "0", "--server", s.url)
	require.Equal(t, exitUsage, r.code)
}
