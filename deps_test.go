package longhaul_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The module's import rules, in one table (as Tailscale's deps_test.go keeps
// a command's). It sits at the module root because it is about every package
// of the module, not about the library it shares a directory with; it asks
// the go command (go list -json ./...), so it sees what the compiler sees.
//
// For every package, importRules says which packages of the module may import
// it in their non-test code. A package without an entry fails the test: add
// one. Each doc.go states the same in a "Who may import it:" sentence
// naming the same packages (whoMayImport writes one; a doc may add remarks
// in parentheses), and the test holds the two together, so the table is the
// single source of truth and a doc cannot state a rule the code breaks.
//
// Test files (TestGoFiles and XTestGoFiles) are not held to the table: a test
// may import a storage driver, the engine, the scripted provider or a test
// helper (storetest, pgtest, mcptest, freespacetest) to set up what it
// checks. The exception is the public surface (client, longhaultype): its
// tests, like its code, stay free of server-side packages (noDeps), so they
// exercise it as an outside program would.

const module = "github.com/longhaul-dev/longhaul"

// anyone allows every package of the module.
var anyone = []string{"*"}

// serverSide are what the public surface must not pull in, even
// indirectly: anything internal, and the storage drivers' database libraries.
var serverSide = []string{module + "/internal/", "modernc.org/", "github.com/jackc/"}

type importRule struct {
	// testHelper marks a package only tests import (apptest): its own
	// imports are a test's, and as free.
	testHelper bool
	// importers are the packages (relative to the module; "." is the root
	// package) whose non-test code may import this one; anyone, or none
	// (nil) when only tests (or programs outside the module) import it.
	importers []string
	// noDeps are import path prefixes that neither the package's build (its
	// transitive dependencies) nor its tests' direct imports may have.
	noDeps []string
}

