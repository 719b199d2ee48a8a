// Package qemuboot boots a test disk (internal/testing/flatcardisk, Bootable) under QEMU TCG and returns
// the kernel command line its initramfs printed, so tests can check what GRUB built from the OEM
// partition's grub.cfg.
package qemuboot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
)

// Options of a boot.
type Options struct {
	UEFI    bool          // boot with OVMF instead of SeaBIOS
	Timeout time.Duration // default 120 s (a boot takes 10-20 s under TCG, more on a loaded machine)
}

// OVMF firmware (Debian's ovmf package).
const (
	ovmfCode = "/usr/share/OVMF/OVMF_CODE_4M.fd"
	ovmfVars = "/usr/share/OVMF/OVMF_VARS_4M.fd"
)

// UEFIDrives copies OVMF's variables to vars (the guest writes them) and returns the QEMU
// arguments of the two firmware drives of a UEFI boot.
func UEFIDrives(vars string) ([]string, error) {
	data, err := os.ReadFile(ovmfVars)
	if err != nil {
		return nil, fmt.Errorf("UEFI boot needs OVMF (install the ovmf package): %w", err)
	}
	if err := os.WriteFile(vars, data, 0o600); err != nil {
		return nil, err
	}
	return []string{"-drive", "if=pflash,format=raw,readonly=on,file=" + ovmfCode,
		"-drive", "if=pflash,format=raw,file=" + OptEscape(vars)}, nil
}

// Boot boots image (raw or qcow2; QEMU never writes to it) and returns the kernel command line the
// guest printed. It fails the test, with the tail of the serial log, when the guest does not print
// it and power off in time; QEMU is killed on timeout and when the test ends.
func Boot(t testing.TB, image string, opts Options) string {
	t.Helper()
	testutil.RequireTools(t, "qemu-system-x86_64")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	start := time.Now()
	cmdline, log, err := run(ctx, image, t.TempDir(), opts)
	if err != nil {
		t.Fatalf("qemuboot: %v\nlast serial output:\n%s", err, Tail(log, 3000))
	}
	t.Logf("qemuboot: %s booted in %.1fs (UEFI=%t): %s", filepath.Base(image), time.Since(start).Seconds(), opts.UEFI, cmdline)
	return cmdline
}

// run is Boot without testing.TB: work is a directory for the serial log and UEFI variables. It
// returns the printed command line and the serial log.
func run(ctx context.Context, image, work string, opts Options) (cmdline string, log []byte, err error) {
	if opts.Timeout == 0 {
		opts.Timeout = 120 * time.Second
	}
	// snapshot=on: the guest's writes go to a temporary overlay, never to the image under test.
	drive, err := Drive(image, ",snapshot=on")
	if err != nil {
		return "", nil, err
	}
	serial := filepath.Join(work, "serial.log")
	args := append([]string{
		"-accel", "tcg", "-m", "512", "-no-reboot", "-nic", "none",
		"-display", "none", "-monitor", "none",
		"-chardev", "file,id=serial0,path=" + OptEscape(serial), "-serial", "chardev:serial0",
	}, drive...)
	if opts.UEFI {
		drives, err := UEFIDrives(filepath.Join(work, "OVMF_VARS.fd"))
		if err != nil {
			return "", nil, err
		}
		args = append(args, drives...)
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "qemu-system-x86_64", args...)
	cmd.WaitDelay = 5 * time.Second
	// No stray VMs: QEMU dies with the test process, even when that is killed. Pdeathsig follows
	// the thread that started QEMU, so keep this goroutine on it until QEMU has exited.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	runErr := cmd.Run()
	log, _ = os.ReadFile(serial)
	cmdline, found := parse(log)
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return cmdline, log, fmt.Errorf("%s did not power off within %s (killed QEMU); marker found: %t", image, opts.Timeout, found)
	case ctx.Err() != nil:
		return cmdline, log, ctx.Err()
	case runErr != nil:
		return cmdline, log, fmt.Errorf("qemu-system-x86_64 %s: %w\n%s", strings.Join(args, " "), runErr, stderr.String())
	case !found:
		return "", log, fmt.Errorf("%s powered off without printing %q (did GRUB boot the kernel?)", image, flatcardisk.CmdlineMarker)
	}
	return cmdline, log, nil
}

// OptEscape doubles commas, QEMU's escape for a comma inside an option value (paths of subtests
// with commas in their names).
func OptEscape(s string) string { return strings.ReplaceAll(s, ",", ",,") }

// parse finds the marker line in the serial log.
func parse(log []byte) (string, bool) {
	for _, line := range strings.Split(string(log), "\n") {
		if _, rest, ok := strings.Cut(line, flatcardisk.CmdlineMarker); ok {
			return strings.TrimSpace(rest), true
		}
	}
	return "", false
}

// Drive is the QEMU arguments of image (raw or qcow2, as its header says) as a virtio disk;
// extra appends -drive options (",snapshot=on").
func Drive(image, extra string) ([]string, error) {
	f, err := os.Open(image)
	if err != nil {
		return nil, fmt.Errorf("cannot boot %s: %w", image, err)
	}
	defer f.Close()
	format, err := disk.DetectFormat(f)
	if err != nil {
		return nil, err
	}
	return []string{"-drive", "file=" + OptEscape(image) + ",format=" + string(format) + ",if=virtio" + extra}, nil
}

// Tail is the last n bytes of b (a serial log, a tool's output), for failure messages.
func Tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
