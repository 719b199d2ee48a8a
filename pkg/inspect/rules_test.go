package inspect

import (
	"reflect"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/oem"
)

// readyReport is a qemu release image retargeted to openstack with `oem set`: grub.cfg says
// openstack, oem-release and the sysext stay qemu's.
func readyReport() *Report {
	r := newReport("flatcar.img")
	yes := true
	r.OEM = oem.State{Partition: 6, Filesystem: "btrfs", GrubCfg: true,
		Settings: oem.Settings{OEMID: "openstack"}, OEMReleaseID: "qemu"}
	r.SysextDir = true
	r.Sysext = []SysextEntry{{Name: "oem-qemu-4459.2.0.raw", Size: 65536}}
	r.Markers = []string{"active-oem-qemu"}
	r.MBR = disk.MBRInfo{Kind: disk.MBRProtective, Types: []string{"ee"}}
	r.FirstBoot = &yes
	r.Target = "openstack"
	return r
}

type finding struct{ level, code string }

// One case per finding code (docs/inspect-json.md), each with the verdict it must give and
// words its message must carry (the problem and the fix).
func TestVerdictRules(t *testing.T) {
	no := false
	cases := []struct {
		name    string
		edit    func(r *Report)
		verdict string
		want    []finding
		words   []string
	}{
		{"retargeted qemu image", func(r *Report) {}, Ready,
			[]finding{{levelInfo, "oem-release-differs"}}, []string{"harmless"}},
		{"own platform", func(r *Report) { r.OEM.Settings.OEMID, r.Target = "qemu", "qemu" }, Ready, nil, nil},
		{"esp-unreadable", func(r *Report) {
			r.OEM.Settings.OEMID, r.Target, r.FirstBoot = "qemu", "qemu", nil
			r.ESPError = "partition 1 (EFI-SYSTEM): no readable FAT filesystem"
		}, warning, []finding{{levelWarning, "esp-unreadable"}}, []string{"partition 1 (EFI-SYSTEM)", "release image"}},
		{"oem-id-missing", func(r *Report) { r.OEM.Settings.OEMID = "" }, NotReady,
			[]finding{{levelError, "oem-id-missing"}, {levelInfo, "oem-release-differs"}}, []string{"flatcar-capo oem set flatcar.img --id openstack"}},
		{"oem-id-mismatch", func(r *Report) { r.OEM.Settings.OEMID = "qemu" }, NotReady,
			[]finding{{levelError, "oem-id-mismatch"}}, []string{`"qemu"`, "--id openstack"}},
		{"config-ign-leftover", func(r *Report) { r.ConfigIgn = true }, NotReady,
			[]finding{{levelError, "config-ign-leftover"}, {levelInfo, "oem-release-differs"}}, []string{"/oem/config.ign", "user-data"}},
		{"oem-sysext-missing: oem-release changed", func(r *Report) {
			r.OEM.OEMReleaseID = "openstack"
		}, NotReady, []finding{{levelError, "oem-sysext-missing"}, {levelWarning, "sysext-differs"}},
			[]string{"ID=openstack", "/oem/sysext/oem-openstack-<version>.raw is missing", "without internet", "grub.cfg only"}},
		{"oem-sysext-missing: marker added", func(r *Report) {
			r.Markers = append(r.Markers, "active-oem-openstack")
		}, NotReady, []finding{{levelError, "oem-sysext-missing"}, {levelInfo, "oem-release-differs"}},
			[]string{"active-oem-openstack exists", "oem-openstack-<version>.raw is missing"}},
		{"oem-sysext-missing: sysext deleted", func(r *Report) { r.Sysext = []SysextEntry{} }, NotReady,
			[]finding{{levelError, "oem-sysext-missing"}, {levelInfo, "oem-release-differs"}},
			[]string{"ID=qemu", "oem-qemu-<version>.raw is missing"}},
		{"oem-sysext-missing: a directory is not the sysext", func(r *Report) {
			r.Sysext = []SysextEntry{{Name: "oem-qemu-1.raw", IsDir: true}}
		}, NotReady, []finding{{levelError, "oem-sysext-missing"}, {levelInfo, "oem-release-differs"}}, nil},
		{"before OEM sysexts: no /oem/sysext", func(r *Report) {
			r.SysextDir, r.Sysext, r.Markers = false, []SysextEntry{}, []string{}
		}, Ready, []finding{{levelInfo, "oem-release-differs"}}, nil},
		{"first-boot-missing", func(r *Report) { r.FirstBoot = &no }, warning,
			[]finding{{levelWarning, "first-boot-missing"}, {levelInfo, "oem-release-differs"}}, []string{"/flatcar/first_boot", "Ignition will not run"}},
		{"ESP unreadable: no first-boot judgement", func(r *Report) { r.FirstBoot = nil }, Ready,
			[]finding{{levelInfo, "oem-release-differs"}}, nil},
		{"autologin", func(r *Report) { r.OEM.Settings.LinuxAppend = "quiet flatcar.autologin" }, warning,
			[]finding{{levelWarning, "autologin"}, {levelInfo, "oem-release-differs"}}, []string{"root shell", "oem set"}},
		{"autologin prefix is not autologin", func(r *Report) { r.OEM.Settings.LinuxAppend = "flatcar.autologin=tty1x" }, Ready,
			[]finding{{levelInfo, "oem-release-differs"}}, nil},
		{"hybrid-mbr", func(r *Report) { r.MBR = disk.MBRInfo{Kind: disk.MBRHybrid, Types: []string{"ee", "ef"}} }, warning,
			[]finding{{levelWarning, "hybrid-mbr"}, {levelInfo, "oem-release-differs"}}, []string{"2091114", "--protective-mbr"}},
		{"gpt-primary-damaged", func(r *Report) { r.GPTPrimary = "no GPT partition table: no 'EFI PART' signature at LBA 1" }, warning,
			[]finding{{levelWarning, "gpt-primary-damaged"}, {levelInfo, "oem-release-differs"}}, []string{"backup header", "EFI PART", "gdisk"}},
		{"oem-release-differs: another platform's sysext", func(r *Report) {
			r.OEM.OEMReleaseID, r.Markers = "azure", []string{"active-oem-azure"}
			r.Sysext = []SysextEntry{{Name: "oem-azure-4459.2.0.raw"}}
		}, warning, []finding{{levelWarning, "oem-release-differs"}}, []string{"azure's agents"}},
		{"sysext-differs", func(r *Report) {
			r.Markers = append(r.Markers, "active-oem-azure")
			r.Sysext = append(r.Sysext, SysextEntry{Name: "oem-azure-4459.2.0.raw"})
		}, warning, []finding{{levelInfo, "oem-release-differs"}, {levelWarning, "sysext-differs"}}, []string{"active-oem-azure"}},
		{"sysext-link-dangling", func(r *Report) {
			r.Extensions.Links = []ExtensionLink{{Path: "/etc/extensions/kubernetes.raw", Checked: true, problem: "sysext-link-dangling",
				Reason: "the link /etc/extensions/kubernetes.raw -> /opt/extensions/kubernetes/k.raw dangles"}}
		}, NotReady, []finding{{levelInfo, "oem-release-differs"}, {levelError, "sysext-link-dangling"}}, []string{"dangles", "build --method sysext"}},
		{"sysext-name-mismatch", func(r *Report) {
			r.Extensions.Links = []ExtensionLink{{Path: "/etc/extensions/k8s.raw", Checked: true, problem: "sysext-name-mismatch",
				Reason: "linked as k8s.raw it needs usr/lib/extension-release.d/extension-release.k8s"}}
		}, NotReady, []finding{{levelInfo, "oem-release-differs"}, {levelError, "sysext-name-mismatch"}}, []string{"extension-release.k8s"}},
		{"sysext-incompatible", func(r *Report) {
			r.Extensions.Host.Source = "/usr/lib/os-release on USR-A (ext4)"
			r.Extensions.Links = []ExtensionLink{{Path: "/etc/extensions/kubernetes.raw", Checked: true, problem: "sysext-incompatible",
				Reason: "SYSEXT_LEVEL=2.0, but the host has SYSEXT_LEVEL=1.0"}}
		}, NotReady, []finding{{levelInfo, "oem-release-differs"}, {levelError, "sysext-incompatible"}}, []string{"SYSEXT_LEVEL=2.0", "USR-A"}},
		{"images-missing", func(r *Report) {
			r.Containerd.Kubernetes = "v1.33.4"
			r.Containerd.Kubeadm = []string{"registry.k8s.io/pause:3.10", "registry.k8s.io/etcd:3.5.21-0"}
			r.Containerd.Missing = []string{"registry.k8s.io/etcd:3.5.21-0"}
		}, warning, []finding{{levelInfo, "oem-release-differs"}, {levelWarning, "images-missing"}}, []string{"v1.33.4", "registry.k8s.io/etcd:3.5.21-0", "--no-preload-images"}},
		{"sysext merges: no finding", func(r *Report) {
			r.Extensions.Links = []ExtensionLink{{Path: "/etc/extensions/kubernetes.raw", Checked: true, WouldMerge: true}}
		}, Ready, []finding{{levelInfo, "oem-release-differs"}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := readyReport()
			c.edit(r)
			r.judge()
			var got []finding
			for _, f := range r.Findings {
				got = append(got, finding{f.Level, f.Code})
			}
			if r.Verdict != c.verdict || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("verdict %s, findings %v; want %s, %v\n%+v", r.Verdict, got, c.verdict, c.want, r.Findings)
			}
			msgs := ""
			for _, f := range r.Findings {
				msgs += f.Message + "\n"
			}
			for _, w := range c.words {
				if !strings.Contains(msgs, w) {
					t.Errorf("messages lack %q:\n%s", w, msgs)
				}
			}
		})
	}
}

// Judging twice gives the same findings (rules never accumulate across runs).
func TestJudgeIsRepeatable(t *testing.T) {
	r := readyReport()
	r.ConfigIgn = true
	r.judge()
	first := append([]Finding{}, r.Findings...)
	r.judge()
	if !reflect.DeepEqual(first, r.Findings) {
		t.Fatalf("second judge: %+v, first %+v", r.Findings, first)
	}
}
