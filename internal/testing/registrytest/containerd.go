package registrytest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/node"
	"github.com/flatcar-capo/flatcar-capo/pkg/sysext"
)

// ContainerdVersion is the containerd scripts/install-containerd.sh builds by default (Flatcar
// stable's 2.1.x): the stand-in guests' and the node proof's.
const ContainerdVersion = "2.1.5"

// ContainerdMatrix is every containerd the containerd proofs run against: Flatcar stable's
// 2.1.5, beta's 2.2.x and upstream's 2.3.x and 2.4.x (what image-builder and the bakery ship).
// scripts/install-deps.sh builds each (install-containerd.sh VERSION).
var ContainerdMatrix = []string{"2.1.5", "2.2.9", "2.3.7", "2.4.2"}

// ContainerdDir is the directory of containerd, ctr, containerd-shim-runc-v2 and crictl built by
// scripts/install-containerd.sh; the test skips (fails in strict mode) when they are missing.
func ContainerdDir(t testing.TB) string { return ContainerdDirOf(t, ContainerdVersion) }

// ContainerdDirOf is ContainerdDir of another containerd version (install-containerd.sh VERSION).
func ContainerdDirOf(t testing.TB, version string) string {
	t.Helper()
	top := testutil.InstallCache("containerd")
	dir := filepath.Join(top, version)
	missing := func() error {
		for _, b := range []string{"containerd", "ctr", "containerd-shim-runc-v2", "crictl"} {
			if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
				return err
			}
		}
		return nil
	}
	// install-deps.sh builds the matrix's other versions in the background on a fresh machine.
	testutil.WaitForScript(t, "scripts/install-containerd.sh "+version, filepath.Join(top, ".build.lock"), filepath.Join(top, "build.log"),
		func() bool { return missing() == nil })
	if err := missing(); err != nil {
		testutil.RequireEnv(t, err, "containerd "+version+" (run scripts/install-containerd.sh "+version+")")
	}
	return dir
}

// FlatcarContainerdConfig is Flatcar's /usr/share/containerd/config.toml (the one the
// containerd sysext of `build --containerd-version` carries) importing confd/*.toml.
func FlatcarContainerdConfig(confd string) string {
	return strings.ReplaceAll(sysext.FlatcarContainerdConfig, node.ContainerdConfDir, confd)
}

// CrictlInGuest is where ContainerdSysext puts the real crictl (the Kubernetes sysext's
// usr/bin/crictl is the stand-in's).
const CrictlInGuest = "/usr/libexec/flatcar-capo-test/crictl"

// containerdUnit is Flatcar's containerd.service as its containerd-flatcar sysext ships it.
const containerdUnit = `[Unit]
Description=containerd container runtime
After=network.target

[Service]
Delegate=yes
Environment=CONTAINERD_CONFIG=/usr/share/containerd/config.toml
ExecStart=/usr/bin/containerd --config ${CONTAINERD_CONFIG}
KillMode=process
Restart=always
LimitNOFILE=1048576
TasksMax=infinity

[Install]
WantedBy=multi-user.target
`

// ContainerdSysext makes dir/containerd-flatcar.raw, a sysext like Flatcar's built-in one: the
// real containerd, ctr and shim (ContainerdDir), Debian's runc, Flatcar's config.toml and unit,
// plus crictl at CrictlInGuest. The same inputs give the same bytes (the stand-in's cache key).
func ContainerdSysext(t testing.TB, dir string) string {
	t.Helper()
	bin := ContainerdDir(t)
	testutil.RequireTool(t, "runc")
	runc, err := exec.LookPath("runc")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "containerd-flatcar.raw")
	spec := sysext.Spec{Name: "containerd-flatcar", Release: sysext.Release{"ID": "_any", "ARCHITECTURE": "x86-64"}, ModTime: time.Unix(1700000000, 0),
		Files: []sysext.File{
			{Path: "usr/bin/containerd", Mode: 0o755, Source: filepath.Join(bin, "containerd")},
			{Path: "usr/bin/ctr", Mode: 0o755, Source: filepath.Join(bin, "ctr")},
			{Path: "usr/bin/containerd-shim-runc-v2", Mode: 0o755, Source: filepath.Join(bin, "containerd-shim-runc-v2")},
			{Path: "usr/bin/runc", Mode: 0o755, Source: runc},
			{Path: strings.TrimPrefix(CrictlInGuest, "/"), Mode: 0o755, Source: filepath.Join(bin, "crictl")},
			{Path: "usr/share/containerd/config.toml", Mode: 0o644, Data: []byte(FlatcarContainerdConfig("/etc/containerd/conf.d"))},
			{Path: "usr/lib/systemd/system/containerd.service", Mode: 0o644, Data: []byte(containerdUnit)},
		}}
	if _, err := sysext.Create(context.Background(), spec, out); err != nil {
		t.Fatal(err)
	}
	return out
}
