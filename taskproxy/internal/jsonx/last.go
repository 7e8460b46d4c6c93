package jsonx

// The Last functions read and edit the last member of a name, the one
// encoding/json and JavaScript's JSON.parse take when an object names a key
// twice. FindMember, Get, Set and SetPath act on the first, and stop there:
// right where the gateway refuses duplicated keys before reading them (a
// request's params), cheaper. Where nothing refuses them, in an upstream's
// answers the gateway learns from and rewrites, the Last functions keep it
// reading and editing the member its clients read.

// FindLast is FindMember for the last member named key; closing and count
// are those of the whole object.
func FindLast(obj []byte, key string) (m Member, found bool, closing, count int, err error) {
	closing, err = EachMember(obj, func(cur Member) bool {
		count++
		if cur.Is(obj, key) {
			m, found = cur, true
		}
		return true
	})
	return m, found, closing, count, err
}

// GetLast returns the raw value of the last member key of the object obj.
func GetLast(obj []byte, key string) ([]byte, bool) {
	m, found, _, _, err := FindLast(obj, key)
	if err != nil || !found {
		return nil, false
	}
	return obj[m.ValueStart:m.ValueEnd], true
}

// SetLast is Set acting on the last member named key.
func SetLast(obj []byte, key string, value []byte) ([]byte, error) {
	m, found, closing, count, err := FindLast(obj, key)
	if err != nil {
		return nil, err
	}
	if found {
		return Splice(obj, m.ValueStart, m.ValueEnd, value), nil
	}
	return insertMember(obj, closing, count, key, value), nil
}

// SetPathLast is SetPath following and editing the last member of each
// name on the path.
func SetPathLast(obj []byte, path []string, value []byte) ([]byte, error) {
	if len(path) == 1 {
		return SetLast(obj, path[0], value)
	}
	inner, ok := GetLast(obj, path[0])
	if !ok || len(inner) == 0 || inner[0] != '{' {
		inner = []byte("{}")
	}
	updated, err := SetPathLast(inner, path[1:], value)
	if err != nil {
		return nil, err
	}
	return SetLast(obj, path[0], updated)
}

// insertMember adds key: value before the closing brace of an object of
// count members.
func insertMember(obj []byte, closing, count int, key string, value []byte) []byte {
	ins := make([]byte, 0, len(key)+len(value)+4)
	if count > 0 {
		ins = append(ins, ',')
	}
	ins, _ = MarshalString(ins, key)
	ins = append(ins, ':')
	ins = append(ins, value...)
	return Splice(obj, closing, closing, ins)
}
