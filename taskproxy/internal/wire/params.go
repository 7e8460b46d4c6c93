package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// ParamsObject decodes params into a map of raw members; absent params give
// an empty map.
func ParamsObject(params json.RawMessage) (map[string]json.RawMessage, error) {
	obj := map[string]json.RawMessage{}
	if len(params) == 0 || bytes.Equal(params, []byte("null")) {
		return obj, nil
	}
	if err := json.Unmarshal(params, &obj); err != nil {
		return nil, fmt.Errorf("params must be an object: %w", err)
	}
	return obj, nil
}

// StringParam returns the string member name of params.
func StringParam(params json.RawMessage, name string) (string, error) {
	if s, ok := plainStringParam(params, name); ok {
		return s, nil
	}
	obj, err := ParamsObject(params)
	if err != nil {
		return "", err
	}
	raw, ok := obj[name]
	if !ok {
		return "", fmt.Errorf("params.%s is required", name)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil || s == "" {
		return "", fmt.Errorf("params.%s must be a non-empty string", name)
	}
	return s, nil
}
