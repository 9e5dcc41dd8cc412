package buildinfo

import (
	"runtime"
	"runtime/debug"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// module is the path of Longhaul's module: when another program embeds
// Longhaul as a library, its version is that dependency's, not the
// program's.
const module = "github.com/longhaul-dev/longhaul"

// Read returns this binary's build information. A binary built without
// module support (which the go command no longer makes) reports
// "(unknown)".
func Read() lt.BuildInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return lt.BuildInfo{Version: "(unknown)", GoVersion: runtime.Version()}
	}
	return fromBuildInfo(bi)
}

func fromBuildInfo(bi *debug.BuildInfo) lt.BuildInfo {
	out := lt.BuildInfo{Version: "(unknown)", GoVersion: bi.GoVersion}
	switch {
	case bi.Main.Path == module:
		out.Version = bi.Main.Version
	default:
		for _, d := range bi.Deps {
			if d.Path == module {
				if d.Replace != nil {
					d = d.Replace
				}
				out.Version = d.Version
			}
		}
	}
	// The VCS settings describe the main module's checkout, so they say
	// which Longhaul this is only when Longhaul is the main module.
	if bi.Main.Path != module {
		return out
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			out.Revision = s.Value
		case "vcs.time":
			out.RevisionTime = s.Value
		case "vcs.modified":
			out.Modified = s.Value == "true"
		}
	}
	return out
}
