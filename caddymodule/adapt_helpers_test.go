package caddymodule

import (
	"bytes"
	"encoding/json"
)

// indentJSON formats adapted JSON the way caddytest.CompareAdapt compares it.
func indentJSON(raw []byte) (string, error) {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "\t"); err != nil {
		return "", err
	}
	return buf.String(), nil
}
