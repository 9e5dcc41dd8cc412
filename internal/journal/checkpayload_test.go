package journal

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// TestTypedPayloadsApplyAsDecoded holds the typed payload a writer keeps
// (lt.Event.WithPayload) to what a replay of the journal reads: for every
// event type of the registry, values made of edge cases (zero values, nil
// and empty slices, -0, times with a monotonic reading and in zones other
// than UTC, RawMessages with spaces, escapes and unicode, invalid UTF-8),
// the payload kept equals Data decoded, and Apply with it leaves the same
// state, error and projection rows as Apply with Data decoded, on the
// states of the real journals in testdata. Then the real journals' own
// events, their payloads made edgy the same way, are applied both ways one
// after the other. A new event type is covered as it is registered.
func TestTypedPayloadsApplyAsDecoded(t *testing.T) {
	t.Parallel()
	bases := testJournals(t)
	// States to apply the made-up payloads on: each journal's end, and a
	// point in its middle.
	var states []State
	for _, evs := range bases {
		for _, n := range []int{len(evs) / 2, len(evs)} {
			var st State
			for _, ev := range evs[:n] {
				require.NoError(t, Apply(&st, ev, nil))
			}
			states = append(states, st)
		}
	}

	t.Run("every registered type", func(t *testing.T) {
		for _, typ := range lt.EventTypes() {
			zero, ok := lt.NewEventData(typ)
			require.True(t, ok)
			typ, rt := typ, reflect.TypeOf(zero).Elem()
			t.Run(typ, func(t *testing.T) {
				for variant := range 8 {
					v := reflect.New(rt).Elem()
					if variant > 0 {
						fill(v, variant, 0)
					}
					for _, st := range states {
						checkBothWays(t, st, lt.Event{Seq: st.Session.LastEventSeq + 1, Type: typ, Time: time.Unix(1e9, 0).UTC(), SessionID: st.Session.ID, TurnID: turnOf(st)}, v.Interface())
					}
				}
			})
		}
	})

	t.Run("the real journals, their payloads made edgy", func(t *testing.T) {
		for _, evs := range bases {
			for variant := range 3 {
				var st State
				for _, ev := range evs {
					p, ok := lt.NewEventData(ev.Type)
					if !ok || json.Unmarshal(ev.Data, p) != nil {
						require.NoError(t, Apply(&st, ev, nil))
						continue
					}
					v := reflect.ValueOf(p).Elem()
					edge(v, variant)
					e := ev
					e.Data = nil
					checkBothWays(t, st, e, v.Interface())
					// Go on from the state the typed payload left.
					raw, err := json.Marshal(v.Interface())
					require.NoError(t, err)
					e.Data = raw
					require.NoError(t, Apply(&st, e.WithPayload(v.Interface()), nil), "%s seq %d", ev.Type, ev.Seq)
				}
			}
		}
	})
}

// checkBothWays applies ev, its Data being v's JSON, to two copies of st:
// once carrying v, once not; they must agree.
func checkBothWays(t *testing.T, st State, ev lt.Event, v any) {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		return // no writer journals it
	}
	ev.Data = raw
	typed := ev.WithPayload(v)
	if lt.PayloadCopyable(ev.Type) {
		require.NotNil(t, typed.Payload(), "%s keeps its payload", ev.Type)
	}
	if typed.Payload() == nil {
		return
	}
	decoded := reflect.New(reflect.TypeOf(v))
	require.NoError(t, json.Unmarshal(raw, decoded.Interface()))
	require.Equal(t, decoded.Elem().Interface(), typed.Payload(), "%s: the payload kept is its data decoded (%s)", ev.Type, raw)
	require.True(t, reflect.DeepEqual(decoded.Elem().Interface(), typed.Payload()), "%s: deeply equal (%s)", ev.Type, raw)

	a, b := cloneState(t, st), cloneState(t, st)
	var cha, chb Changes
	errA := Apply(&a, typed, &cha)
	errB := Apply(&b, ev, &chb)
	require.Equal(t, errB == nil, errA == nil, "%s (%s): typed %v, decoded %v", ev.Type, raw, errA, errB)
	if errA != nil {
		require.Equal(t, errB.Error(), errA.Error())
		return
	}
	require.True(t, reflect.DeepEqual(b, a), "%s (%s): the states differ", ev.Type, raw)
	require.Equal(t, b, a)
	require.True(t, reflect.DeepEqual(chb.Docs(), cha.Docs()), "%s (%s): the rows differ", ev.Type, raw)
	ja, err := json.Marshal(&a)
	require.NoError(t, err)
	jb, err := json.Marshal(&b)
	require.NoError(t, err)
	require.Equal(t, string(jb), string(ja))
}

func cloneState(t *testing.T, st State) State {
	t.Helper()
	raw, err := json.Marshal(&st)
	require.NoError(t, err)
	var out State
	require.NoError(t, json.Unmarshal(raw, &out))
	return out
}

