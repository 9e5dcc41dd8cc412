package policy

import (
	"reflect"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"

	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// effectKeys are the keys of an effect as conditions see it, in the order
// the map form lists them.
var effectKeys = [...]string{keyTool, keyArgs, keyClass, keyStatus, keyError, keySessionID, keyTurnID, keyStep}

// emptyArgs stands for an effect recorded without arguments, so that
// has(e.args.x) is false rather than an error. CEL never mutates it.
var emptyArgs = map[string]any{}

// knownStrings are the CEL values of the effect classes and statuses,
// boxed once: a rule like count(effects, e.status == "failed") reads one
// per element, and boxing a string allocates.
var knownStrings = func() map[string]ref.Val {
	m := map[string]ref.Val{"": types.String("")}
	for _, s := range []string{
		string(lt.EffectRead), string(lt.EffectIdempotent), string(lt.EffectIrreversible),
		string(lt.EffectStarted), string(lt.EffectSucceeded), string(lt.EffectFailed),
		string(lt.EffectInDoubt), string(lt.EffectResolved),
	} {
		m[s] = types.String(s)
	}
	return m
}()

func knownString(s string) ref.Val {
	if v, ok := knownStrings[s]; ok {
		return v
	}
	return types.String(s)
}

// effectsValue exposes a session's effects as a CEL list without copying
// them: each element is an effectVal pointing at the caller's Effect, and a
// pointer needs no allocation to become a ref.Val. Tool names are boxed
// once per distinct name. Building the list therefore costs a handful of
// allocations however long the history is.
func effectsValue(effects []Effect) ref.Val {
	vals := make([]effectVal, len(effects))
	elems := make([]ref.Val, len(effects))
	tools := make(map[string]ref.Val)
	for i := range effects {
		e := &effects[i]
		tool, ok := tools[e.Tool]
		if !ok {
			tool = types.String(e.Tool)
			tools[e.Tool] = tool
		}
		vals[i] = effectVal{e: e, tool: tool}
		elems[i] = &vals[i]
	}
	return types.NewRefValList(types.DefaultTypeAdapter, elems)
}

// effectVal is one element of `effects`: a CEL map with the keys of
// effectKeys, read straight from the Effect. Lookups, the only thing rules
// do in bulk, are answered directly; rarer operations (equality, iteration
// over keys, conversion) go through an ordinary CEL map built on demand, so
// their semantics are CEL's own.
type effectVal struct {
	e    *Effect
	tool ref.Val // e.Tool as a CEL string
}

var _ traits.Mapper = (*effectVal)(nil)

// field returns the Go value of key, as the map form holds it. There is
// deliberately no FindStringKey method (CEL's fast path for native maps):
// it would box each value twice, once as any and once as a CEL value,
// where Find returns values boxed in advance or boxes them once.
func (v *effectVal) field(key string) (any, bool) {
	switch key {
	case keyTool:
		return v.e.Tool, true
	case keyArgs:
		return v.args(), true
	case keyClass:
		return string(v.e.Class), true
	case keyStatus:
		return string(v.e.Status), true
	case keyError:
		return v.e.Error, true
	case keySessionID:
		return v.e.SessionID, true
	case keyTurnID:
		return v.e.TurnID, true
	case keyStep:
		return int64(v.e.Step), true
	}
	return nil, false
}

func (v *effectVal) args() any {
	if v.e.Args == nil {
		return emptyArgs
	}
	return v.e.Args
}

// Find implements traits.Mapper.
func (v *effectVal) Find(key ref.Val) (ref.Val, bool) {
	k, ok := key.(types.String)
	if !ok {
		return nil, false
	}
	switch string(k) {
	case keyTool:
		return v.tool, true
	case keyArgs:
		return types.DefaultTypeAdapter.NativeToValue(v.args()), true
	case keyClass:
		return knownString(string(v.e.Class)), true
	case keyStatus:
		return knownString(string(v.e.Status)), true
	case keyError:
		return types.String(v.e.Error), true
	case keySessionID:
		return types.String(v.e.SessionID), true
	case keyTurnID:
		return types.String(v.e.TurnID), true
	case keyStep:
		return types.Int(v.e.Step), true
	}
	return nil, false
}

// Get implements traits.Indexer.
func (v *effectVal) Get(key ref.Val) ref.Val {
	if val, ok := v.Find(key); ok {
		return val
	}
	return types.ValOrErr(key, "no such key: %v", key)
}

// Contains implements traits.Container (`"tool" in e`).
func (v *effectVal) Contains(key ref.Val) ref.Val {
	_, ok := v.Find(key)
	return types.Bool(ok)
}

// Size implements traits.Sizer.
func (v *effectVal) Size() ref.Val {
	return types.Int(len(effectKeys))
}

// Iterator implements traits.Iterable.
func (v *effectVal) Iterator() traits.Iterator {
	return v.asMap().Iterator()
}

// Equal implements ref.Val.
func (v *effectVal) Equal(other ref.Val) ref.Val {
	return v.asMap().Equal(other)
}

// ConvertToNative implements ref.Val.
func (v *effectVal) ConvertToNative(typeDesc reflect.Type) (any, error) {
	return v.asMap().ConvertToNative(typeDesc)
}

// ConvertToType implements ref.Val.
func (v *effectVal) ConvertToType(typeVal ref.Type) ref.Val {
	return v.asMap().ConvertToType(typeVal)
}

// Type implements ref.Val.
func (v *effectVal) Type() ref.Type {
	return types.MapType
}

// Value implements ref.Val.
func (v *effectVal) Value() any {
	return v.native()
}

func (v *effectVal) native() map[string]any {
	m := make(map[string]any, len(effectKeys))
	for _, k := range effectKeys {
		m[k], _ = v.field(k)
	}
	if v.e.Args == nil {
		// Whoever receives the native form may change it; the shared
		// empty map must stay empty.
		m[keyArgs] = map[string]any{}
	}
	return m
}

func (v *effectVal) asMap() traits.Mapper {
	return types.NewStringInterfaceMap(types.DefaultTypeAdapter, v.native())
}
