package taskruntime

import (
	"encoding/json"
	"fmt"
	"time"
)

// TaskMode says when a tool runs as a task. 2026-07-28 has no per-tool
// declaration of it on the wire (Tool.execution is gone): the server
// decides per call, so each tool's description states its mode.
type TaskMode string

// The three task modes.
const (
	// ModeRequired: always a task; a call without the extension gets -32021.
	ModeRequired TaskMode = "required"
	// ModeOptional: a task when the call declares the extension, a plain
	// result otherwise.
	ModeOptional TaskMode = "optional"
	// ModeForbidden: never a task, extension or not.
	ModeForbidden TaskMode = "forbidden"
)

// Tool names.
const (
	// ToolSteps (required) works through `steps` steps (default 6) of
	// `stepMs` each (default 50), reporting "step k of n" as its
	// statusMessage, and answers "Completed n steps for <label>". With
	// `ignoreCancel` it acknowledges tasks/cancel but finishes anyway.
	ToolSteps = "steps"
	// ToolInterview (optional; needs the elicitation capability) asks for a
	// name and a colour in one round, then whether to save, in a second:
	// three steps around two input rounds. A declined first round completes
	// with isError:true.
	ToolInterview = "interview"
	// ToolEcho (forbidden) answers "echo: <text>" at once.
	ToolEcho = "echo"
	// ToolFailJob (optional) works `steps` steps, then fails: `kind` "rpc"
	// (default) is a JSON-RPC error (-32603, so a failed task), "tool" is
	// a CallToolResult with isError:true (so a completed task).
	ToolFailJob = "fail_job"
)

// Bounds on the simulated work a call may ask for.
const (
	maxSteps  = 1000
	maxStepMs = 60_000
)

// toolSpec is one tool: its listing, its mode, the client capabilities its
// input requests need, and its work.
type toolSpec struct {
	name        string
	description string
	mode        TaskMode
	schema      map[string]any
	needs       []string
	// guard, when set, runs before the tool is run or made a task, on the
	// answers the call carries; input it asks for is answered with an
	// InputRequiredResult (guard.go).
	guard func(w work) error
	run   func(w work, args json.RawMessage) (map[string]any, error)
}

func (t *toolSpec) listing() map[string]any {
	return map[string]any{
		"name":        t.name,
		"description": fmt.Sprintf("%s Task mode: %s.", t.description, t.mode),
		"inputSchema": t.schema,
	}
}

func toolSpecs() []*toolSpec {
	intProp := func(desc string) map[string]any { return map[string]any{"type": "integer", "description": desc} }
	return []*toolSpec{{
		name: ToolSteps, mode: ModeRequired,
		description: `Works through steps, reporting "step k of n".`,
		schema: object(map[string]any{
			"steps": intProp("number of steps (default 6)"), "stepMs": intProp("milliseconds per step (default 50)"),
			"label":        map[string]any{"type": "string"},
			"ignoreCancel": map[string]any{"type": "boolean", "description": "finish despite tasks/cancel"},
		}),
		run: runSteps,
	}, {
		name: ToolInterview, mode: ModeOptional, needs: []string{"elicitation"},
		description: "Asks for a name and a colour, then whether to save them.",
		schema:      object(map[string]any{"stepMs": intProp("milliseconds per step (default 50)")}),
		run:         runInterview,
	}, {
		name: ToolEcho, mode: ModeForbidden,
		description: "Echoes its text.",
		schema:      object(map[string]any{"text": map[string]any{"type": "string"}}),
		run:         runEcho,
	}, {
		name: ToolFailJob, mode: ModeOptional,
		description: "Works a little, then fails with a JSON-RPC error (kind rpc) or a tool error (kind tool).",
		schema: object(map[string]any{
			"kind":  map[string]any{"type": "string", "enum": []string{"rpc", "tool"}},
			"steps": intProp("number of steps (default 2)"), "stepMs": intProp("milliseconds per step (default 50)"),
		}),
		run: runFailJob,
	}, guardedSpec()}
}

func object(props map[string]any) map[string]any {
	return map[string]any{"type": "object", "properties": props}
}

// workArgs are the arguments the simulated work shares.
type workArgs struct {
	Steps        *int   `json:"steps"`
	StepMs       *int   `json:"stepMs"`
	Label        string `json:"label"`
	IgnoreCancel bool   `json:"ignoreCancel"`
	Kind         string `json:"kind"`
	Text         string `json:"text"`
}

