// Package vault keeps the server's secrets: API keys and passwords that the
// http_request tool injects into requests to the hosts each secret is bound
// to, from outside the sandbox, so that no secret enters a session's model
// context or its journal, nor its environment but for one exception: a
// login, which the browser types into its own site's form (see the
// invariants below; DESIGN.md principle 8).
//
// # Encryption at rest
//
// A value is sealed with AES-256-GCM under the vault key before it reaches
// the store, with a fresh random 96-bit nonce per write. The additional
// authenticated data binds the ciphertext to the secret's name, so a row
// copied or renamed to another name in the database fails to decrypt rather
// than handing one secret's value out under the other's name and hosts.
// Each row records the id of the key that sealed it (an HMAC of the key,
// not the key), so a vault opened with another key says so plainly.
//
// The key comes from LONGHAUL_VAULT_KEY (the base64 of 32 random bytes, for
// example from `openssl rand -base64 32`) or from a key file, by default
// vault.key in the data directory, created with mode 0600 and a random key
// the first time. The encryption protects the secrets only from someone who
// has the database without the key: keep the key file apart from the
// database's backups (or supply the key through the environment from a
// secret manager), and back it up on its own. Lose it, and every secret must
// be set again; a key file readable by other users is refused.
//
// # Invariants
//
//   - No value is ever returned by the API (List and the HTTP endpoints give
//     names, hosts, injection and times), written to the store in plain
//     text, or put into an error message or a log line.
//   - Names match ^[A-Z][A-Z0-9_]{0,63}$ (like environment variables). Values
//     are 8 bytes to 8 KiB, without control characters (they go into HTTP
//     headers). Hosts are DNS names, "*.suffix" wildcards (any subdomain of
//     suffix, never suffix itself) or IP addresses, each optionally with a
//     port: with one, the secret goes to that port only.
//   - A login secret (inject {"login": …}, the value the password) is
//     never injected into a request nor given as a model's key (a
//     *LoginOnlyError): Login hands it to the browser's login
//     action only for a page on one of its hosts, and the browser types it
//     into that page's form. That is the one way a value enters a session's
//     sandbox (Chromium runs there), as when a person types a password;
//     see internal/browser.
//   - A Source hands out only the secrets an agent names, and of those only
//     the ones bound to the host and port a request goes to, ready to
//     inject. ValueFor hands a model key (api_key_secret) out only for a
//     destination among the secret's hosts, checked on the row it decrypts.
//
// Redaction of values from everything the server writes is the job of
// internal/redact; Values and Redactor feed it.
//
// It imports the standard library, internal/store, internal/tool,
// internal/redact, internal/apierror and longhaultype. Who may import it:
// cmd/longhaul, internal/app, internal/engine, internal/node and tests.
package vault
