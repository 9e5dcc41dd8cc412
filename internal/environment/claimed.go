package environment

import "sync"

// maxClaimed bounds how many snapshots a backend remembers as claimed. A
// snapshot forgotten costs one ownership read when it is taken again, so
// the bound is only about memory: a few hundred KiB at most.
const maxClaimed = 4096

// claimedSnapshots remembers which snapshots a backend's environments have
// claimed for which project (snapshot.Claim), so that taking the same one
// again, in any session of the project, reads no ownership: one read a
// session's snapshot on SQLite, one round trip on PostgreSQL, for what
// sessions share most, the empty workspace. Remembering is sound because
// ownership is never taken back: no statement removes a blob_owners row,
// so a root claimed as a tree stays claimed, with all it reaches.
type claimedSnapshots struct {
	mu  sync.Mutex
	ids map[claimedKey]struct{}
}

type claimedKey struct{ project, id string }

// has reports whether snapshot id is known claimed for project.
func (c *claimedSnapshots) has(project, id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.ids[claimedKey{project, id}]
	return ok
}

// add remembers that snapshot id is claimed for project. When the set is
// full an arbitrary entry makes room: any one forgotten costs the same.
func (c *claimedSnapshots) add(project, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ids == nil {
		c.ids = make(map[claimedKey]struct{})
	}
	if _, ok := c.ids[claimedKey{project, id}]; ok {
		return
	}
	if len(c.ids) >= maxClaimed {
		for k := range c.ids {
			delete(c.ids, k)
			break
		}
	}
	c.ids[claimedKey{project, id}] = struct{}{}
}
