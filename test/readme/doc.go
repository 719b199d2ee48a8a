// Package readme holds the README test: every flatcar-capo command shown in README.md is run
// against local stand-ins (release server, Kubernetes mirror, Keystone + Glance), so a renamed
// flag or a wrong example fails `make test`; a block it cannot run follows an HTML comment
// (<!-- readme-test: skip (why) -->) a reader never sees. The command synopses of the README,
// CONTRIBUTING.md and docs/reference.md must name real commands and flags. It has no code of its
// own: the README's parser is test code too (extract_test.go). TestBenchFigures holds the README's
// Performance table and docs/bench.md's Current figures to the dated runs in docs/bench.md.
package readme
