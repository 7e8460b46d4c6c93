package taskruntime

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ToolGuarded (optional; needs the elicitation capability) checks its call
// before doing anything, the guard pattern some runtimes document: a call
// without the answers (task-augmented or not) is answered with an
// InputRequiredResult and a requestState before any task is made. Its
// first round asks to confirm the job, its second why; only the call sent
// again with both answers makes its task (or, without the extension, runs
// plainly), which then works `steps` steps (default 2) of `stepMs` each and
// answers "Guarded job for <reason>: n steps". A job not confirmed answers
// "Guarded job not confirmed" with isError:true, without a second round.
const ToolGuarded = "guarded"

func guardedSpec() *toolSpec {
	return &toolSpec{
		name: ToolGuarded, mode: ModeOptional, needs: []string{"elicitation"},
		description: "Asks to confirm the job, then why, before it starts; then works through steps.",
		schema: object(map[string]any{
			"steps":  map[string]any{"type": "integer", "description": "number of steps (default 2)"},
			"stepMs": map[string]any{"type": "integer", "description": "milliseconds per step (default 50)"},
		}),
		guard: func(w work) error { _, _, err := guardedQuestions(w); return err },
		run:   runGuarded,
	}
}

// guardedQuestions asks the guard's rounds: confirm, then (confirmed) why.
func guardedQuestions(w work) (reason string, confirmed bool, err error) {
	first, err := w.ask(map[string]any{"confirm": elicit("Run the guarded job?", "confirm", "boolean")})
	if err != nil {
		return "", false, err
	}
	if v, ok := readAnswer(first["confirm"], "confirm"); !ok || v != "true" {
		return "", false, nil
	}
	second, err := w.ask(map[string]any{"reason": elicit("Why run the guarded job?", "reason", "string")})
	if err != nil {
		return "", false, err
	}
	reason, _ = readAnswer(second["reason"], "reason")
	return reason, true, nil
}

// runGuarded is the guarded tool's work. As a task it finds the guard's
// answers given already (the call that made it carried them), so it asks
// nothing again.
func runGuarded(w work, raw json.RawMessage) (map[string]any, error) {
	a, d, err := parseArgs(raw, 2)
	if err != nil {
		return nil, err
	}
	reason, confirmed, err := guardedQuestions(w)
	if err != nil {
		return nil, err
	}
	if !confirmed {
		return textResult("Guarded job not confirmed", true), nil
	}
	for k := 1; k <= *a.Steps; k++ {
		if err := w.step(k, *a.Steps, d); err != nil {
			return nil, err
		}
	}
	return textResult(fmt.Sprintf("Guarded job for %s: %d steps", reason, *a.Steps), false), nil
}

// checkGuard runs spec's guard, if any, against the answers the call
// carries (given, from its requestState and inputResponses): an
// InputRequiredResult when the guard asks for more, nil to go on.
func (s *Server) checkGuard(x *exchange, spec *toolSpec, given map[string]json.RawMessage) (any, *rpcError) {
	if spec.guard == nil {
		return nil, nil
	}
	err := spec.guard(&plainWork{ctx: x.r.Context(), tool: spec.name, key: s.stateKey, given: given})
	var need *needInput
	switch {
	case err == nil:
		return nil, nil
	case errors.As(err, &need):
		return need.result(), nil
	}
	return nil, inBandError(CodeInternalError, "%v", err)
}
