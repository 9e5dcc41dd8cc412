package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/longhaul-dev/longhaul/client"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// The web UI as each role sees it, in headless Chromium against the real
// binary with stored keys: the header names who is signed in, an approver
// is offered the decision and a cancel but none of an operator's controls,
// a reader is offered nothing to decide or change, and a decision names
// who made it. The pages must not offer a control that would earn a 403:
// the browser's console would report it, and that fails the test too.

// rolesSetup is a server with a bootstrap key, stored keys of an operator
// (olivia), an approver (alice), a reader (rita) and a runner (rob), and a
// session started by olivia that waits for the approval of a write.
// approvers, when not "", is the policy's requirement on who decides it
// (JSON).
type rolesSetup struct {
	browser  *browser
	srv      *server
	operator *client.Client
	keys     map[lt.Role]lt.APIKey
	session  *lt.Session
	action   lt.Action
	// card selects the action's card in a page.
	card string
}

// rolesBootstrapKey is the server's bootstrap (admin) key in these tests.
const rolesBootstrapKey = "lh-roles-ui-bootstrap"

func setUpRoles(ctx context.Context, t *testing.T, approvers string) *rolesSetup {
	t.Helper()
	b := startBrowser(t)
	srv := startServer(t, "--api-key", rolesBootstrapKey)
	admin := keyedClient(t, srv, rolesBootstrapKey)
	keys := map[lt.Role]lt.APIKey{}
	for role, name := range map[lt.Role]string{lt.RoleOperator: "olivia", lt.RoleApprover: "alice", lt.RoleReader: "rita", lt.RoleRunner: "rob"} {
		k, err := admin.CreateKey(ctx, &lt.CreateKeyRequest{Name: name, Role: role})
		require.NoError(t, err)
		keys[role] = *k
	}
	operator := keyedClient(t, srv, keys[lt.RoleOperator].Key)
	sess, action := startApproval(ctx, t, srv, keys[lt.RoleOperator].Key, approvers)
	return &rolesSetup{browser: b, srv: srv, operator: operator, keys: keys, session: sess, action: action,
		card: fmt.Sprintf(`article[data-action-id=%q]`, action.ID)}
}

// startApproval starts a session as the key and returns it with the
// approval of a write it then waits for. The body is built as JSON, not
// as lt types: approvers (who may decide the approval), when not "", is
// the policy's as the API takes it.
func startApproval(ctx context.Context, t *testing.T, srv *server, key, approvers string) (*lt.Session, lt.Action) {
	t.Helper()
	policy := map[string]any{"name": "review-writes", "tool": "write_file", "decision": "ask", "reason": "a person reads what is written"}
	if approvers != "" {
		policy["approvers"] = json.RawMessage(approvers)
	}
	body, err := json.Marshal(map[string]any{
		"agent_spec": map[string]any{
			"model": map[string]any{"provider": "scripted", "name": "demo", "script": []map[string]any{
				{"text": "I will write the release note.", "tool_calls": []map[string]any{
					{"name": "write_file", "arguments": map[string]any{"path": "NOTES.md", "content": "# Release 1.2\n"}}}},
				{"text": "The release note is written."},
			}},
			"tools":    []map[string]any{{"name": "write_file"}},
			"policies": []map[string]any{policy},
		},
		"input": "Write the release note",
		"goal":  "A release note for 1.2",
	})
	require.NoError(t, err)
	r := httpSend(t, srv, http.MethodPost, "/v1/sessions", "", body,
		map[string]string{"Authorization": "Bearer " + key, "Content-Type": "application/json"})
	require.Equal(t, http.StatusCreated, r.status, "create the session: %s", r.body)
	sess := &lt.Session{}
	require.NoError(t, json.Unmarshal(r.body, sess))

	api := keyedClient(t, srv, key)
	var action lt.Action
	waitFor(t, browserTimeout, "the write_file approval", func() (bool, error) {
		l, err := api.ListActions(ctx, sess.ID, lt.ActionPending)
		if err != nil || len(l.Data) == 0 {
			return false, err
		}
		action = l.Data[0]
		return true, nil
	})
	require.Equal(t, lt.ActionApproval, action.Type)
	return sess, action
}

