package pgstore

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// Sealed events. PostgreSQL checks no privilege on LISTEN and NOTIFY: any
// role that may connect to the database can listen on a channel or notify
// it. So every payload is sealed with AES-256-GCM under a key derived from
// the schema's secret (the meta row of the cursor secret), which only roles
// with rights on the schema can read, and the channel's name is derived from
// it too. A receiver drops what does not open (forged, or another schema's),
// and what is stale or replayed: each payload carries its sender's origin,
// a sequence number and the time it was sent.
//
// Sealed payload: base64 (no padding) of nonce || AES-GCM(plain), with
// plain = origin (8) | sent unix ns (8) | seq (8) | kind (1) | id length (2)
// | id | progress params.

const (
	originLen   = 8
	plainHeader = originLen + 8 + 8 + 1 + 2
	// sealOverhead is what sealing adds to the plaintext: nonce and tag.
	sealOverhead = 12 + 16
	// eventMaxAge is how old (or how far in the future, by the receiver's
	// clock) a sealed event may be; older ones are dropped as replays.
	eventMaxAge = 2 * time.Minute
	// originMemory is how long a receiver remembers a sender's last
	// sequence number since it last heard of it: longer than eventMaxAge,
	// so that a forgotten sender's events are all too old to be replayed.
	originMemory = 10 * time.Minute
)

// sealAD binds a sealed payload to its purpose and format version.
var sealAD = []byte("caddy-mcp-tasks/pgstore/event/v1")

// eventKeys derives the events' AEAD and channel name from the schema's
// secret, each under its own label.
func eventKeys(secret []byte) (cipher.AEAD, string, error) {
	derive := func(label string) []byte {
		m := hmac.New(sha256.New, secret)
		m.Write([]byte("caddy-mcp-tasks/pgstore/" + label))
		return m.Sum(nil)
	}
	block, err := aes.NewCipher(derive("event-key"))
	if err != nil {
		return nil, "", fmt.Errorf("pgstore: making the event cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, "", fmt.Errorf("pgstore: making the event cipher: %w", err)
	}
	return aead, "mcp_tasks_events_" + hex.EncodeToString(derive("event-channel")[:16]), nil
}

// sealedLen is the length of the sealed payload of an event.
func sealedLen(id string, params []byte) int {
	return base64.RawStdEncoding.EncodedLen(sealOverhead + plainHeader + len(id) + len(params))
}

// sealEvent seals an event of origin, numbered seq.
func sealEvent(aead cipher.AEAD, origin string, seq uint64, kind byte, id string, params []byte) (string, error) {
	if len(id) > 0xffff {
		return "", errors.New("task id too long")
	}
	plain := make([]byte, 0, plainHeader+len(id)+len(params))
	plain = append(plain, origin...)
	plain = binary.BigEndian.AppendUint64(plain, uint64(time.Now().UnixNano()))
	plain = binary.BigEndian.AppendUint64(plain, seq)
	plain = append(plain, kind)
	plain = binary.BigEndian.AppendUint16(plain, uint16(len(id)))
	plain = append(plain, id...)
	plain = append(plain, params...)
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("making a nonce: %w", err)
	}
	return base64.RawStdEncoding.EncodeToString(aead.Seal(nonce, nonce, plain, sealAD)), nil
}

// openedEvent is a payload that opened.
type openedEvent struct {
	origin string
	sent   time.Time
	seq    uint64
	kind   byte
	id     string
	params []byte
}

// openEvent opens a sealed payload; an error means it was not sealed under
// this schema's key (or is malformed).
func openEvent(aead cipher.AEAD, payload string) (openedEvent, error) {
	raw, err := base64.RawStdEncoding.DecodeString(payload)
	if err != nil {
		return openedEvent{}, errors.New("not base64")
	}
	ns := aead.NonceSize()
	if len(raw) < ns+aead.Overhead() {
		return openedEvent{}, errors.New("too short")
	}
	plain, err := aead.Open(nil, raw[:ns], raw[ns:], sealAD)
	if err != nil {
		return openedEvent{}, errors.New("does not open under the schema's key")
	}
	if len(plain) < plainHeader {
		return openedEvent{}, errors.New("short plaintext")
	}
	n := int(binary.BigEndian.Uint16(plain[plainHeader-2:]))
	if len(plain) < plainHeader+n {
		return openedEvent{}, errors.New("short task id")
	}
	return openedEvent{
		origin: string(plain[:originLen]),
		sent:   time.Unix(0, int64(binary.BigEndian.Uint64(plain[originLen:]))),
		seq:    binary.BigEndian.Uint64(plain[originLen+8:]),
		kind:   plain[originLen+16],
		id:     string(plain[plainHeader : plainHeader+n]),
		params: plain[plainHeader+n:],
	}, nil
}

// replayGuard remembers, per sender, the last sequence number received.
// Only the listener goroutine uses it.
type replayGuard struct {
	last map[string]originSeen
}

type originSeen struct {
	seq uint64
	at  time.Time
}

// fresh reports whether ev is neither stale nor a replay, and records it.
func (g *replayGuard) fresh(ev openedEvent, now time.Time) bool {
	if age := now.Sub(ev.sent); age > eventMaxAge || age < -eventMaxAge {
		return false
	}
	if g.last == nil {
		g.last = map[string]originSeen{}
	}
	prev, known := g.last[ev.origin]
	if known && ev.seq <= prev.seq {
		return false
	}
	if !known {
		for o, s := range g.last { // a new sender: forget the long silent
			if now.Sub(s.at) > originMemory {
				delete(g.last, o)
			}
		}
	}
	g.last[ev.origin] = originSeen{seq: ev.seq, at: now}
	return true
}
