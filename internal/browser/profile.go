package browser

import "strings"

// The profile is in the workspace, which the agent reads. Chromium keeps
// there, besides cookies, what pages showed and where they were: the
// history (addresses and titles), the session files (each tab's
// navigations, for restoring them) and a few stores derived from them. A
// page that puts a login's password into its address or its title (a
// careless site, or one echoing a form) would so leave it where a shell
// command reads it past the redactor. These stores are of no use to an
// agent's browser, so each is made unusable before the browser starts: a
// non-empty directory where Chromium expects a database file, a file where
// it expects a directory. Chromium then runs without them (it logs that it
// cannot open them) and writes none of it.
var (
	unkeptFiles = []string{"History", "History-journal", "Favicons", "Favicons-journal", "Top Sites", "Top Sites-journal",
		"Visited Links", "Shortcuts", "Shortcuts-journal", "Network Action Predictor", "Network Action Predictor-journal",
		"Current Session", "Current Tabs", "Last Session", "Last Tabs"}
	unkeptDirs = []string{"Sessions", "segmentation_platform"}
)

// unkeptStores is the shell command that makes those stores of profile (a
// quoted shell word) unusable, removing what an older browser wrote there.
func unkeptStores(profile string) string {
	var b strings.Builder
	for _, f := range unkeptFiles {
		p := profile + `/Default/` + shellQuote(f)
		b.WriteString(`rm -rf ` + p + `; mkdir -p ` + p + `/kept-out; `)
	}
	for _, d := range unkeptDirs {
		p := profile + `/` + shellQuote(d)
		if d == "Sessions" {
			p = profile + `/Default/` + shellQuote(d)
		}
		b.WriteString(`rm -rf ` + p + `; : > ` + p + `; `)
	}
	return b.String()
}