var importRules = map[string]importRule{
	// The public surface.
	".":            {},
	"client":       {importers: anyone, noDeps: serverSide},
	"longhaultype": {importers: anyone, noDeps: serverSide},
	"cmd/longhaul": {},
	"e2e":          {},

	// The application service, the engine and what only the engine uses.
	"internal/app":         {importers: []string{".", "internal/node", "internal/server"}},
	"internal/app/apptest": {testHelper: true},
	"internal/engine":      {importers: []string{".", "cmd/longhaul", "internal/app", "internal/bench", "internal/node"}},
	"internal/mcp":         {importers: []string{"internal/engine"}},
	"internal/browser":     {importers: []string{"internal/engine"}},
	"internal/policy":      {importers: []string{"internal/engine"}},
	"internal/trace":       {importers: []string{"internal/engine"}},
	"internal/snapshot": {importers: []string{"internal/engine", "internal/environment", "internal/environment/remote", "internal/export",
		"internal/node", "internal/runner", "internal/runner/hub"}},
	"internal/inotify": {importers: []string{"internal/sandbox", "internal/snapshot"}},
	"internal/workspace": {importers: []string{"internal/engine", "internal/environment", "internal/environment/remote", "internal/node",
		"internal/runner", "internal/tool"}},
	"internal/tool": {importers: []string{".", "internal/bench", "internal/browser", "internal/engine", "internal/environment", "internal/environment/remote", "internal/mcp",
		"internal/node", "internal/runner", "internal/sandbox", "internal/vault"}},
	"internal/sandbox": {importers: []string{"cmd/longhaul", "internal/bench", "internal/engine", "internal/environment", "internal/environment/remote", "internal/mcp", "internal/node",
		"internal/runner"}},
	"internal/runner": {importers: []string{"cmd/longhaul"}},
	// The environment seam (docs/dev/environments.md): the engine opens
	// the sessions' environments through it, the node builds the backend;
	// a runner's environments are local ones on its machine.
	"internal/environment": {importers: []string{"internal/engine", "internal/environment/remote", "internal/mcp", "internal/node",
		"internal/runner"}},
	"internal/environment/remote":          {importers: []string{"internal/node"}},
	"internal/environment/environmenttest": {testHelper: true},
	"internal/runner/hub":                  {importers: []string{"internal/environment/remote", "internal/node", "internal/server"}},
	"internal/runner/link":                 {importers: []string{"cmd/longhaul", "internal/environment/remote", "internal/runner", "internal/runner/hub"}},
	"internal/egress":                      {importers: []string{"internal/engine", "internal/environment", "internal/node", "internal/runner", "internal/tool", "internal/webhook"}},
	"internal/vault":                       {importers: []string{"cmd/longhaul", "internal/app", "internal/engine", "internal/node"}},
	"internal/redact":                      {importers: []string{"cmd/longhaul", "internal/browser", "internal/engine", "internal/node", "internal/vault"}},
	"internal/journal":                     {importers: []string{"internal/engine", "internal/report"}},
	"internal/monitor":                     {importers: []string{"internal/engine"}},

	// Model providers: the node wires them by name.
	"internal/model": {importers: []string{"internal/bench", "internal/engine", "internal/model/anthropic",
		"internal/model/openai", "internal/model/scripted", "internal/node"}},
	"internal/model/anthropic": {importers: []string{"internal/node"}},
	"internal/model/openai":    {importers: []string{"internal/node"}},
	"internal/model/scripted":  {importers: []string{"internal/bench", "internal/node"}},

	// Storage: the interface, and the drivers behind internal/node.
	"internal/store": {importers: []string{".", "cmd/longhaul", "internal/app", "internal/bench", "internal/engine",
		"internal/export", "internal/freespace", "internal/metrics", "internal/node", "internal/otelexport",
		"internal/report", "internal/runner/hub", "internal/server", "internal/store/postgres", "internal/store/sqlite",
		"internal/store/storetest", "internal/store/storeutil", "internal/vault", "internal/webhook"}},
	"internal/store/sqlite":          {importers: []string{"internal/bench", "internal/node"}},
	"internal/store/postgres":        {importers: []string{"internal/bench", "internal/node"}},
	"internal/store/storeutil":       {importers: []string{"internal/node", "internal/store/postgres", "internal/store/sqlite"}},
	"internal/store/storetest":       {},
	"internal/store/postgres/pgtest": {},

	// Transport and wiring.
	"internal/server":     {importers: []string{"internal/node"}},
	"internal/webui":      {importers: []string{"internal/server"}},
	"internal/node":       {importers: []string{".", "cmd/longhaul", "internal/bench"}},
	"internal/apierror":   {importers: anyone},
	"internal/jsonstrict": {importers: []string{"internal/engine", "internal/server"}},
	"internal/buildinfo":  {importers: []string{"cmd/longhaul", "internal/app"}},
	"internal/report":     {importers: []string{"internal/app", "internal/node"}},
	"internal/webhook":    {importers: []string{"internal/app", "internal/export", "internal/node"}},
	"internal/metrics":    {importers: []string{"internal/node"}},
	"internal/otelexport": {importers: []string{"cmd/longhaul", "internal/node"}},
	"internal/export":     {importers: []string{"cmd/longhaul"}},
	"internal/bench":      {importers: []string{"cmd/longhaul"}},
	"internal/freespace":  {importers: []string{"cmd/longhaul", "internal/node", "internal/server"}},
	"internal/openapi":    {importers: []string{"cmd/longhaul", "internal/server"}},
	"internal/httpretry": {importers: []string{"internal/model/anthropic", "internal/model/openai", "internal/tool",
		"internal/webhook"}},

	// Test helpers.
	"internal/freespace/freespacetest": {},
	"internal/mcp/mcptest":             {},
}

