package webhook

import (
	"context"
	"errors"
	"fmt"

	"github.com/longhaul-dev/longhaul/internal/store"
)

// A sub-agent (a session that its parent's spawn_agent made) has no
// webhook_url of its own. Its notifications go to its root's, signed with
// the root's secret, so that the application that created the tree, which
// holds that one secret, hears when any session of it needs a person
// rather than seeing the tree stall. It reaches nothing its root could
// not: the URL is the root's, checked when the root was created, and
// every delivery dials through the same policy.

// maxParentChain bounds the walk from a sub-agent to its root. The engine
// makes trees a few levels deep; only parent links that form a cycle,
// which creating a session cannot make, would reach it.
const maxParentChain = 64

// urlTarget returns the webhook_url that the notifications of sessionID
// (whose info is info) go to, as a target: the session's own, or for a
// sub-agent its root's, with root set. Its url is "" when there is none.
func (d *Dispatcher) urlTarget(ctx context.Context, sessionID string, info sessionInfo) (target, error) {
	if info.url != "" || info.parentID == "" {
		return target{url: info.url}, nil
	}
	root, rootInfo, err := d.rootOf(ctx, sessionID, info)
	if err != nil || rootInfo.url == "" {
		return target{}, err
	}
	return target{url: rootInfo.url, root: root}, nil
}

// rootOf walks up from sessionID (whose info is info) to the root of its
// tree, and returns the root's id and info. Each session's info is read
// once and cached (sessionInfo): a parent never changes, so the walk costs
// no query once made. An error reading a parent is returned, never cached
// nor taken for a root without a webhook_url: the next scan or attempt
// walks again.
func (d *Dispatcher) rootOf(ctx context.Context, sessionID string, info sessionInfo) (string, sessionInfo, error) {
	id := sessionID
	for range maxParentChain {
		if info.parentID == "" {
			return id, info, nil
		}
		parent, err := d.sessionInfo(ctx, info.parentID)
		if errors.Is(err, errNotCreated) || errors.Is(err, store.ErrNotFound) {
			// A parent this store does not hold (a sub-agent imported
			// without it): as far as the store knows, the tree is
			// rooted here.
			return id, info, nil
		}
		if err != nil {
			return "", sessionInfo{}, fmt.Errorf("the root of session %s: %w", sessionID, err)
		}
		if parent.project != info.project {
			// spawn_agent makes a sub-agent in its parent's project,
			// and an import refuses one whose parent is of another,
			// but a store may hold one imported before: a parent of
			// another project is no parent here, and its URL and
			// secret are not this session's to use.
			return id, info, nil
		}
		id, info = info.parentID, parent
	}
	return "", sessionInfo{}, fmt.Errorf("the root of session %s: its parent chain is longer than %d sessions", sessionID, maxParentChain)
}

// urlSessionID returns the session whose webhook_url a delivery to a
// session's webhook_url went to: the delivery's session, or its root for a
// sub-agent's notification.
func (d *Dispatcher) urlSessionID(ctx context.Context, row *store.WebhookDeliveryRow) (string, error) {
	info, err := d.sessionInfo(ctx, row.SessionID)
	if err != nil {
		return "", err
	}
	t, err := d.urlTarget(ctx, row.SessionID, info)
	if err != nil {
		return "", err
	}
	if t.root != "" {
		return t.root, nil
	}
	return row.SessionID, nil
}
