// Package readme holds the README test: every flatcar-capo command shown in README.md is run
// against local stand-ins (release server, Kubernetes mirror, Keystone + Glance), so a renamed
// flag or a wrong example fails `make test`. It has no code of its own: the README's parser is
// test code too (extract_test.go). TestBenchFigures holds the README's Performance table to the
// dated runs in docs/bench.md.
package readme
