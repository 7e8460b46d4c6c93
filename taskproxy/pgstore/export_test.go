package pgstore

// EventChannel is the channel of s's events, for tests that play an
// outsider who learned it.
func EventChannel(s *Store) string { return s.eventChannel }
