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

// quietPrefs are the settings of a new profile that turn off the password
// manager, its leak check (which sends a hash of a login to a third
// party) and the services that call home; Chromium keeps them once set.
const quietPrefs = `{"credentials_enable_service":false,"credentials_enable_autosignin":false,` +
	`"profile":{"password_manager_enabled":false,"password_manager_leak_detection":false},` +
	`"autofill":{"profile_enabled":false,"credit_card_enabled":false},"safebrowsing":{"enabled":false},` +
	`"search":{"suggest_enabled":false},"alternate_error_pages":{"enabled":false},"translate":{"enabled":false}}`

// unkeptStores is the shell command that makes those stores of profile (a
// quoted shell word) unusable, removing what an older browser wrote there,
// and gives a new profile quietPrefs.
func unkeptStores(profile string) string {
	var b strings.Builder
	prefs := profile + `/Default/Preferences`
	b.WriteString(`test -e ` + prefs + ` || printf '%s' ` + shellQuote(quietPrefs) + ` > ` + prefs + `; `)
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

// Chromium's own background requests (to its vendor's hosts: component and
// safe-browsing updates, autofill and password-leak checks, field trials,
// the network time, the search engine's prefetches) go through the
// session's egress proxy like a page's, which refuses them, and each
// refusal would be journaled as the agent's network.connection. They are
// turned off at the source, with the features behind them: the
// password-leak check, above all, would send a hash of the login a page
// was just given to a third party. BackForwardCache is off so that back
// reloads a page through the proxy.
var (
	quietFeatures = "--disable-features=BackForwardCache,AutofillServerCommunication,PasswordLeakDetection," +
		"OptimizationHints,OptimizationGuideModelDownloading,OptimizationHintsFetching,MediaRouter,DialMediaRouteProvider," +
		"Translate,InterestFeedContentSuggestions,CertificateTransparencyComponentUpdater,NetworkTimeServiceQuerying," +
		"SafeBrowsingEnhancedProtection,PrivacySandboxSettings4,LensOverlay,SegmentationPlatform,ShoppingList"
	quietFlags = []string{
		"--disable-client-side-phishing-detection", "--disable-default-apps", "--disable-domain-reliability",
		"--no-pings", "--metrics-recording-only", "--safebrowsing-disable-auto-update", "--disable-field-trial-config",
		"--no-service-autorun", "--password-store=basic", "--disable-search-engine-choice-screen",
		"--disable-component-extensions-with-background-pages",
	}
)