// signIn opens the UI at hash in a new tab and signs in with key; it
// returns the tab once the header names who is signed in.
func (s *rolesSetup) signIn(name, key, hash string) context.Context {
	b := s.browser
	b.t.Helper()
	tab := b.tab(name)
	b.do(tab, "open the UI as "+name, navigate(s.srv.url+"/"+hash))
	b.waitJS(tab, "the sign-in form", `document.querySelector('#login-form') !== null`)
	b.setValue(tab, "#api-key", key)
	b.click(tab, "#sign-in")
	b.waitJS(tab, "the header to name "+name, fmt.Sprintf(`(document.querySelector('#whoami-name') || {}).innerText === %s`, jsString(name)))
	return tab
}

// visible is a JavaScript expression: whether the element sel exists and
// is shown (it and its ancestors are not hidden).
func visible(sel string) string {
	return fmt.Sprintf(`(() => { const el = document.querySelector(%s); return !!el && el.getClientRects().length > 0; })()`, jsString(sel))
}

// TestWebUIApproverView: signed in as the approver alice, the header says
// alice, approver, project default, with a sign-out; the inbox card offers
// Approve; the session page offers Cancel (an approver may stop work) but
// not pause, steer, follow-up or fork (an operator's). Signed in as the
// reader rita: no decision form and no control at all, only a note why;
// as the runner rob: no page at all, the sign-in form saying why;
// as the operator olivia: pause, steer, follow-up and cancel, and no
// decision. The files tab lets the operator upload, not the approver.
// Approving from the inbox resolves the action, and the decision shows in
// the inbox's and the session page's decided lists; the idle session is
// the approver's to review, not the reader's.
func TestWebUIApproverView(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	s := setUpRoles(ctx, t, "")
	b, card := s.browser, s.card

	alice := s.signIn("alice", s.keys[lt.RoleApprover].Key, "#/inbox")
	require.Equal(t, "approver", b.text(alice, "#whoami .role"))
	require.Equal(t, "project default", b.text(alice, "#whoami-project"))
	b.waitJS(alice, "the sign-out", visible("#sign-out"))
	b.waitJS(alice, "the approval in the inbox", visible(card+` button[data-act="approve"]`))
	require.False(t, b.jsBool(alice, `document.querySelector('#inbox-read-only') !== null`), "the approver's inbox is not read-only")
	for _, act := range []string{"edit", "reject-open", "stop-open"} {
		b.waitJS(alice, "the "+act+" button", visible(card+fmt.Sprintf(` button[data-act=%q]`, act)))
	}
	b.screenshot(alice, "approver-inbox")

	// The session page: the approver's controls, none of the operator's.
	b.goTo(alice, "#/sessions/"+s.session.ID)
	b.waitJS(alice, "the pending card on the session page", visible(`#pending-actions `+card+` button[data-act="approve"]`))
	b.waitJS(alice, "the cancel control", visible("#cancel"))
	for _, sel := range []string{"#pause", "#resume", "#pause-control", "#steer-control", "#steer", "#send-turn", "#follow-up"} {
		require.False(t, b.jsBool(alice, visible(sel)), "an approver is offered %s", sel)
	}
	b.click(alice, `.tab[data-tab="checkpoints"]`)
	b.waitJS(alice, "the checkpoints tab", `document.querySelector('#tab-checkpoints') && !document.querySelector('#tab-checkpoints').hidden`)
	require.False(t, b.jsBool(alice, visible("button.fork")), "an approver is offered a fork")
	// The workspace may be changed while the session waits, but not by
	// an approver: browsing only.
	b.click(alice, `.tab[data-tab="files"]`)
	b.waitJS(alice, "the files tab's notice", `(document.querySelector('#files-writable') || {}).innerText?.includes('your role (approver) may not change')`)
	require.False(t, b.jsBool(alice, visible("#files-upload")), "an approver is offered an upload")
	b.click(alice, `.tab[data-tab="timeline"]`)
	b.screenshot(alice, "approver-session")

	// Rita reads: the same card with no form, and no controls.
	rita := s.signIn("rita", s.keys[lt.RoleReader].Key, "#/sessions/"+s.session.ID)
	require.Equal(t, "reader", b.text(rita, "#whoami .role"))
	b.waitJS(rita, "the pending card, with a note instead of a form", visible(`#pending-actions `+card+` .role-note`))
	require.Contains(t, b.text(rita, card+" .role-note"), "your role (reader) may not decide")
	require.False(t, b.jsBool(rita, fmt.Sprintf(`document.querySelector(%s) !== null`, jsString(card+" button[data-act]"))), "a reader is offered a decision")
	require.False(t, b.jsBool(rita, visible("#controls")), "a reader is offered controls")
	b.screenshot(rita, "reader-session")
	b.goTo(rita, "#/inbox")
	b.waitJS(rita, "the card in the reader's inbox", visible(`#inbox-list `+card+` .role-note`))
	require.Contains(t, b.text(rita, "#inbox-read-only"), "Your role (reader) may not decide actions")
	require.False(t, b.jsBool(rita, fmt.Sprintf(`document.querySelector(%s) !== null`, jsString(card+" button[data-act]"))), "a reader is offered a decision in the inbox")

	// Rob's key connects an environment and nothing else: the server
	// tells the UI nothing of it (GET /v1/me is a 403), so the sign-in
	// form says why, keeps no key, and shows no page.
	rob := b.tab("rob")
	b.do(rob, "open the UI as rob", navigate(s.srv.url+"/#/sessions/"+s.session.ID))
	b.waitJS(rob, "the sign-in form", `document.querySelector('#login-form') !== null`)
	b.setValue(rob, "#api-key", s.keys[lt.RoleRunner].Key)
	b.click(rob, "#sign-in")
	b.waitJS(rob, "the runner's note", visible("#no-access"))
	require.Contains(t, b.text(rob, "#no-access"), "a runner key opens its connection and nothing else")
	require.False(t, b.jsBool(rob, visible("#nav")), "a runner is offered the navigation")
	// The page's own hashchange listener (added at start) routes first;
	// this one then reads what it built (the inbox builds its list at once).
	b.eval(rob, `window.__routed = new Promise((resolve) => addEventListener('hashchange',
		() => resolve(document.querySelector('#inbox-list') !== null), {once: true})), null`, nil)
	b.goTo(rob, "#/inbox")
	require.False(t, b.jsBool(rob, `window.__routed`), "a runner is shown the inbox")
	b.waitJS(rob, "the sign-in form, for a key of another role", visible("#login-form"))
	require.False(t, b.jsBool(rob, visible("#sign-out")), "a runner is signed in")

	// Olivia runs the work: an operator's controls, no decision.
	olivia := s.signIn("olivia", s.keys[lt.RoleOperator].Key, "#/sessions/"+s.session.ID)
	b.waitJS(olivia, "the pending card, with a note instead of a form", visible(`#pending-actions `+card+` .role-note`))
	require.Contains(t, b.text(olivia, card+" .role-note"), "your role (operator) may not decide")
	require.False(t, b.jsBool(olivia, fmt.Sprintf(`document.querySelector(%s) !== null`, jsString(card+" button[data-act]"))), "an operator is offered a decision")
	for _, sel := range []string{"#pause", "#steer", "#send-turn", "#cancel"} {
		b.waitJS(olivia, "the operator's "+sel, visible(sel))
	}
	b.click(olivia, `.tab[data-tab="files"]`)
	b.waitJS(olivia, "the operator's upload control", visible("#files-upload"))
	b.screenshot(olivia, "operator-session")

	// Alice approves from the inbox; the session goes on.
	b.goTo(alice, "#/inbox")
	b.waitJS(alice, "the approval in the inbox again", visible(card+` button[data-act="approve"]`))
	b.click(alice, card+` button[data-act="approve"]`)
	b.waitJS(alice, "the approval's confirmation", fmt.Sprintf(`(document.querySelector(%s) || {}).innerText?.includes('Approved')`, jsString(card+" .result")))
	got, err := s.operator.GetAction(ctx, s.action.ID)
	require.NoError(t, err)
	require.Equal(t, lt.ActionResolved, got.Status)
	b.waitJS(alice, "the decision among the recently decided", fmt.Sprintf(
		`(document.querySelector(%s) || {}).innerText?.includes('approved')`, jsString(`#inbox-decided li[data-action-id="`+s.action.ID+`"]`)))

	// The reader's session page lists it as decided, live.
	b.goTo(rita, "#/sessions/"+s.session.ID)
	b.waitJS(rita, "the decided action on the reader's session page", fmt.Sprintf(
		`(document.querySelector(%s) || {}).innerText?.includes('approved')`, jsString(`#decided-actions li[data-action-id="`+s.action.ID+`"]`)))
	b.waitJS(rita, "the session to end idle", `document.querySelector('.head-status [data-status="idle"]') !== null`)
	b.screenshot(rita, "reader-session-decided")
	require.False(t, b.jsBool(rita, visible("#review")), "a reader is offered the review")

	// The idle session is Alice's to review.
	b.goTo(alice, "#/sessions/"+s.session.ID)
	b.waitJS(alice, "the review form for the approver", visible("#review-accept"))
}

