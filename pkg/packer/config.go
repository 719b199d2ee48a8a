// Package packer runs the Packer QEMU build of `flatcar-capo build`: it materialises the
// template and provisioning scripts embedded from the top-level packer/ folder into a private
// build directory, renders the template for the packer version at hand (Debian's 1.6.6 with its
// built-in QEMU builder, or >= 1.10 with the QEMU plugin), and runs packer with its output
// condensed to the ui lines and the full log kept in <WorkDir>/packer.log.
package packer

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Config is one Packer build.
type Config struct {
	Packer, QEMUBinary, Accelerator string // "" = packer on PATH / qemu-system-x86_64 / auto (kvm if usable, else tcg)
	CPUs, MemoryMiB                 int    // 0 = 2 CPUs, 2048 MiB
	DiskSize                        int64  // bytes; 0 = skip_resize_disk (the disk keeps the base image's size)
	BaseImage                       string // absolute path of the raw base disk (a sparse copy made by the build)
	OutputDir, OutputName           string // OutputDir must not exist; raw image written as OutputDir/OutputName
	WorkDir                         string // private build dir (made 0700): template, scripts, packer.log, serial.log
	SSHUser, SSHPrivateKeyFile      string
	IgnitionFile                    string            // qemu base: passed with -fw_cfg opt/org.flatcar-linux/config
	ConfigDriveFile                 string            // openstack base: config-2 drive attached as an extra disk
	Payload                         string            // directory handed to the guest: bin/{kubeadm,kubelet,kubectl} crictl.tar.gz cni-plugins.tgz versions.env [SHA256SUMS]
	Vars                            map[string]string // environment for the provisioning scripts (KUBERNETES_VERSION, KEEP_UPDATES, ...)
	UserScripts                     []string          // --provision FILEs, run after ours
	Log                             io.Writer         // condensed ui lines

	SSHTimeout time.Duration // 0 = 20 min (QEMU TCG on a busy machine is slow)
	Driver     Driver        // nil = ExecDriver on Packer
	Tools      *Tools        // what Probe found; nil = probe (packer version, plugin, QEMU, accelerator)
}

// Result is a finished build.
type Result struct {
	Image, LogFile, PackerVersion, Accelerator string
}

// guestPayloadDir is where the payload lands in the guest; sysprep removes it.
const guestPayloadDir = "/tmp/flatcar-capo/payload"

// PayloadFiles are the files a payload directory must hold.
var PayloadFiles = []string{"bin/kubeadm", "bin/kubelet", "bin/kubectl", "crictl.tar.gz", "cni-plugins.tgz", "versions.env"}

var varName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// check validates cfg and returns a copy with defaults filled in and every path absolute and
// clean. Nothing is created or booted.
func (cfg Config) check() (Config, error) {
	cfg.CPUs, cfg.MemoryMiB = cmp.Or(cfg.CPUs, 2), cmp.Or(cfg.MemoryMiB, 2048)
	cfg.SSHTimeout = cmp.Or(cfg.SSHTimeout, 20*time.Minute)
	if cfg.CPUs < 1 || cfg.MemoryMiB < 256 {
		return cfg, fmt.Errorf("packer build: %d CPUs and %d MiB of memory are too little (at least 1 CPU and 256 MiB)", cfg.CPUs, cfg.MemoryMiB)
	}
	if cfg.DiskSize < 0 || cfg.DiskSize%(1<<20) != 0 {
		return cfg, fmt.Errorf("packer build: disk size %d is not a positive whole number of MiB", cfg.DiskSize)
	}
	if cfg.OutputName == "" || strings.ContainsAny(cfg.OutputName, `/\`) {
		return cfg, fmt.Errorf("packer build: output name %q must be a plain file name", cfg.OutputName)
	}
	if cfg.SSHUser == "" || cfg.SSHUser == "root" || !regexp.MustCompile(`^[a-z_][a-z0-9_-]*$`).MatchString(cfg.SSHUser) {
		return cfg, fmt.Errorf("packer build: SSH user %q must be a plain non-root user name (sysprep removes it)", cfg.SSHUser)
	}
	if (cfg.IgnitionFile == "") == (cfg.ConfigDriveFile == "") {
		return cfg, fmt.Errorf("packer build: exactly one of an Ignition file (qemu base) and a config drive (openstack base) is needed")
	}
	var err error
	paths := []struct {
		p    *string
		what string
		must bool // must exist
	}{
		{&cfg.BaseImage, "base image", true},
		{&cfg.OutputDir, "output directory", false},
		{&cfg.WorkDir, "build directory", false},
		{&cfg.SSHPrivateKeyFile, "SSH private key", true},
		{&cfg.IgnitionFile, "Ignition config", true},
		{&cfg.ConfigDriveFile, "config drive", true},
		{&cfg.Payload, "Kubernetes payload directory", true},
	}
	for _, p := range paths {
		if *p.p == "" {
			if p.p == &cfg.IgnitionFile || p.p == &cfg.ConfigDriveFile {
				continue
			}
			return cfg, fmt.Errorf("packer build: no %s given", p.what)
		}
		if *p.p, err = cleanPath(*p.p, p.what); err != nil {
			return cfg, err
		}
		if p.must {
			if _, err := os.Stat(*p.p); err != nil {
				return cfg, fmt.Errorf("packer build: %s: %w", p.what, err)
			}
		}
	}
	for i, s := range cfg.UserScripts {
		if cfg.UserScripts[i], err = cleanPath(s, "--provision script"); err != nil {
			return cfg, err
		}
		if st, err := os.Stat(cfg.UserScripts[i]); err != nil || !st.Mode().IsRegular() {
			return cfg, fmt.Errorf("packer build: --provision %s is not a readable file", s)
		}
	}
	if _, err := os.Lstat(cfg.OutputDir); err == nil {
		return cfg, fmt.Errorf("packer build: output directory %s already exists; packer writes a new one (remove it or choose another)", cfg.OutputDir)
	}
	for _, f := range PayloadFiles {
		if st, err := os.Stat(filepath.Join(cfg.Payload, f)); err != nil || !st.Mode().IsRegular() {
			return cfg, fmt.Errorf("packer build: payload %s lacks %s (a payload holds %s)", cfg.Payload, f, strings.Join(PayloadFiles, ", "))
		}
	}
	for k, v := range cfg.Vars {
		if !varName.MatchString(k) {
			return cfg, fmt.Errorf("packer build: %q is not a valid environment variable name", k)
		}
		if strings.ContainsAny(v, "\n\r\x00") {
			return cfg, fmt.Errorf("packer build: the value of %s has a line break", k)
		}
	}
	return cfg, nil
}

// cleanPath makes p absolute and clean, and refuses characters the rendered template or QEMU's
// option syntax cannot carry.
func cleanPath(p, what string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("packer build: %s %s: %w", what, p, err)
	}
	if strings.ContainsAny(abs, "\n\r\x00\"'") {
		return "", fmt.Errorf("packer build: %s path %q has quotes or control characters; use another path", what, p)
	}
	return abs, nil // Abs cleans it
}
