package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

func TestFromBuildInfo(t *testing.T) {
	t.Parallel()
	settings := []debug.BuildSetting{
		{Key: "-trimpath", Value: "true"},
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "6d047d8e1f"},
		{Key: "vcs.time", Value: "2026-12-01T10:00:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}
	for _, tc := range []struct {
		name string
		bi   debug.BuildInfo
		want lt.BuildInfo
	}{{
		name: "a release build of the command",
		bi:   debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: module, Version: "v1.4.0"}, Settings: settings},
		want: lt.BuildInfo{Version: "v1.4.0", Revision: "6d047d8e1f", RevisionTime: "2026-12-01T10:00:00Z", Modified: true, GoVersion: "go1.26.0"},
	}, {
		name: "a build from a checkout without VCS stamping",
		bi:   debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: module, Version: "(devel)"}},
		want: lt.BuildInfo{Version: "(devel)", GoVersion: "go1.26.0"},
	}, {
		name: "a program that embeds the library: the dependency's version, not the program's revision",
		bi: debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "example.com/app", Version: "(devel)"},
			Deps: []*debug.Module{{Path: "golang.org/x/text", Version: "v0.42.0"}, {Path: module, Version: "v1.3.2"}}, Settings: settings},
		want: lt.BuildInfo{Version: "v1.3.2", GoVersion: "go1.26.0"},
	}, {
		name: "a replaced dependency reports the replacement",
		bi: debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "example.com/app"},
			Deps: []*debug.Module{{Path: module, Version: "v1.3.2", Replace: &debug.Module{Path: "../longhaul", Version: "(devel)"}}}},
		want: lt.BuildInfo{Version: "(devel)", GoVersion: "go1.26.0"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, fromBuildInfo(&tc.bi))
		})
	}
}

func TestReadNamesTheToolchain(t *testing.T) {
	t.Parallel()
	require.Equal(t, runtime.Version(), Read().GoVersion)
}