// TestWebUIShowsWhoDecided: the actor of every decision in the UI. The
// approver alice approves a session the operator olivia started: alice's
// card says "Decided by alice (approver)" (from the action's resolved_by
// in the decision's answer), the inbox's and the session page's decided
// lists and the timeline's action.resolved say "by alice (approver)", and
// the session page and the sessions list say olivia (operator) started it.
// The approval's policy names who may decide it, and the card says so; to
// the admin who started a session whose policy says not_creator, the card
// says someone else must decide. This needs
// the server to record actors (resolved_by, created_by, the events'
// actor): the UI shows them when present.
func TestWebUIShowsWhoDecided(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	s := setUpRoles(ctx, t, `{"roles": ["admin", "approver"], "not_creator": true}`)
	b, card := s.browser, s.card

	alice := s.signIn("alice", s.keys[lt.RoleApprover].Key, "#/inbox")
	b.waitJS(alice, "the approval in the inbox", visible(card+` button[data-act="approve"]`))
	require.Equal(t, "a key of role admin or approver; not who started the session", b.text(alice, card+" .approvers"),
		"the card says who may decide, and alice is among them")
	b.click(alice, card+` button[data-act="approve"]`)
	b.waitJS(alice, "the card to say who decided", fmt.Sprintf(
		`(document.querySelector(%s) || {}).innerText === 'Decided by alice (approver)'`, jsString(card+" .decided-by")))
	b.waitJS(alice, "the recently decided list to name alice", fmt.Sprintf(
		`(document.querySelector(%s) || {}).innerText === 'by alice (approver)'`, jsString(`#inbox-decided li[data-action-id="`+s.action.ID+`"] .actor`)))

	b.goTo(alice, "#/sessions/"+s.session.ID)
	b.waitJS(alice, "the timeline's action.resolved to name alice", `(document.querySelector('#timeline li[data-type="action.resolved"] .ev-actor') || {}).innerText === 'by alice (approver)'`)
	b.waitJS(alice, "the decided list to name alice", fmt.Sprintf(
		`(document.querySelector(%s) || {}).innerText === 'by alice (approver)'`, jsString(`#decided-actions li[data-action-id="`+s.action.ID+`"] .actor`)))
	b.waitJS(alice, "the session to name its creator", `(document.querySelector('.overview') || {}).innerText?.includes('olivia (operator)')`)
	b.screenshot(alice, "who-decided")
	b.goTo(alice, "#/sessions")
	b.waitJS(alice, "the sessions list to name who started it", fmt.Sprintf(
		`(document.querySelector(%s) || {}).innerText === 'started by olivia (operator)'`, jsString(`tr[data-session-id="`+s.session.ID+`"] .created-by`)))

	// Separation of duties: the admin who starts a session whose policy
	// says not_creator is told, on the card, that someone else must decide.
	mine, own := startApproval(ctx, t, s.srv, rolesBootstrapKey, `{"not_creator": true}`)
	boot := s.signIn("bootstrap", rolesBootstrapKey, "#/sessions/"+mine.ID)
	b.waitJS(boot, "the card to tell its creator someone else must decide", fmt.Sprintf(
		`(document.querySelector(%s) || {}).innerText === 'not who started the session You started this session, so someone else must decide.'`,
		jsString(fmt.Sprintf(`#pending-actions article[data-action-id=%q] .approvers`, own.ID))))
	b.screenshot(boot, "creator-may-not-decide")
}

