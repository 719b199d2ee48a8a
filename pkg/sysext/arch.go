package sysext

import (
	"runtime"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
)

// Arch returns systemd's name (x86-64, arm64) for an architecture given as systemd, Go or
// uname spells it (x86-64, amd64, x86_64; arm64, aarch64). Empty means the running machine's.
func Arch(a string) (string, error) {
	switch a {
	case "":
		return Arch(runtime.GOARCH)
	case "x86-64", "amd64", "x86_64":
		return "x86-64", nil
	case "arm64", "aarch64":
		return "arm64", nil
	}
	return "", errs.Invalidf("unknown architecture %q: use amd64 (x86-64) or arm64", a)
}

// isSystemdArch reports whether a is a name systemd could ever match (a subset of systemd's
// list: the ones a Kubernetes sysext plausibly names, plus _any).
func isSystemdArch(a string) bool {
	switch a {
	case "_any", "x86-64", "x86", "arm64", "arm64-be", "arm", "arm-be", "riscv64", "ppc64", "ppc64-le",
		"s390x", "loongarch64", "mips64-le", "alpha", "ia64", "parisc", "sparc64", "m68k", "arc":
		return true
	}
	return false
}