func turnOf(st State) string {
	if c := st.CurrentTurn(); c != nil {
		return c.ID
	}
	return ""
}

var (
	timeT = reflect.TypeFor[time.Time]()
	rawT  = reflect.TypeFor[json.RawMessage]()
	// A zone whose offset has seconds (RFC 3339 drops them), one that
	// is UTC but not time.UTC, and Local.
	oddZones = []*time.Location{time.FixedZone("LMT", -(4*3600 + 56*60 + 2)), time.FixedZone("Z0", 0), time.Local, time.FixedZone("", 5*3600+1800)}
	edgeRaws = []string{"null", " { \"a\" : [1, 2 ] ,\n\t\"b\":\"<x> & \u2028 é 😀\" } ", `"str"`, `[]`, `{}`, " 3 ", `{"k":"v"}`, `"\u003c"`}
	edgeStrs = []string{"", "héllo 😀 <b>&amp;</b>\u2028", "bad\xff\xfe utf8\xed\xa0\x80", "c1", "\ufffd"}
)

// withMonotonic returns the instant of at, carrying a monotonic reading.
func withMonotonic(at time.Time) time.Time {
	now := time.Now()
	return now.Add(at.Sub(now))
}

// fill sets v to edge-case values chosen by variant (the field's depth and
// position vary the choice).
func fill(v reflect.Value, variant, depth int) {
	pick := func(n int) int { return (variant + depth) % n }
	switch v.Type() {
	case timeT:
		at := time.Date(2026, 12, 4, 18, 0, 0, 123456789, time.UTC)
		switch variant % 4 {
		case 0:
			v.Set(reflect.ValueOf(time.Time{}))
		case 1:
			v.Set(reflect.ValueOf(withMonotonic(at)))
		case 2:
			v.Set(reflect.ValueOf(withMonotonic(at).In(oddZones[pick(len(oddZones))])))
		default:
			v.Set(reflect.ValueOf(at.In(oddZones[(variant+depth+1)%len(oddZones)])))
		}
		return
	case rawT:
		if variant%5 == 0 {
			return // nil
		}
		v.SetBytes([]byte(edgeRaws[pick(len(edgeRaws))]))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(edgeStrs[pick(len(edgeStrs))])
	case reflect.Bool:
		v.SetBool(variant%2 == 1)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt([]int64{0, 1, -7, 42}[pick(4)])
	case reflect.Uint, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint([]uint64{0, 1, 42}[pick(3)])
	case reflect.Float32, reflect.Float64:
		v.SetFloat([]float64{math.Copysign(0, -1), 0, 1.5, 1e-7, 12345678.9}[pick(5)])
	case reflect.Pointer:
		if variant%3 == 0 || depth > 4 {
			return
		}
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), variant, depth+1)
		v.Set(p)
	case reflect.Slice:
		switch {
		case variant%3 == 0 || depth > 4:
		case variant%3 == 1:
			v.Set(reflect.MakeSlice(v.Type(), 0, 4))
		default:
			s := reflect.MakeSlice(v.Type(), 2, 2)
			for i := range 2 {
				fill(s.Index(i), variant+i, depth+1)
			}
			v.Set(s)
		}
	case reflect.Map:
		if variant%2 == 1 && depth <= 4 && v.Type().Key().Kind() == reflect.String {
			m := reflect.MakeMap(v.Type())
			e := reflect.New(v.Type().Elem()).Elem()
			fill(e, variant, depth+1)
			m.SetMapIndex(reflect.ValueOf("k").Convert(v.Type().Key()), e)
			v.Set(m)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), variant+i, depth+1)
			}
		}
	}
}

// edge makes a decoded payload edgy without changing what it means to the
// projection: times moved to other zones with a monotonic reading,
// RawMessages spaced out, nil slices empty (variant 1), zeros negative.
func edge(v reflect.Value, variant int) {
	switch v.Type() {
	case timeT:
		tm := v.Interface().(time.Time)
		if !tm.IsZero() {
			tm = withMonotonic(tm).In(oddZones[variant%len(oddZones)])
		}
		v.Set(reflect.ValueOf(tm))
		return
	case rawT:
		if len(v.Bytes()) > 0 {
			var b bytes.Buffer
			if json.Indent(&b, v.Bytes(), " ", "\t ") == nil {
				v.SetBytes(append(append([]byte("\n"), b.Bytes()...), ' '))
			}
		}
		return
	}
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		if v.Float() == 0 {
			v.SetFloat(math.Copysign(0, -1))
		}
	case reflect.Pointer:
		if !v.IsNil() {
			edge(v.Elem(), variant)
		}
	case reflect.Slice:
		if v.IsNil() && variant == 1 && v.Type() != rawT {
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
		}
		for i := range v.Len() {
			edge(v.Index(i), variant)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				edge(v.Field(i), variant)
			}
		}
	}
}
