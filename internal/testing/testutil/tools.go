package testutil

// tools is every external program a test may require (RequireTool refuses any other), with the
// scripts/install-deps.sh profile whose package list must install it. TestInstallDepsInstallsEveryTool
// checks each against `dpkg -S`, so a tool a new test needs cannot be missing from a fresh machine
// unnoticed (runc once was: it only came with podman on the machine CI ran on).
var tools = map[string]string{
	"bash": "test", "blkid": "test", "btrfs": "test", "busybox": "test", "bzip2": "test",
	"chattr": "test", "chroot": "test", "cp": "test", "debugfs": "test", "docker-registry": "test",
	"dpkg": "test", "dumpe2fs": "test", "e2fsck": "test", "glance-api": "test", "glance-manage": "test",
	"grub-fstest": "test", "grub-mkimage": "test", "keystone-manage": "test", "lbzip2": "test",
	"losetup": "test", "mcopy": "test", "mkfs.btrfs": "test", "mkfs.ext4": "test", "mkfs.vfat": "test",
	"mksquashfs": "test", "mmdebstrap": "test", "mount": "test", "openstack": "test", "packer": "test",
	"prlimit": "test", "qemu-img": "test", "qemu-io": "test", "qemu-system-x86_64": "test",
	"resize2fs": "test", "runc": "test", "setpriv": "test", "sgdisk": "test", "sha256sum": "test",
	"ssh-keygen": "test", "timeout": "test", "umount": "test", "unsquashfs": "test", "uwsgi": "test",
	"xorriso": "test", "barbican-wsgi-api": "test", "gdisk": "test", "fdisk": "test", "modprobe": "test",
	// Required by tests on other branches (sbom, signed sysupdate, fleet examples) that merge next.
	"curl": "test", "envsubst": "test", "gpg": "test", "gpgconf": "test", "python3": "test",
	// make test-image and make bench install these; make test does not run their tests.
	"podman": "image", "skopeo": "bench",
	// make capo-proof (scripts/install-openstack-compute.sh, install-deps.sh capo-proof): internal/testing/novatest.
	"nova-api": "capo-proof", "nova-conductor": "capo-proof", "nova-scheduler": "capo-proof",
	"nova-compute": "capo-proof", "nova-manage": "capo-proof", "placement-manage": "capo-proof",
	"neutron-server": "capo-proof", "neutron-linuxbridge-agent": "capo-proof", "neutron-dhcp-agent": "capo-proof",
	"neutron-l3-agent": "capo-proof", "neutron-metadata-agent": "capo-proof", "neutron-db-manage": "capo-proof",
	"libvirtd": "capo-proof", "virtlogd": "capo-proof", "rabbitmq-server": "capo-proof", "genisoimage": "capo-proof",
	"haproxy": "capo-proof", "dnsmasq": "capo-proof", "ip": "capo-proof", "unshare": "capo-proof",
	"mariadbd": "capo-proof", "mariadb-install-db": "capo-proof", "mariadb": "capo-proof",
	// TestStrictModeFailsSkips' tool that no machine has.
	"flatcar-capo-no-such-tool": "",
}
