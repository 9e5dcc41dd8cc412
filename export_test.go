package longhaul

import "time"

// PollInterval returns how often rt's streams read their journals again
// without a notice.
func PollInterval(rt *Runtime) time.Duration { return rt.node.PollInterval }
