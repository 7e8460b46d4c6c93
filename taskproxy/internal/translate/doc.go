// Package translate turns 2025-11-25 answers and params into their
// 2026-07-28 forms and back, for the version bridge and for the tasks whose
// 2026-07-28 client was served by a 2025-11-25 upstream, and, for the
// reverse bridge, 2026-07-28 answers into their 2025-11-25 forms and a
// 2025-11-25 session's requests into 2026-07-28 ones ([V2025Initialize]). Its functions are
// pure: bytes in, bytes out, with every member they do not translate kept
// as the upstream wrote it.
package translate
