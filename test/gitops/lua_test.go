package gitops

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The health scripts, as they go into argocd-cm.
var scripts = map[string]string{
	"OutboxPipeline":   "outboxpipeline-health.lua",
	"DeadLetterReplay": "deadletterreplay-health.lua",
	"RetentionPolicy":  "retentionpolicy-health.lua",
}

func script(t *testing.T, kind string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "config", "argocd", scripts[kind]))
	must(t, err)
	return string(b)
}

// argoHealth is what Argo CD makes of a health script's result.
type argoHealth struct{ Status, Message string }

// validArgo are the statuses Argo CD accepts from a script; others become Unknown.
var validArgo = map[string]bool{"Healthy": true, "Progressing": true, "Degraded": true, "Suspended": true, "Missing": true, "Unknown": true}

// runHealthScript runs src the way Argo CD runs a configured health check: a fresh
// gopher-lua state with only the package, base and table libraries (no string, no
// os, no io), a one-second deadline, the object as a global "obj" of nested tables,
// and the returned table read as {status, message}.
func runHealthScript(src string, obj *unstructured.Unstructured) (argoHealth, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for name, open := range map[string]lua.LGFunction{lua.LoadLibName: lua.OpenPackage, lua.BaseLibName: lua.OpenBase, lua.TabLibName: lua.OpenTable} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(open), NRet: 0, Protect: true}, lua.LString(name)); err != nil {
			return argoHealth{}, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", toLua(l, obj.Object))
	if err := l.DoString(src); err != nil {
		return argoHealth{}, err
	}
	tbl, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return argoHealth{}, fmt.Errorf("the script returned %s, not a table", l.Get(-1).Type())
	}
	h := argoHealth{Status: lua.LVAsString(tbl.RawGetString("status")), Message: lua.LVAsString(tbl.RawGetString("message"))}
	if !validArgo[h.Status] {
		return h, fmt.Errorf("status %q is not an Argo CD health status", h.Status)
	}
	return h, nil
}

// toLua converts a decoded JSON value like Argo CD does: objects to tables keyed by
// name, arrays to tables indexed from 1, numbers to Lua numbers.
func toLua(l *lua.LState, v any) lua.LValue {
	switch x := v.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(x)
	case string:
		return lua.LString(x)
	case int64:
		return lua.LNumber(x)
	case float64:
		return lua.LNumber(x)
	case json.Number:
		return lua.LString(x)
	case []any:
		t := l.CreateTable(len(x), 0)
		for _, item := range x {
			t.Append(toLua(l, item))
		}
		return t
	case map[string]any:
		t := l.CreateTable(0, len(x))
		for k, item := range x {
			t.RawSetString(k, toLua(l, item))
		}
		return t
	}
	return lua.LNil
}
