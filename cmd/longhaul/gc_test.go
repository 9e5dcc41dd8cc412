package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGCDefaults(t *testing.T) {
	t.Parallel()
	const gib = int64(1) << 30
	for _, tc := range []struct {
		name   string
		env    map[string]string
		memory int64
		want   gcSettings
	}{
		{"nothing set: a higher percent, bounded by half the memory", nil, 8 * gib, gcSettings{percent: defaultGCPercent, limit: 4 * gib}},
		{"the operator's GOGC wins, no limit added", map[string]string{"GOGC": "100"}, 8 * gib, gcSettings{}},
		{"GOGC=off wins too", map[string]string{"GOGC": "off"}, 8 * gib, gcSettings{}},
		{"GOGC and GOMEMLIMIT: both the operator's", map[string]string{"GOGC": "50", "GOMEMLIMIT": "1GiB"}, 8 * gib, gcSettings{}},
		{"the operator's GOMEMLIMIT bounds the higher percent", map[string]string{"GOMEMLIMIT": "1GiB"}, 8 * gib, gcSettings{percent: defaultGCPercent}},
		{"GOMEMLIMIT with the memory unknown", map[string]string{"GOMEMLIMIT": "1GiB"}, 0, gcSettings{percent: defaultGCPercent}},
		{"memory unknown and no limit: Go's defaults", nil, 0, gcSettings{}},
		{"an empty GOGC is unset, as the runtime reads it", map[string]string{"GOGC": ""}, 2 * gib, gcSettings{percent: defaultGCPercent, limit: gib}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			getenv := func(k string) string { return tc.env[k] }
			require.Equal(t, tc.want, gcDefaults(getenv, tc.memory))
		})
	}
}
