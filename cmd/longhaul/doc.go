// Command longhaul is Longhaul's one binary: the server (`serve`), an offline
// demo (`demo`), the store's maintenance (`migrate`, `export`, `import`,
// which work on a store directly), and a command-line client for people and scripts (`run`,
// `ls`, `show`, `events`, `cancel`, `pause`, `resume`, `actions`, `respond`, `decide`,
// `inbox`, `action`, `approve`, `reject`, `stop`, `answer`, `budget`,
// `effects`, `agents`, `artifacts`, `artifact`).
//
// Invariants it keeps:
//
//   - main calls execute(ctx, args, stdout, stderr, getenv), which returns the error
//     that ended the command; reportError prints it and maps it to the exit
//     code: 0 success, 1 failure (an API error shows its code, message and
//     field), 2 a usage mistake, 130 interrupted.
//   - Client commands talk HTTP only through package client; only the node
//     (node.go, used by serve and demo, over internal/node, the wiring the
//     Go library shares) imports the engine, and no file imports a storage
//     driver: migrate.go opens a store for serve, migrate, export and
//     import through internal/node. The module's deps_test.go holds these
//     rules, and keeps package client free of server-side code.
//   - Flags win over environment variables (LONGHAUL_*), which win over
//     defaults; secrets from the environment never appear as --help
//     defaults.
//   - Hand-written files (longhaul.yaml, agent specs) are decoded strictly:
//     an unknown or mistyped field is an error naming the file, the line and
//     the field's path.
//
// Who may import it: no package of the module (tests aside).
package main