// forbidden are the edges that containment and layering rest on, each with
// its reason. importRules already refuses them; they are spelt out so that
// widening an entry to allow one fails here, with the reason, instead of
// passing quietly. A "to" ending in "/" matches the packages below it.
var forbidden = []struct{ from, to, why string }{
	{"internal/engine", "internal/server", "the engine knows no transport"},
	{"internal/engine", "internal/webui", "the engine knows no transport"},
	{"internal/engine", "internal/app", "the application service is built on the engine, not the other way round"},
	{"internal/engine", "internal/store/", "the engine works against store.Store; the node picks the driver"},
	{"internal/app", "internal/server", "the application service knows no transport"},
	{"internal/app", "internal/store/", "the application service works against store.Store"},
	{"internal/server", "internal/engine", "handlers decode, call the application service (internal/app) and encode"},
	{"internal/server", "internal/store/", "handlers never touch a storage driver"},
	{".", "internal/store/", "the library opens stores through internal/node"},
	{"cmd/longhaul", "internal/store/", "the CLI opens stores through internal/node, as the library does"},
	{"client", "internal/", "any program may import the Go client: it carries no server code"},
	{"longhaultype", "internal/", "the wire types carry no server code"},
}

// goPackage is the part of `go list -json` the test reads.
type goPackage struct {
	ImportPath   string
	Dir          string
	Name         string
	Imports      []string
	Deps         []string
	TestImports  []string
	XTestImports []string
}

func TestImportRules(t *testing.T) {
	t.Parallel()
	pkgs := listModulePackages(t)

	byPath := make(map[string]*goPackage, len(pkgs))
	for _, p := range pkgs {
		byPath[rel(p.ImportPath)] = p
	}
	// Iterate in path order, so that failures read the same every run.
	paths := slices.Sorted(maps.Keys(byPath))
	rulePaths := slices.Sorted(maps.Keys(importRules))
	require.Contains(t, byPath, "internal/engine", "sanity: go list returned the module's packages")

	t.Run("every package has a rule", func(t *testing.T) {
		for _, path := range paths {
			if _, ok := importRules[path]; !ok {
				t.Errorf("package %s has no entry in importRules (deps_test.go): add one saying which packages may import it, and say the same in its doc.go", path)
			}
		}
		for _, path := range rulePaths {
			r := importRules[path]
			_, exists := byPath[path]
			if !exists {
				t.Errorf("importRules has an entry for %s, which is not a package of the module: remove it", path)
			}
			for _, imp := range r.importers {
				if _, ok := importRules[imp]; !ok && imp != "*" {
					t.Errorf("importRules[%s] names importer %s, which has no entry", path, imp)
				}
			}
		}
	})

	t.Run("imports follow the rules", func(t *testing.T) {
		for _, path := range paths {
			if importRules[path].testHelper {
				continue
			}
			for _, imp := range byPath[path].Imports {
				to, ok := modulePath(imp)
				if !ok {
					continue
				}
				r, ok := importRules[to]
				if !ok {
					continue // reported above
				}
				if !r.allows(path) {
					t.Errorf("%s imports %s, which only %s may import: if that is right, add %s to importRules[%q] in deps_test.go and to %s/doc.go",
						path, to, r.importersText(), path, to, to)
				}
			}
		}
	})

	// A rule wider than the code is a rule nobody checks: an importer the
	// table names must import the package, or the table (and the doc) must
	// lose it.
	t.Run("every allowed importer imports", func(t *testing.T) {
		for _, to := range rulePaths {
			r := importRules[to]
			if slices.Equal(r.importers, anyone) {
				continue
			}
			for _, from := range r.importers {
				p, ok := byPath[from]
				if !ok {
					continue // reported above
				}
				if !slices.ContainsFunc(p.Imports, func(imp string) bool { rel, ok := modulePath(imp); return ok && rel == to }) {
					t.Errorf("importRules[%q] lets %s import it, which it does not: remove %s from the entry and from %s/doc.go", to, from, from, to)
				}
			}
		}
	})

	t.Run("forbidden edges", func(t *testing.T) {
		for _, f := range forbidden {
			for _, to := range rulePaths {
				if r := importRules[to]; matches(f.to, to) && r.allows(f.from) && !slices.Equal(r.importers, anyone) {
					t.Errorf("importRules lets %s import %s, which is forbidden: %s", f.from, to, f.why)
				}
			}
			p, ok := byPath[f.from]
			if !ok {
				continue
			}
			for _, imp := range p.Imports {
				if to, ok := modulePath(imp); ok && matches(f.to, to) {
					t.Errorf("%s imports %s: %s", f.from, to, f.why)
				}
			}
		}
	})

	t.Run("public surface carries no server code", func(t *testing.T) {
		for _, path := range rulePaths {
			r := importRules[path]
			p, ok := byPath[path]
			if !ok || len(r.noDeps) == 0 {
				continue
			}
			// The package's build: everything it depends on, directly or not.
			for _, dep := range p.Deps {
				for _, prefix := range r.noDeps {
					if strings.HasPrefix(dep, prefix) {
						t.Errorf("package %s depends on %s: it must not depend on anything under %s", path, dep, prefix)
					}
				}
			}
			// Its tests' own imports.
			for _, imp := range slices.Concat(p.TestImports, p.XTestImports) {
				for _, prefix := range r.noDeps {
					if strings.HasPrefix(imp, prefix) {
						t.Errorf("the tests of %s import %s: they must not import anything under %s", path, imp, prefix)
					}
				}
			}
		}
	})

	t.Run("each doc.go states its rule", func(t *testing.T) {
		for _, path := range paths {
			p := byPath[path]
			r, ok := importRules[path]
			if !ok {
				continue
			}
			doc, err := docComment(filepath.Join(p.Dir, "doc.go"))
			if err != nil {
				t.Errorf("package %s: %v (every package has a doc.go that says who may import it)", path, err)
				continue
			}
			stated, err := statedImporters(doc)
			if err != nil {
				t.Errorf("%s/doc.go: %v; say, as importRules in deps_test.go does: %q", path, err, r.whoMayImport())
				continue
			}
			if want := slices.Sorted(slices.Values(r.importers)); !slices.Equal(stated, want) {
				t.Errorf("%s/doc.go says %v may import it, importRules in deps_test.go says %v: make them agree, e.g. %q",
					path, stated, want, r.whoMayImport())
			}
		}
	})
}

