package node

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// gossipKeysMax bounds the keys of a gossip keyring.
const gossipKeysMax = 16

// leaderTableSkewMax is how far in the future a leader table's start time
// may lie: a table stamped later than that is refused, so that no table can
// win against every later announcement of its node.
const leaderTableSkewMax = time.Minute

// leaderTableRefresh is how often a node gossips its leader table again
// when it did not change, so that members that dropped it (for example
// because they did not know the node yet) converge.
const leaderTableRefresh = 10 * time.Second

// ParseGossipKey decodes one base64 gossip key and checks its length (16,
// 24 or 32 bytes: AES-128, -192 or -256).
func ParseGossipKey(s string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("%w: gossip key is not base64: %w", ErrInvalidConfig, err)
	}
	if err := checkGossipKey(key); err != nil {
		return nil, err
	}
	return key, nil
}

// ParseGossipKeyring reads a keyring file's text: one base64 key per line,
// the first being the primary key (used to send); blank lines and lines
// starting with # are skipped.
func ParseGossipKeyring(text string) ([][]byte, error) {
	var keys [][]byte
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, err := ParseGossipKey(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: gossip keyring holds no key", ErrInvalidConfig)
	}
	return keys, nil
}

// checkGossipKey validates one gossip key: memberlist takes AES-128, -192
// or -256 keys only.
func checkGossipKey(key []byte) error {
	switch len(key) {
	case 16, 24, 32:
		return nil
	}
	return fmt.Errorf("%w: gossip key of %d bytes: want 16, 24 or 32", ErrInvalidConfig, len(key))
}

// checkGossipKeys validates a keyring: at most gossipKeysMax keys of valid
// lengths, no key twice.
func checkGossipKeys(keys [][]byte) error {
	if len(keys) > gossipKeysMax {
		return fmt.Errorf("%w: %d gossip keys: at most %d", ErrInvalidConfig, len(keys), gossipKeysMax)
	}
	for i, k := range keys {
		if err := checkGossipKey(k); err != nil {
			return err
		}
		if slices.ContainsFunc(keys[:i], func(o []byte) bool { return hmac.Equal(o, k) }) {
			return fmt.Errorf("%w: gossip key %d given twice", ErrInvalidConfig, i+1)
		}
	}
	return nil
}

// clusterSecret derives the admission secret from a gossip key, so that the
// raw key never signs anything itself.
func clusterSecret(gossipKey []byte) []byte {
	mac := hmac.New(sha256.New, gossipKey)
	mac.Write([]byte("ferry cluster admission secret v1"))
	return mac.Sum(nil)
}

// admissionProof is a member's proof that it holds the cluster secret,
// bound to its id, addresses and table-signing key: an HMAC-SHA256 under
// the secret, base64.
func admissionProof(secret []byte, m memberMeta) string {
	mac := hmac.New(sha256.New, secret)
	fields := []string{"ferry admission v1", m.ID, m.Raft, m.Client, m.HTTP, m.SignKey}
	if m.Inc != "" {
		// Appended only when set: a member without one proves as before.
		fields = append(fields, m.Inc)
	}
	for _, field := range fields {
		mac.Write([]byte(field))
		mac.Write([]byte{0})
	}
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// admitted reports whether m carries a valid proof under one of the keys
// of the keyring. Without any key (an insecure node) every member is
// admitted: there is no secret to check against.
func (m *membership) admitted(mm memberMeta) bool {
	keys := m.keyring()
	if len(keys) == 0 {
		return true
	}
	for _, k := range keys {
		want := admissionProof(clusterSecret(k), mm)
		if hmac.Equal([]byte(want), []byte(mm.Proof)) {
			return true
		}
	}
	return false
}

// keyring returns the gossip keys in force, primary first.
func (m *membership) keyring() [][]byte {
	if m.ring == nil {
		return nil
	}
	return m.ring.GetKeys()
}

// signedTable is a leader table as gossiped: its JSON and the announcing
// node's ed25519 signature of that JSON.
type signedTable struct {
	Body json.RawMessage `json:"b"`
	Sig  []byte          `json:"s"`
}

// sign wraps t with this node's signature.
func (m *membership) sign(t leaderTable) signedTable {
	body, _ := json.Marshal(t)
	return signedTable{Body: body, Sig: ed25519.Sign(m.signKey, body)}
}

// verifyTable checks a gossiped table: it must decode, name an alive
// member, carry that member's signature (so only the node it describes can
// have written it) and start no later than leaderTableSkewMax from now.
func (m *membership) verifyTable(st signedTable, now time.Time) (leaderTable, error) {
	var t leaderTable
	if err := json.Unmarshal(st.Body, &t); err != nil {
		return t, fmt.Errorf("undecodable leader table: %w", err)
	}
	if t.Node == "" || t.Node == m.cfg.ID {
		return t, fmt.Errorf("leader table for node %q", t.Node)
	}
	if len(t.Reports) > reportsMax {
		return t, fmt.Errorf("leader table of %s carries %d move reports, the most is %d", t.Node, len(t.Reports), reportsMax)
	}
	if t.Start <= 0 || t.Start > now.Add(leaderTableSkewMax).UnixNano() {
		return t, fmt.Errorf("leader table of %s starts at %d, beyond now plus %s", t.Node, t.Start, leaderTableSkewMax)
	}
	m.mu.Lock()
	mm, alive := m.alive[t.Node]
	m.mu.Unlock()
	if !alive {
		return t, fmt.Errorf("leader table of %s, not an alive member", t.Node)
	}
	pub, err := base64.StdEncoding.DecodeString(mm.SignKey)
	if err != nil || len(pub) != ed25519.PublicKeySize || len(st.Sig) != ed25519.SignatureSize {
		return t, fmt.Errorf("leader table of %s: member has no signing key", t.Node)
	}
	if !ed25519.Verify(ed25519.PublicKey(pub), st.Body, st.Sig) {
		return t, fmt.Errorf("leader table of %s not signed by it", t.Node)
	}
	return t, nil
}

// unadmittedWarnEvery spaces out the warnings about one unadmitted member.
const unadmittedWarnEvery = time.Minute

// warnUnadmitted logs, at most once a minute per member, that a member
// without a valid admission proof was refused.
func (m *membership) warnUnadmitted(id string) {
	m.mu.Lock()
	last, seen := m.refused[id]
	if seen && time.Since(last) < unadmittedWarnEvery {
		m.mu.Unlock()
		return
	}
	if len(m.refused) >= 1024 {
		clear(m.refused)
	}
	m.refused[id] = time.Now()
	m.mu.Unlock()
	m.logger.Warn("refusing to register a member without a valid admission proof", "member", id)
}