// jsBool evaluates a JavaScript boolean expression in the tab.
func (b *browser) jsBool(ctx context.Context, expr string) bool {
	b.t.Helper()
	var v bool
	b.eval(ctx, expr, &v)
	return v
}

// TestWebUIIdentityModule runs identity.js and the action cards in the
// browser on fixtures of what the server records once actors are on
// (resolved_by, created_by, a policy's approvers): who decided is named,
// a requirement on who decides is spelled out with why the signed-in key
// is not among them, and a role that may not decide gets no form.
func TestWebUIIdentityModule(t *testing.T) {
	b := startBrowser(t)
	srv := startServer(t)
	tab := b.root
	b.do(tab, "open the UI", navigate(srv.url+"/#/sessions"))
	b.waitJS(tab, "the local caller in the header", `(document.querySelector('#whoami-name') || {}).innerText === 'local'`)
	require.Equal(t, "all projects", b.text(tab, "#whoami-project"))
	require.False(t, b.jsBool(tab, visible("#sign-out")), "no key, nothing to sign out of")
	base := `document.querySelector('script[type=module]').src.replace(/js\/main\.js$/, '')`

	var got struct {
		Actor, NoActor, Approvers, ExRole, ExName, ExCreator, OkCreator, OkSubagent string
		Can                                                                         []bool
		PendingWho                                                                  string
		PendingButtons, ReaderButtons                                               int
		ReaderNote, ResolvedBy, Row                                                 string
	}
	b.eval(tab, `(async () => {
		const id = await import(`+base+` + 'js/identity.js');
		const { actionCard, decidedRow } = await import(`+base+` + 'js/actions.js');
		const saved = id.identity();
		const alice = {key_id: 'key_a', name: 'alice', role: 'approver'};
		const now = new Date().toISOString();
		const r = {};
		try {
			id.setIdentity({key_id: 'key_b', name: 'bob', role: 'approver', project: 'default', permissions: ['DecideAction', 'ListSessions', 'Me']});
			r.Actor = id.actorText(alice);
			r.NoActor = id.actorText(null) + id.actorText({});
			r.Approvers = id.approversText({roles: ['admin'], names: ['carol'], not_creator: true});
			r.ExRole = id.excludedBy({roles: ['admin']}, null);
			r.ExName = id.excludedBy({roles: ['approver'], names: ['carol']}, null);
			const mine = {created_by: {key_id: 'key_b', name: 'bob', role: 'approver'}};
			r.ExCreator = id.excludedBy({not_creator: true}, mine);
			r.OkCreator = id.excludedBy({not_creator: true}, {created_by: alice});
			r.OkSubagent = id.excludedBy({not_creator: true}, {...mine, parent_id: 'ses_root'});
			r.Can = [id.can('DecideAction'), id.can('Pause'), id.can('Cancel')];
			const pending = {id: 'act_1', session_id: 'ses_1', type: 'approval', status: 'pending', tool: 'deploy',
				summary: 'Deploy 1.2', arguments: {}, created_at: now, approvers: {roles: ['admin']}};
			const card = actionCard(pending, {showSession: false});
			r.PendingWho = card.querySelector('.approvers').textContent;
			r.PendingButtons = card.querySelectorAll('button[data-act]').length;
			id.setIdentity({key_id: 'key_r', name: 'rita', role: 'reader', project: 'default', permissions: ['ListSessions', 'Me']});
			const readerCard = actionCard(pending, {showSession: false});
			r.ReaderButtons = readerCard.querySelectorAll('button[data-act]').length;
			r.ReaderNote = readerCard.querySelector('.role-note').textContent;
			const resolved = {...pending, status: 'resolved', resolved_at: now, resolution: {decision: 'approve'}, resolved_by: alice};
			r.ResolvedBy = actionCard(resolved, {showSession: false}).querySelector('.resolved-line .actor').textContent;
			r.Row = decidedRow(resolved, {showSession: false}).textContent;
		} finally {
			id.setIdentity(saved);
		}
		return r;
	})()`, &got)
	require.Equal(t, "alice (approver)", got.Actor)
	require.Empty(t, got.NoActor)
	require.Equal(t, "a key of role admin; named carol; not who started the session", got.Approvers)
	require.Equal(t, "You are bob (approver): your role is not among them.", got.ExRole)
	require.Equal(t, "You are bob (approver): your name is not among them.", got.ExName)
	require.Equal(t, "You started this session, so someone else must decide.", got.ExCreator)
	require.Empty(t, got.OkCreator)
	require.Empty(t, got.OkSubagent, "a sub-agent's creator is its root's: the server judges it")
	require.Equal(t, []bool{true, false, false}, got.Can)
	require.Equal(t, "a key of role admin You are bob (approver): your role is not among them.", got.PendingWho)
	require.Positive(t, got.PendingButtons, "an approver may try: the server says what the policy requires")
	require.Zero(t, got.ReaderButtons)
	require.Equal(t, "Waiting for a decision: your role (reader) may not decide actions.", got.ReaderNote)
	require.Equal(t, "by alice (approver)", got.ResolvedBy)
	require.Contains(t, got.Row, "Deploy 1.2: approved by alice (approver)")
}
