package standin

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/qemuboot"
)

// ignitionScript builds the guest's Ignition (coreos/ignition v2.24.0 with Flatcar's spec 2 and
// fw_cfg changes, cgo + libblkid) from the Go module proxy into the user cache dir; the initramfs
// runs its stages on first boot as Flatcar's does. docs/ignition.md lists what differs.
const ignitionScript = "scripts/install-ignition.sh"

// ignitionBinary returns the path of the guest's Ignition, running IgnitionScript from this
// checkout (a second or so when cached; minutes the first time).
func ignitionBinary(ctx context.Context) (string, error) {
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("standin: cannot locate %s", ignitionScript)
	}
	script := filepath.Join(filepath.Dir(self), "..", "..", "..", ignitionScript)
	if _, err := os.Stat(script); err != nil {
		return "", fmt.Errorf("standin: the guest's Ignition is built by %s, not found from here: %w", ignitionScript, err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, script)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("standin: %s: %w\n%s", ignitionScript, err, qemuboot.Tail(stderr.Bytes(), 3000))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	path := lines[len(lines)-1]
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("standin: %s printed %q, not a file: %w", ignitionScript, path, err)
	}
	return path, nil
}