// parseArgs decodes and bounds a call's arguments; a bad one is -32602.
func parseArgs(raw json.RawMessage, defaultSteps int) (workArgs, time.Duration, error) {
	var a workArgs
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &a); err != nil {
			return a, 0, inBandError(CodeInvalidParams, "invalid arguments: %v", err)
		}
	}
	if a.Steps == nil {
		a.Steps = &defaultSteps
	}
	if *a.Steps < 1 || *a.Steps > maxSteps {
		return a, 0, inBandError(CodeInvalidParams, "invalid arguments: steps must be 1..%d", maxSteps)
	}
	ms := 50
	if a.StepMs != nil {
		ms = *a.StepMs
	}
	if ms < 0 || ms > maxStepMs {
		return a, 0, inBandError(CodeInvalidParams, "invalid arguments: stepMs must be 0..%d", maxStepMs)
	}
	switch a.Kind {
	case "", "rpc", "tool":
	default:
		return a, 0, inBandError(CodeInvalidParams, "invalid arguments: kind must be rpc or tool")
	}
	return a, time.Duration(ms) * time.Millisecond, nil
}

func textResult(text string, isError bool) map[string]any {
	return map[string]any{"resultType": "complete", "content": []any{map[string]any{"type": "text", "text": text}}, "isError": isError}
}

func runSteps(w work, raw json.RawMessage) (map[string]any, error) {
	a, d, err := parseArgs(raw, 6)
	if err != nil {
		return nil, err
	}
	for k := 1; k <= *a.Steps; k++ {
		if err := w.step(k, *a.Steps, d); err != nil {
			return nil, err
		}
	}
	label := a.Label
	if label == "" {
		label = "steps"
	}
	return textResult(fmt.Sprintf("Completed %d steps for %s", *a.Steps, label), false), nil
}

// elicit is a form elicitation InputRequest for one string property (or a
// boolean one).
func elicit(message, prop, typ string) map[string]any {
	return map[string]any{"method": "elicitation/create", "params": map[string]any{
		"mode": "form", "message": message,
		"requestedSchema": map[string]any{"type": "object",
			"properties": map[string]any{prop: map[string]any{"type": typ}}, "required": []string{prop}},
	}}
}

// elicitAnswer is the part of an ElicitResult the tools read.
type elicitAnswer struct {
	Action  string         `json:"action"`
	Content map[string]any `json:"content"`
}

func readAnswer(raw json.RawMessage, prop string) (string, bool) {
	var a elicitAnswer
	if json.Unmarshal(raw, &a) != nil || a.Action != "accept" {
		return "", false
	}
	switch v := a.Content[prop].(type) {
	case string:
		return v, true
	case bool:
		return fmt.Sprint(v), true
	}
	return "", false
}

func runInterview(w work, raw json.RawMessage) (map[string]any, error) {
	_, d, err := parseArgs(raw, 3)
	if err != nil {
		return nil, err
	}
	if err := w.step(1, 3, d); err != nil {
		return nil, err
	}
	first, err := w.ask(map[string]any{
		"name":  elicit("What is your name?", "name", "string"),
		"color": elicit("What is your favourite colour?", "color", "string"),
	})
	if err != nil {
		return nil, err
	}
	name, okName := readAnswer(first["name"], "name")
	color, okColor := readAnswer(first["color"], "color")
	if !okName || !okColor {
		return textResult("Interview declined", true), nil
	}
	if err := w.step(2, 3, d); err != nil {
		return nil, err
	}
	second, err := w.ask(map[string]any{"save": elicit(fmt.Sprintf("Save the profile of %s?", name), "save", "boolean")})
	if err != nil {
		return nil, err
	}
	save, ok := readAnswer(second["save"], "save")
	if !ok {
		save = "false"
	}
	if err := w.step(3, 3, d); err != nil {
		return nil, err
	}
	return textResult(fmt.Sprintf("Hello %s, you like %s; saved: %s", name, color, save), false), nil
}

func runEcho(_ work, raw json.RawMessage) (map[string]any, error) {
	a, _, err := parseArgs(raw, 1)
	if err != nil {
		return nil, err
	}
	return textResult("echo: "+a.Text, false), nil
}

func runFailJob(w work, raw json.RawMessage) (map[string]any, error) {
	a, d, err := parseArgs(raw, 2)
	if err != nil {
		return nil, err
	}
	for k := 1; k <= *a.Steps; k++ {
		if err := w.step(k, *a.Steps, d); err != nil {
			return nil, err
		}
	}
	if a.Kind == "tool" {
		return textResult("Job failed: simulated tool error", true), nil
	}
	return nil, &rpcError{Code: codeSimulatedToolFailure, Message: fmt.Sprintf("Simulated failure after %d steps", *a.Steps)}
}
