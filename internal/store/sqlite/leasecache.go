package sqlite

// leaseCache holds the token of each lease as committed, so that the fence
// of a write (each pass of the engine writes with one) is checked without a
// query. The single writer keeps it exact: a transaction notes the tokens
// it writes (ClaimLease, Import) and those it reads from the file (a fence
// the cache did not know), and they enter the cache once the transaction
// commits. A request rolled back to its savepoint drops its notes; a commit
// that fails forgets every key the transaction noted, so the next check
// reads the file. Only the leader of a group commit uses it, one group at a
// time (group.go).
type leaseCache struct {
	tokens map[string]int64
}

// leaseToken is a lease's token as a transaction wrote or read it.
type leaseToken struct {
	key   string
	token int64
}

// committed takes in the notes of a committed transaction, in order (the
// last note of a key is its token).
func (c *leaseCache) committed(notes []leaseToken) {
	if len(notes) == 0 {
		return
	}
	if c.tokens == nil {
		c.tokens = map[string]int64{}
	}
	for _, n := range notes {
		c.tokens[n.key] = n.token
	}
}

// forget drops the keys of notes (their transaction may or may not have
// committed).
func (c *leaseCache) forget(notes []leaseToken) {
	for _, n := range notes {
		delete(c.tokens, n.key)
	}
}

// leaseToken returns the token of lease key as t sees it: its own notes
// (the latest), else the cache; ok is false when neither knows it.
func (t *wtx) leaseToken(key string) (token int64, ok bool) {
	for i := len(t.leases) - 1; i >= 0; i-- {
		if t.leases[i].key == key {
			return t.leases[i].token, true
		}
	}
	token, ok = t.leaseCache.tokens[key]
	return token, ok
}

// noteLease records that lease key has token in this transaction.
func (t *wtx) noteLease(key string, token int64) {
	t.leases = append(t.leases, leaseToken{key, token})
}
