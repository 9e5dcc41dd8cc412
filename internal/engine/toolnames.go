package engine

// ReservedToolName reports whether name is a tool the engine runs itself
// (finish, ask_human, checkpoint, sleep, wait_for_signal, spawn_agent,
// wait_agents). Config.Tools must not use these names: an agent that
// enables one gets the engine's tool, so a tool registered under it would
// never run.
func ReservedToolName(name string) bool {
	_, ok := engineToolNamed(name)
	return ok
}
