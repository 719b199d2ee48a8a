package packer

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

var virtFlags = regexp.MustCompile(`(?m)^flags\s*:.*\b(vmx|svm)\b`)

// chooseAccelerator returns the accelerator to use and, when it had to fall back, a one-line
// warning. An explicit choice ("kvm", "tcg", ...) is taken as given. Auto picks kvm only when
// the CPU has vmx/svm and QEMU really starts with it: /dev/kvm can exist on a CPU without them
// (packer itself picks kvm when it can open /dev/kvm, and the boot then fails).
func chooseAccelerator(ctx context.Context, qemu, want string) (accel, warning string) {
	if want != "" && want != "auto" {
		return want, ""
	}
	cpuinfo, _ := os.ReadFile("/proc/cpuinfo")
	switch {
	case !virtFlags.Match(cpuinfo):
		return "tcg", "warning: the CPU has no vmx/svm flag, so KVM is not usable; the VM runs under QEMU TCG (slow)"
	case !probeKVM(ctx, qemu):
		return "tcg", "warning: QEMU does not start with -accel kvm (is /dev/kvm accessible?); the VM runs under QEMU TCG (slow)"
	}
	return "kvm", ""
}

// probeKVM starts QEMU with KVM and no machine, stopped, and quits it through its monitor.
func probeKVM(ctx context.Context, qemu string) bool {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemu, "-accel", "kvm", "-machine", "none", "-nodefaults",
		"-no-user-config", "-display", "none", "-S", "-monitor", "stdio")
	cmd.Stdin = strings.NewReader("quit\n")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	return cmd.Run() == nil && !strings.Contains(out.String(), "failed to initialize")
}