// TestImportRulesTable checks the sentence each form of rule gives and how
// a doc's sentence is read.
func TestImportRulesTable(t *testing.T) {
	t.Parallel()
	require.Equal(t, "Who may import it: any package.", importRule{importers: anyone}.whoMayImport())
	require.Equal(t, "Who may import it: no package of the module (tests aside).", importRule{}.whoMayImport())
	require.Equal(t, "Who may import it: internal/node and tests.",
		importRule{importers: []string{"internal/node"}}.whoMayImport())
	require.Equal(t, "Who may import it: the root package, internal/bench, internal/node and tests.",
		importRule{importers: []string{".", "internal/bench", "internal/node"}}.whoMayImport())
	for path, r := range importRules {
		stated, err := statedImporters(r.whoMayImport())
		require.NoError(t, err, path)
		require.Equal(t, slices.Sorted(slices.Values(r.importers)), stated, "%s: the sentence reads back as the rule", path)
	}
	// A doc may explain its importers and order them as it likes.
	stated, err := statedImporters("Who may import it: the root package, internal/node (which builds it), " +
		"internal/server (for the interface), internal/bench, and tests. It imports the engine.")
	require.NoError(t, err)
	require.Equal(t, []string{".", "internal/bench", "internal/node", "internal/server"}, stated)
	_, err = statedImporters("Who may import it: internal/node. Tests may too.")
	require.EqualError(t, err, `"Who may import it:" does not end with "and tests"`)
	_, err = statedImporters("Only cmd/ may import it.")
	require.EqualError(t, err, `no "Who may import it:" sentence`)

	require.True(t, matches("internal/store/", "internal/store/sqlite"))
	require.False(t, matches("internal/store/", "internal/store"))
	require.False(t, matches("internal/app", "internal/apierror"))
}

func (r importRule) allows(importer string) bool {
	return slices.Equal(r.importers, anyone) || slices.Contains(r.importers, importer)
}

