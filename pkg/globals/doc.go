// Package globals holds the test that keeps process-global state out of flatcar-capo's product
// code: no package under pkg/ sets or clears environment variables or swaps a library's global
// random source (os.Setenv, uuid.SetRand, ...). Two builds in one process (tests, `plan --build`
// if it ever runs in-process) would race on them, and no signature shows it; values such as the
// build's epoch are resolved once and passed instead. Only main (cmd/) and tests may.
package globals
