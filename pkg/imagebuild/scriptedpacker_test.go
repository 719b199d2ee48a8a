package imagebuild

import (
	"context"
	"strings"
	"sync"

	"github.com/flatcar-capo/flatcar-capo/pkg/packer"
)

// scriptedPacker is a packer.Driver for the steps' failure paths without a packer binary, the
// way packer-plugin-qemu tests its steps against a mock of its QEMU driver. It answers `packer
// version` with Version, `packer plugins installed` with Plugins, and runs Validate and Build
// (nil: succeed silently) for those commands. It records every call.
type scriptedPacker struct {
	Version  string // e.g. "Packer v1.6.6"
	Plugins  string // e.g. "github.com/hashicorp/qemu/packer-plugin-qemu_v1.0.9_x5.0_linux_amd64"
	Validate func(ctx context.Context, inv packer.Invocation) error
	Build    func(ctx context.Context, inv packer.Invocation) error

	mu    sync.Mutex
	calls []string
}

// Path implements packer.Driver.
func (d *scriptedPacker) Path() string { return "/scripted/packer" }

// Run implements packer.Driver.
func (d *scriptedPacker) Run(ctx context.Context, inv packer.Invocation) error {
	cmd := ""
	if len(inv.Args) > 0 {
		cmd = inv.Args[0]
	}
	d.mu.Lock()
	d.calls = append(d.calls, strings.Join(inv.Args, " "))
	d.mu.Unlock()
	out := func(text string) {
		for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
			if inv.Stdout != nil && l != "" {
				inv.Stdout(l)
			}
		}
	}
	switch cmd {
	case "version":
		out(d.Version)
	case "plugins":
		out(d.Plugins)
	case "validate":
		if d.Validate != nil {
			return d.Validate(ctx, inv)
		}
	case "build":
		if d.Build != nil {
			return d.Build(ctx, inv)
		}
	}
	return ctx.Err()
}

// Count is how many calls ran the packer subcommand cmd ("version", "build", ...).
func (d *scriptedPacker) Count(cmd string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, c := range d.calls {
		if c == cmd || strings.HasPrefix(c, cmd+" ") {
			n++
		}
	}
	return n
}
