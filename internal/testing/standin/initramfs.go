package standin

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/flatcardisk"
)

// initrdFailedMarker is printed on the console when the initramfs cannot mount the system.
const initrdFailedMarker = "FLATCAR_CAPO_INITRD_FAILED"

// initScript is the initramfs' /init: what Flatcar's initrd does at this level. Partitions are
// found by GPT name (the kernel's PARTNAME), ROOT by its filesystem label as root=LABEL=ROOT says.
const initScript = `#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs /run
mkdir -p /tmp # Ignition mounts the config drive on a temporary directory
log() { echo "initrd: $*" >/dev/kmsg; }
fail() {
	echo "` + initrdFailedMarker + `: $*" >/dev/console
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

first_boot="" oem_id=""
for w in $(cat /proc/cmdline); do
	case "$w" in
	flatcar.first_boot=0) ;;
	flatcar.first_boot=*) first_boot=1 ;;
	flatcar.oem.id=*) oem_id=${w#flatcar.oem.id=} ;;
	esac
done
if [ -n "$first_boot" ]; then
	# Ignition runs with USR-A's tools (mount, useradd, modprobe, systemctl), as Flatcar's
	# initrd carries its own: USR-A read-only at /sysusr/usr, its libraries and modules where
	# the ELF interpreter and kmod look.
	mkdir -p /sysusr/usr
	mount -o ro "$usr" /sysusr/usr || fail "cannot mount USR-A $usr at /sysusr/usr"
	ln -s /sysusr/usr /usr
	ln -s /sysusr/usr/lib64 /lib64
	ln -s /sysusr/usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu
	ln -s "/sysusr/usr/lib/modules/$(uname -r)" "/lib/modules/$(uname -r)"
	ln -s /sysusr/usr/share/flatcar/etc/ld.so.cache /etc/ld.so.cache
	ln -s /sysusr/usr/share/flatcar/etc/ssl /etc/ssl
	# The network, as Flatcar's initrd starts networkd on a first boot: DHCP on every NIC, for the
	# metadata service and remote file sources. A NIC without DHCP (a guest-only network) times out.
	for n in /sys/class/net/*; do
		n=${n##*/}
		[ "$n" = lo ] && continue
		ip link set "$n" up
		udhcpc -i "$n" -s /etc/udhcpc.script -q -n -t 5 -T 1 >/dev/null 2>&1 &
	done
	i=0
	while ! ip route | grep -q '^default' && [ $i -lt 50 ]; do sleep 0.2; i=$((i + 1)); done
	log "network: $(ip -4 -o addr show scope global | awk '{print $2, $4}' | tr '\n' ' ')"
	# udev's /dev/disk/by-label links, where Ignition looks for the config drive (it may come late).
	(while :; do
		/usr/sbin/blkid -c /dev/null -s LABEL | while IFS=: read -r dev tags; do
			label=$(echo "$tags" | sed -n 's/.* LABEL="\([^"]*\)".*/\1/p')
			[ -n "$label" ] && mkdir -p /dev/disk/by-label && ln -sfn "$dev" "/dev/disk/by-label/$label"
		done
		sleep 0.5
	done) &
	bylabel=$!
	ignition() {
		log "ignition --stage=$1"
		PATH=/usr/sbin:/usr/bin:/bin /bin/ignition --root=/sysroot --platform="$oem_id" --stage="$1" --log-to-stdout >>/run/ignition.log 2>&1 ||
			{ tail -40 /run/ignition.log >/dev/console; fail "Ignition's $1 stage failed (platform $oem_id)"; }
	}
	ignition fetch-offline
	[ -e /run/ignition/neednet ] && ignition fetch
	ignition disks
fi

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
if [ -n "$first_boot" ]; then
	ignition mount
	ignition files
	ignition umount
	kill "$bylabel"
	# Ignition ran: the next boot is not a first boot.
	mkdir -p /esp
	mount -t vfat "$(partname EFI-SYSTEM)" /esp || fail "cannot mount the ESP to remove flatcar/first_boot"
	rm -f /esp/flatcar/first_boot
	umount /esp
	umount /sysusr/usr
	# The real root's networkd starts from unconfigured NICs, and they are down: the real root's
	# udev renames eth0 to its predictable name (Flatcar's initrd udev names it already; this
	# one has no udev), and the kernel refuses to rename a NIC that is up, which leaves it
	# unprocessed: networkd waits for udev forever, no address, no SSH.
	killall udhcpc 2>/dev/null
	for n in /sys/class/net/*; do
		[ "${n##*/}" = lo ] && continue
		ip addr flush dev "${n##*/}"
		ip link set "${n##*/}" down
	done
	# Ignition's log into the journal (it reads the kernel ring buffer), as Flatcar's shows it.
	while IFS= read -r line; do echo "ignition: $line" >/dev/kmsg; done </run/ignition.log
fi
for d in proc sys dev run var boot oem home root opt media mnt srv; do mkdir -p "/sysroot/$d"; done
mkdir -p /sysroot/tmp && chmod 1777 /sysroot/tmp
chmod 0700 /sysroot/root
for m in dev proc sys run; do mount --move "/$m" "/sysroot/$m"; done
exec switch_root /sysroot /usr/lib/systemd/systemd
`

// udhcpcScript applies busybox udhcpc's lease: address, default route, DNS (for Ignition's fetches).
const udhcpcScript = `#!/bin/busybox sh
case "$1" in
bound | renew)
	ip addr flush dev "$interface"
	ip addr add "$ip/${mask:-24}" dev "$interface"
	for r in $router; do ip route add default via "$r" dev "$interface" && break; done
	: >/etc/resolv.conf
	for d in $dns; do echo "nameserver $d" >>/etc/resolv.conf; done
	;;
deconfig) ip addr flush dev "$interface" ;;
esac
`

// makeInitramfs packs busybox, Ignition (static), the modules (in load order) and /init.
func makeInitramfs(k kernelInfo, ignitionPath string) ([]byte, error) {
	busybox, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return nil, fmt.Errorf("reading /bin/busybox (install busybox-static): %w", err)
	}
	ignition, err := os.ReadFile(ignitionPath)
	if err != nil {
		return nil, err
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
	c.Add("bin/ignition", 0o100755, 0, 0, ignition)
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
	c.Add("etc/udhcpc.script", 0o100755, 0, 0, []byte(udhcpcScript))
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
