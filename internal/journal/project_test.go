package journal

import (
	"testing"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestSessionProject: the project session.created names is the session's;
// a journal written before projects existed names none, and its session
// is in the default project, as the migration put its row.
func TestSessionProject(t *testing.T) {
	b := &builder{t: t}
	b.must(lt.EventSessionCreated, "", lt.SessionCreatedData{Agent: lt.AgentRef{Name: "a", Version: 1}, Input: "go", Project: "support"})
	require.Equal(t, "support", b.st.Project())
	require.Equal(t, "support", b.st.View().Project)

	old := &builder{t: t}
	old.must(lt.EventSessionCreated, "", lt.SessionCreatedData{Agent: lt.AgentRef{Name: "a", Version: 1}, Input: "go"})
	require.Equal(t, lt.DefaultProject, old.st.Project())
	require.Equal(t, lt.DefaultProject, old.st.View().Project)
}
