package standin

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/testutil/flatcardisk"
)

// InitrdFailedMarker is printed on the console when the initramfs cannot mount the system.
const InitrdFailedMarker = "FLATCAR_CAPO_INITRD_FAILED"

// initScript is the initramfs' /init: what Flatcar's initrd does at this level. Partitions are
// found by GPT name (the kernel's PARTNAME), ROOT by its filesystem label as root=LABEL=ROOT says.
const initScript = `#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs /run
log() { echo "initrd: $*" >/dev/kmsg; }
fail() {
	echo "` + InitrdFailedMarker + `: $*" >/dev/console
	sleep 2
	poweroff -f
}
for m in $(cat /etc/modules.load); do insmod "/lib/modules/$m" 2>/dev/null; done

partname() {
	for u in /sys/class/block/*/uevent; do
		if grep -qx "PARTNAME=$1" "$u"; then
			echo "/dev/$(sed -n 's/^DEVNAME=//p' "$u")"
			return 0
		fi
	done
	return 1
}
i=0
while ! usr=$(partname USR-A) || ! root=$(findfs LABEL=ROOT 2>/dev/null); do
	i=$((i + 1))
	[ $i -gt 300 ] && fail "no USR-A partition or ROOT filesystem after 60 s"
	sleep 0.2
done
log "USR-A is $usr, ROOT is $root"

mkdir -p /sysroot
mount -o rw "$root" /sysroot || fail "cannot mount ROOT $root"
mkdir -p /sysroot/usr
mount -o ro "$usr" /sysroot/usr || fail "cannot mount USR-A $usr read-only"
for l in bin sbin lib lib64; do
	[ -e "/sysroot/$l" ] || [ -L "/sysroot/$l" ] || ln -s "usr/$l" "/sysroot/$l"
done
# /etc: the image's defaults under the machine's own changes, as on Flatcar.
mkdir -p /sysroot/etc /sysroot/.etc-work
mount -t overlay overlay -o lowerdir=/sysroot/usr/share/flatcar/etc,upperdir=/sysroot/etc,workdir=/sysroot/.etc-work /sysroot/etc ||
	fail "cannot mount the /etc overlay"
for d in proc sys dev run var boot oem home root opt media mnt srv; do mkdir -p "/sysroot/$d"; done
mkdir -p /sysroot/tmp && chmod 1777 /sysroot/tmp
chmod 0700 /sysroot/root
for m in dev proc sys run; do mount --move "/$m" "/sysroot/$m"; done
exec switch_root /sysroot /usr/lib/systemd/systemd
`

// makeInitramfs packs busybox, the modules (in load order) and /init.
func makeInitramfs(k kernelInfo) ([]byte, error) {
	busybox, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return nil, fmt.Errorf("reading /bin/busybox (install busybox-static): %w", err)
	}
	files, err := k.moduleFiles()
	if err != nil {
		return nil, err
	}
	var c flatcardisk.CPIO
	for _, d := range []string{"bin", "dev", "etc", "proc", "sys", "run", "lib", "lib/modules"} {
		c.Add(d, 0o040755, 0, 0, nil)
	}
	c.Add("dev/console", 0o020600, 5, 1, nil)
	c.Add("bin/busybox", 0o100755, 0, 0, busybox)
	dirs := map[string]bool{}
	var order []string
	for _, f := range files {
		for d := filepath.Dir(f); d != "."; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	// Parent directories first: fewer slashes first, then by name, for a stable archive.
	sorted := slices.Collect(maps.Keys(dirs))
	sort.Slice(sorted, func(i, j int) bool { return less(sorted[i], sorted[j]) })
	for _, d := range sorted {
		c.Add("lib/modules/"+d, 0o040755, 0, 0, nil)
	}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(k.modDir, f))
		if err != nil {
			return nil, err
		}
		c.Add("lib/modules/"+f, 0o100644, 0, 0, data)
		order = append(order, f)
	}
	c.Add("etc/modules.load", 0o100644, 0, 0, []byte(strings.Join(order, "\n")+"\n"))
	c.Add("init", 0o100755, 0, 0, []byte(initScript))
	return c.Gzip()
}

func less(a, b string) bool {
	da, db := strings.Count(a, "/"), strings.Count(b, "/")
	if da != db {
		return da < db
	}
	return a < b
}
