package vault

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/longhaul-dev/longhaul/internal/apierror"
	"github.com/longhaul-dev/longhaul/internal/redact"
	"github.com/longhaul-dev/longhaul/internal/store"
	"github.com/longhaul-dev/longhaul/internal/tool"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// Config tunes a Vault. A nil *Config, and every zero field, means the
// default named in the field's comment.
type Config struct {
	// Now is the clock of the secrets' created and updated times. Default:
	// time.Now.
	Now func() time.Time
}

// Vault keeps secrets encrypted in a store. It is safe for concurrent use.
type Vault struct {
	st    store.Store
	aead  cipher.AEAD
	keyID string
	now   func() time.Time

	// The redactor of the current values, rebuilt when gen moves past the
	// generation it was built at.
	mu         sync.Mutex
	gen        uint64
	redactor   *redact.Redactor
	redactorAt uint64
	built      bool
}

// Meta is a secret's metadata: everything but the value.
type Meta struct {
	Project   string
	Name      string
	Hosts     []string
	Inject    Injection
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Open returns a vault over st that seals values with key (KeySize bytes,
// see LoadKey). cfg may be nil.
func Open(st store.Store, key []byte, cfg *Config) (*Vault, error) {
	if st == nil {
		return nil, errors.New("open vault: store is nil")
	}
	if len(key) != KeySize {
		return nil, fmt.Errorf("open vault: the key must be %d bytes, got %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("open vault: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("open vault: %w", err)
	}
	v := &Vault{st: st, aead: aead, keyID: keyID(key), now: time.Now}
	if cfg != nil && cfg.Now != nil {
		v.now = cfg.Now
	}
	return v, nil
}

// KeyID identifies the vault's key (not the key itself).
func (v *Vault) KeyID() string { return v.keyID }

// aad binds a ciphertext to its secret's project and name, so that a row
// copied into another project does not decrypt there. The default
// project's keeps the form it had before projects existed, so that the
// rows sealed then still open.
func aad(project, name string) []byte {
	if project == lt.DefaultProject {
		return append([]byte("longhaul-vault-v1\x00"), name...)
	}
	return append(append(append([]byte("longhaul-vault-v2\x00"), project...), 0), name...)
}

// inProject is the project a secret is looked up or stored in: "" is the
// default project (sessions stored before projects existed have none).
func inProject(project string) string {
	if project == "" {
		return lt.DefaultProject
	}
	return project
}

func (v *Vault) seal(project, name, value string) (ciphertext, nonce []byte) {
	nonce = make([]byte, v.aead.NonceSize())
	_, _ = rand.Read(nonce) // crypto/rand.Read never fails (Go 1.24+)
	return v.aead.Seal(nil, nonce, []byte(value), aad(project, name)), nonce
}

// open decrypts a row. The error names the secret and the cause, never
// any byte of the value.
func (v *Vault) open(row *store.SecretRow) (string, error) {
	if row.KeyID != v.keyID {
		return "", fmt.Errorf("decrypt secret %s: it was sealed with key %s but the vault has key %s: restore the key it was set with, or set the secret again", row.Name, row.KeyID, v.keyID)
	}
	if len(row.Nonce) != v.aead.NonceSize() {
		return "", fmt.Errorf("decrypt secret %s: the stored nonce has %d bytes, want %d", row.Name, len(row.Nonce), v.aead.NonceSize())
	}
	plain, err := v.aead.Open(nil, row.Nonce, row.Ciphertext, aad(row.Project, row.Name))
	if err != nil {
		// Not wrapped: the cipher's error says nothing more.
		return "", fmt.Errorf("decrypt secret %s: the ciphertext does not authenticate (the row was altered, or copied from another secret)", row.Name)
	}
	return string(plain), nil
}

// Put creates the secret name of project ("": the default project), or
// replaces its value, hosts and injection, and returns its metadata and
// whether it created it. Invalid input is an *apierror.Error naming the
// field; no error ever contains the value.
func (v *Vault) Put(ctx context.Context, project, name, value string, hosts []string, inject Injection) (*Meta, bool, error) {
	return v.put(ctx, project, name, value, hosts, &inject)
}

// put is Put with the injection optional (nil: missing, a 400).
func (v *Vault) put(ctx context.Context, project, name, value string, hosts []string, inject *Injection) (*Meta, bool, error) {
	project = inProject(project)
	if err := checkName(name); err != nil {
		return nil, false, err
	}
	if err := checkValue(value); err != nil {
		return nil, false, err
	}
	hosts, err := normalizeHosts(hosts)
	if err != nil {
		return nil, false, err
	}
	inj, err := normalizeInjection(inject)
	if err != nil {
		return nil, false, err
	}
	injJSON, err := json.Marshal(inj)
	if err != nil {
		return nil, false, fmt.Errorf("put secret %s: encode injection: %w", name, err)
	}
	now := v.now().UTC().Truncate(time.Microsecond)
	ciphertext, nonce := v.seal(project, name, value)
	row := &store.SecretRow{
		Project: project, Name: name, Ciphertext: ciphertext, Nonce: nonce, KeyID: v.keyID,
		Hosts: hosts, Inject: injJSON, CreatedAt: now, UpdatedAt: now,
	}
	created, err := v.st.SecretPut(ctx, row)
	v.changed()
	if err != nil {
		return nil, false, fmt.Errorf("put secret %s: %w", name, err)
	}
	// A replacement keeps its creation time: read it back.
	meta := &Meta{Project: project, Name: name, Hosts: hosts, Inject: inj, CreatedAt: now, UpdatedAt: now}
	if !created {
		stored, err := v.st.SecretGet(ctx, project, name)
		if err != nil {
			return nil, false, fmt.Errorf("put secret %s: read back: %w", name, err)
		}
		meta.CreatedAt = stored.CreatedAt
	}
	return meta, created, nil
}

// meta decodes a row's metadata.
func meta(row *store.SecretRow) (Meta, error) {
	m := Meta{Project: row.Project, Name: row.Name, Hosts: slices.Clone(row.Hosts), CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt}
	if err := json.Unmarshal(row.Inject, &m.Inject); err != nil {
		return Meta{}, fmt.Errorf("secret %s: stored injection: %w", row.Name, err)
	}
	return m, nil
}

// List returns the metadata of every secret of project ("": of every
// project), by project and name.
func (v *Vault) List(ctx context.Context, project string) ([]Meta, error) {
	rows, err := v.st.SecretList(ctx, project)
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	out := make([]Meta, 0, len(rows))
	for _, row := range rows {
		m, err := meta(row)
		if err != nil {
			return nil, fmt.Errorf("list secrets: %w", err)
		}
		out = append(out, m)
	}
	return out, nil
}

// Delete removes the secret name of project ("": the default project);
// an unknown name is a 404 *apierror.Error.
func (v *Vault) Delete(ctx context.Context, project, name string) error {
	project = inProject(project)
	if err := checkName(name); err != nil {
		return err
	}
	err := v.st.SecretDelete(ctx, project, name)
	v.changed()
	if errors.Is(err, store.ErrNotFound) {
		return apierror.NotFound("secret %s does not exist in project %s", name, project)
	}
	if err != nil {
		return fmt.Errorf("delete secret %s: %w", name, err)
	}
	return nil
}

// Value returns the value of the secret name of project ("": the default
// project), wherever it goes. An unknown name is an *UnknownSecretError.
// The server's own credentials (a model's api_key_secret) are read with
// ValueFor instead, which keeps to the secret's hosts.
func (v *Vault) Value(ctx context.Context, project, name string) (string, error) {
	rows, err := v.rowsFor(ctx, project, []string{name})
	if err != nil {
		return "", err
	}
	return v.open(rows[0])
}

// NotBoundError is the error of a secret asked for a destination that is
// not one of its hosts. It names the secret and the destination, never
// the value.
type NotBoundError struct {
	Name string
	Dest string
}

// NotBound names the secret (the engine tells this error from a storage
// failure by it).
func (e *NotBoundError) NotBound() string { return e.Name }

func (e *NotBoundError) Error() string {
	return fmt.Sprintf("secret %s is not bound to %s (it goes only to its hosts: add the host with `longhaul secret set`)", e.Name, e.Dest)
}

// CheckBound checks that the secret name exists in project ("": the
// default project) and that dest (a host and a port, as HostMatches takes
// it) is one of its hosts, without decrypting anything (for validating a
// model's api_key_secret, or listing what goes with a request). An unknown
// name is an *UnknownSecretError, an unbound destination a *NotBoundError,
// a login secret (which goes into no key or header) a *LoginOnlyError.
func (v *Vault) CheckBound(ctx context.Context, project, name, dest string) error {
	rows, err := v.rowsFor(ctx, project, []string{name})
	if err != nil {
		return err
	}
	return checkKey(rows[0], name, dest)
}

// checkKey checks that row (the secret name) may go to dest as a key or a
// header: bound to dest, and not a login.
func checkKey(row *store.SecretRow, name, dest string) error {
	m, err := meta(row)
	if err != nil {
		return err
	}
	if m.Inject.Login != nil {
		return &LoginOnlyError{Name: name}
	}
	if !HostMatches(row.Hosts, dest) {
		return &NotBoundError{Name: name, Dest: dest}
	}
	return nil
}

// ValueFor returns the value of the secret name of project ("": the
// default project) for a request to dest (a host and a port), checked
// against the hosts of the very row it decrypts: a secret whose hosts
// changed since an agent was defined goes only to its hosts of now.
// Errors as CheckBound's.
func (v *Vault) ValueFor(ctx context.Context, project, name, dest string) (string, error) {
	rows, err := v.rowsFor(ctx, project, []string{name})
	if err != nil {
		return "", err
	}
	if err := checkKey(rows[0], name, dest); err != nil {
		return "", err
	}
	return v.open(rows[0])
}

// Values returns the value of every secret of every project, for the
// redactor (a value is redacted wherever it appears, whichever project it
// belongs to), keyed by name, or by project/name outside the default
// project. A secret that cannot be decrypted (another key, an altered
// row) is an error naming it: the redactor must not silently miss it.
func (v *Vault) Values(ctx context.Context) (map[string]string, error) {
	rows, err := v.st.SecretList(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("read secret values: %w", err)
	}
	out := make(map[string]string, len(rows))
	for _, row := range rows {
		value, err := v.open(row)
		if err != nil {
			return nil, err
		}
		key := row.Name
		if row.Project != lt.DefaultProject {
			key = row.Project + "/" + row.Name
		}
		out[key] = value
	}
	return out, nil
}

// Check decrypts every secret and reports those that cannot be (a node
// calls it at start-up, so a wrong key is said at once, not at the first
// request that needs a secret).
func (v *Vault) Check(ctx context.Context) error {
	rows, err := v.st.SecretList(ctx, "")
	if err != nil {
		return fmt.Errorf("check secrets: %w", err)
	}
	var errs []error
	for _, row := range rows {
		if _, err := v.open(row); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Redactor returns a redactor of every secret's current value. It is built
// once and rebuilt after this vault changes a secret, or after Invalidate
// (call it when the store notifies store.KindSecrets: another node changed
// one).
func (v *Vault) Redactor(ctx context.Context) (*redact.Redactor, error) {
	v.mu.Lock()
	gen := v.gen
	if v.built && v.redactorAt == gen {
		r := v.redactor
		v.mu.Unlock()
		return r, nil
	}
	v.mu.Unlock()

	values, err := v.Values(ctx)
	if err != nil {
		return nil, err
	}
	r := redact.New(values)
	v.mu.Lock()
	defer v.mu.Unlock()
	// Keep it unless a newer build got there first; if a secret changed
	// while it was built, gen has moved on and the next call rebuilds.
	if !v.built || v.redactorAt <= gen {
		v.redactor, v.redactorAt, v.built = r, gen, true
	}
	return r, nil
}

// Invalidate makes the next Redactor call re-read the values.
func (v *Vault) Invalidate() { v.changed() }

func (v *Vault) changed() {
	v.mu.Lock()
	v.gen++
	v.mu.Unlock()
}

// UnknownSecretError is returned for a name that no secret of Project
// has; Index is its position in the names given (an agent's
// environment.secrets).
type UnknownSecretError struct {
	Name    string
	Index   int
	Project string
}

// UnknownSecret names the missing secret (the engine tells this error
// from a storage failure by it).
func (e *UnknownSecretError) UnknownSecret() string { return e.Name }

func (e *UnknownSecretError) Error() string {
	if e.Project != "" && e.Project != lt.DefaultProject {
		return fmt.Sprintf("secret %s does not exist in project %s (set it with `longhaul secret set %s --project %s`)", e.Name, e.Project, e.Name, e.Project)
	}
	return fmt.Sprintf("secret %s does not exist (set it with `longhaul secret set %s`)", e.Name, e.Name)
}

// Require checks that every name is a secret of project ("": the default
// project), without decrypting anything (for validating an agent's
// environment.secrets when it is defined). The first unknown name is an
// *UnknownSecretError.
func (v *Vault) Require(ctx context.Context, project string, names []string) error {
	_, err := v.rowsFor(ctx, project, names)
	return err
}

// rowsFor returns the rows of names in project ("": the default project),
// in their order: a secret of another project is unknown here, whatever
// its name.
func (v *Vault) rowsFor(ctx context.Context, project string, names []string) ([]*store.SecretRow, error) {
	project = inProject(project)
	rows, err := v.st.SecretList(ctx, project)
	if err != nil {
		return nil, fmt.Errorf("read secrets: %w", err)
	}
	byName := make(map[string]*store.SecretRow, len(rows))
	for _, r := range rows {
		byName[r.Name] = r
	}
	out := make([]*store.SecretRow, 0, len(names))
	for i, n := range names {
		r, ok := byName[n]
		if !ok {
			return nil, &UnknownSecretError{Name: n, Index: i, Project: project}
		}
		out = append(out, r)
	}
	return out, nil
}

// Source returns the credentials of the secrets of project ("": the
// default project) that names (an agent's environment.secrets) lists, for
// the http_request tool: its ForHost gives those bound to a host,
// formatted for their header. The values are read now; build a new Source
// per tool call so that changes apply. An unknown name, or one only
// another project has, is an *UnknownSecretError.
func (v *Vault) Source(ctx context.Context, project string, names []string) (tool.SecretSource, error) {
	rows, err := v.rowsFor(ctx, project, names)
	if err != nil {
		return nil, err
	}
	src := &source{}
	for _, row := range rows {
		m, err := meta(row)
		if err != nil {
			return nil, err
		}
		if m.Inject.Login != nil {
			// A login is typed into a site's form by the browser, never
			// put into a request's header.
			continue
		}
		value, err := v.open(row)
		if err != nil {
			return nil, err
		}
		src.creds = append(src.creds, bound{
			hosts: m.Hosts,
			cred:  tool.Credential{Name: m.Name, Header: m.Inject.Header, Value: headerValue(m.Inject, value)},
		})
	}
	sort.Slice(src.creds, func(i, j int) bool { return src.creds[i].cred.Name < src.creds[j].cred.Name })
	return src, nil
}

// source is a tool.SecretSource over decrypted credentials.
type source struct {
	creds []bound
}

type bound struct {
	hosts []string
	cred  tool.Credential
}

// ForHost returns the credentials bound to host (a request's host and
// port; without a port, only secrets bound to no port match), by name.
func (s *source) ForHost(host string) []tool.Credential {
	var out []tool.Credential
	for _, b := range s.creds {
		if HostMatches(b.hosts, host) {
			out = append(out, b.cred)
		}
	}
	return out
}

// String keeps the credentials out of anything that prints a source.
func (s *source) String() string { return fmt.Sprintf("vault source (%d secrets)", len(s.creds)) }

// GoString hides the credentials from %#v too.
func (s *source) GoString() string { return s.String() }