// importersText names the allowed importers for an error message.
func (r importRule) importersText() string {
	if len(r.importers) == 0 {
		return "tests"
	}
	return strings.Join(r.importers, ", ")
}

// whoMayImport is the sentence the package's doc.go carries.
func (r importRule) whoMayImport() string {
	const lead = whoMayImportLead + " "
	switch {
	case slices.Equal(r.importers, anyone):
		return lead + "any package."
	case len(r.importers) == 0:
		return lead + "no package of the module (tests aside)."
	}
	names := make([]string, len(r.importers))
	for i, imp := range r.importers {
		names[i] = imp
		if imp == "." {
			names[i] = "the root package"
		}
	}
	return lead + strings.Join(names, ", ") + " and tests."
}

// whoMayImportLead starts the sentence of a doc.go that names the
// package's importers.
const whoMayImportLead = "Who may import it:"

// statedImporters reads the importers a doc comment names in its "Who may
// import it:" sentence (up to the first full stop), sorted: anyone for "any
// package", none for "no package of the module (tests aside)", else a list
// of package paths ("the root package" is ".") that ends with "and tests".
// Parenthesised remarks are skipped.
func statedImporters(doc string) ([]string, error) {
	_, sentence, ok := strings.Cut(doc, whoMayImportLead)
	if !ok {
		return nil, fmt.Errorf("no %q sentence", whoMayImportLead)
	}
	if end := strings.Index(sentence, ". "); end >= 0 {
		sentence = sentence[:end]
	}
	sentence = strings.TrimSuffix(strings.TrimSpace(sentence), ".")
	switch sentence {
	case "any package":
		return anyone, nil
	case "no package of the module (tests aside)":
		return nil, nil
	}
	// Drop the remarks in parentheses.
	var b strings.Builder
	depth := 0
	for _, c := range sentence {
		switch {
		case c == '(':
			depth++
		case c == ')':
			depth--
		case depth == 0:
			b.WriteRune(c)
		}
	}
	list, ok := strings.CutSuffix(strings.TrimSpace(b.String()), "and tests")
	if !ok {
		return nil, fmt.Errorf("%q does not end with \"and tests\"", whoMayImportLead)
	}
	var out []string
	for _, item := range strings.Split(strings.ReplaceAll(list, " and ", ","), ",") {
		switch item = strings.TrimSpace(item); item {
		case "":
		case "the root package":
			out = append(out, ".")
		default:
			out = append(out, item)
		}
	}
	slices.Sort(out)
	return out, nil
}

// matches reports whether path is rule (a package) or, for a rule ending in
// "/", below it.
func matches(rule, path string) bool {
	if strings.HasSuffix(rule, "/") {
		return strings.HasPrefix(path, rule)
	}
	return path == rule
}

// rel is an import path of the module relative to it ("." for the root).
func rel(importPath string) string {
	if importPath == module {
		return "."
	}
	return strings.TrimPrefix(importPath, module+"/")
}

// modulePath is rel for a package of the module, and false for any other.
func modulePath(importPath string) (string, bool) {
	if importPath != module && !strings.HasPrefix(importPath, module+"/") {
		return "", false
	}
	return rel(importPath), true
}

// listModulePackages runs go list -json ./... at the module root (this
// test's directory).
func listModulePackages(t *testing.T) []*goPackage {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not available")
	}
	cmd := exec.Command(goTool, "list", "-json=ImportPath,Dir,Name,Imports,Deps,TestImports,XTestImports", "./...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())
	var pkgs []*goPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p goPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		pkgs = append(pkgs, &p)
	}
	return pkgs
}

// docComment is the comment of the package clause in a doc.go, its lines
// joined by single spaces, so that a sentence matches however it is wrapped.
func docComment(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	var words []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "package ") {
			return strings.Join(words, " "), nil
		}
		if text, ok := strings.CutPrefix(line, "//"); ok {
			words = append(words, strings.Fields(text)...)
		} else {
			words = nil // a comment not attached to the package clause
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errors.New("no package clause")
}
