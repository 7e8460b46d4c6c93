// Package jsonx scans and edits JSON without decoding it: it finds the span
// of a member or an element, and sets, deletes or adds one member of one
// object while every other byte stays as it was (decoding and re-encoding
// would reorder keys, re-escape strings and change number formats). It also
// matches object keys the way Go's encoding/json does (Unicode simple case
// folding), so that a reader of untrusted JSON can refuse keys that another
// reader would take for the ones it reads. And it reads numbers as JSON
// Schema does (Int, Integer, LenientInteger): an integral value in any
// spelling, 5000.0 or 5e3, is that integer; every integer the gateway takes
// from a client or an upstream goes through them.
//
// The scanner trusts its input to be valid JSON where a caller needs an exact
// answer: validate first (json.Valid) when the input is untrusted. It imports
// nothing else of the module.
package jsonx
