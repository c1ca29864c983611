package policy

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/toolfs/toolfs-api/internal/fault"
	"github.com/toolfs/toolfs-api/internal/fs"
)

// model is a deliberately naive Store: slices in recency order (most recent
// first), linear scans, a full expiry sweep on every call. Its caps are
// below sweepBatch, so the Store's bounded sweep behaves the same.
type model struct {
	ttl, now                               time.Duration
	maxSessions, maxPaths, maxObservations int
	sessions                               []*modelSession
}

type modelSession struct {
	id       string
	lastUsed time.Duration
	paths    []modelPath
}

type modelPath struct {
	key     fs.TargetKey
	version fs.Version
}

func (m *model) count() (n int) {
	for _, ss := range m.sessions {
		n += len(ss.paths)
	}
	return n
}

func (m *model) sweep() {
	m.sessions = slices.DeleteFunc(m.sessions, func(ss *modelSession) bool { return m.now-ss.lastUsed > m.ttl })
}

func (m *model) use(id string, create bool) *modelSession {
	m.sweep()
	i := slices.IndexFunc(m.sessions, func(ss *modelSession) bool { return ss.id == id })
	var ss *modelSession
	switch {
	case i >= 0:
		ss = m.sessions[i]
		m.sessions = slices.Delete(m.sessions, i, i+1)
	case !create:
		return nil
	default:
		if len(m.sessions) == m.maxSessions {
			m.sessions = m.sessions[:len(m.sessions)-1]
		}
		ss = &modelSession{id: id}
	}
	ss.lastUsed = m.now
	m.sessions = slices.Insert(m.sessions, 0, ss)
	return ss
}

func (m *model) lookup(id string, key fs.TargetKey) (fs.Version, bool) {
	if id == "" {
		return "", false
	}
	ss := m.use(id, false)
	if ss == nil {
		return "", false
	}
	i := slices.IndexFunc(ss.paths, func(p modelPath) bool { return p.key == key })
	if i < 0 {
		return "", false
	}
	p := ss.paths[i]
	ss.paths = slices.Insert(slices.Delete(ss.paths, i, i+1), 0, p)
	return p.version, true
}

func (m *model) observe(id string, key fs.TargetKey, v fs.Version, unset bool) {
	if id == "" {
		return
	}
	ss := m.use(id, true)
	i := slices.IndexFunc(ss.paths, func(p modelPath) bool { return p.key == key })
	if i >= 0 {
		ss.paths = slices.Delete(ss.paths, i, i+1)
	}
	if unset {
		return
	}
	if len(ss.paths) == m.maxPaths {
		ss.paths = ss.paths[:len(ss.paths)-1]
	}
	ss.paths = slices.Insert(ss.paths, 0, modelPath{key, v})
	for m.count() > m.maxObservations {
		victim := m.sessions[len(m.sessions)-1]
		if len(victim.paths) == 0 {
			m.sessions = m.sessions[:len(m.sessions)-1]
			continue
		}
		victim.paths = victim.paths[:len(victim.paths)-1]
	}
}

func (m *model) forget(id string) bool {
	if id == "" {
		return false
	}
	m.sweep()
	n := len(m.sessions)
	m.sessions = slices.DeleteFunc(m.sessions, func(ss *modelSession) bool { return ss.id == id })
	return len(m.sessions) < n
}

var fuzzSeeds = [][]byte{
	{0, 1, 0, 3, 1, 0, 2, 1, 0},
	{0, 1, 0, 0, 2, 1, 0, 3, 1, 0, 4, 2, 9, 4, 2, 0, 5, 1, 0, 6, 1, 0},
	[]byte("the quick brown fox jumps over the lazy dog, twice over: the quick brown fox"),
}

// FuzzStoreMatchesModel runs random operation sequences against a Store and
// the model and compares every answer. Each op is 3 bytes: operation,
// session, key and clock advance.
func FuzzStoreMatchesModel(f *testing.F) {
	for _, seed := range fuzzSeeds {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		matchModel(t, data, func(cfg Config) testGate { return NewStore(cfg) })
	})
}

// matchModel runs the operations of data against a store made by newGate
// and the model, comparing every answer.
func matchModel(t *testing.T, data []byte, newGate func(Config) testGate) {
	const ttl = 10 * time.Minute
	clk := newClock()
	s := newGate(Config{TTL: ttl, MaxSessions: 3, MaxPathsPerSession: 3, MaxObservations: 5, Now: clk.Now})
	m := &model{ttl: ttl, maxSessions: 3, maxPaths: 3, maxObservations: 5}
	ids := []string{"", "a", "b", "c", "d"}
	for i := 0; i+2 < len(data); i += 3 {
		op, id := data[i]%8, ids[int(data[i+1])%len(ids)]
		key := fs.TargetKey(fmt.Sprint("/k", data[i+2]%5))
		tg := fs.Target{Key: key, Display: string(key)}
		v := fs.Version(fmt.Sprint("v", i))
		// High bits of the session byte move the clock, sometimes past TTL.
		step := time.Duration(data[i+1]>>3) * time.Minute
		clk.Advance(step)
		m.now += step
		where := fmt.Sprintf("op %d (%d %q %s)", i/3, op, id, key)
		switch op {
		case 0:
			require.NoError(t, s.ObservePresent(id, key, v, ""), where)
			m.observe(id, key, v, false)
		case 1:
			require.NoError(t, s.ObserveAbsent(id, key), where)
			m.observe(id, key, "", false)
		case 2:
			require.NoError(t, s.ObservePresent(id, key, "", ""), where)
			m.observe(id, key, "", true)
		case 3:
			got, err := s.WriteIntent(id, tg)
			require.NoError(t, err, where)
			want := &fs.WriteIntent{Kind: fs.CreateIfAbsent}
			if mv, _ := m.lookup(id, key); mv != "" {
				want = &fs.WriteIntent{Kind: fs.ReplaceIfVersion, Version: mv}
			}
			require.Equal(t, want, got, where)
		case 4:
			got, err := s.EditGuard(id, tg)
			mv, seen := m.lookup(id, key)
			switch {
			case !seen:
				require.Equal(t, fault.CodeNotObserved, fault.CodeOf(err), where)
			case mv == "":
				require.Equal(t, fault.CodeNotFound, fault.CodeOf(err), where)
			default:
				require.NoError(t, err, where)
				require.Equal(t, fs.Observed{Version: mv}, *got, where)
			}
		case 5:
			require.NoError(t, s.Touch(id), where)
			if id != "" {
				m.use(id, true)
			}
		case 6:
			got, err := s.Forget(id)
			require.NoError(t, err, where)
			require.Equal(t, m.forget(id), got, where)
		case 7:
			sessions, observations := s.Stats()
			m.sweep()
			require.Equal(t, len(m.sessions), sessions, where)
			require.Equal(t, m.count(), observations, where)
		}
	}
	checkInvariants(t, s)
}
