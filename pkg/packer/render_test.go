package packer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

func TestRenderPerPackerVersion(t *testing.T) {
	testutil.RequireTool(t, "ssh-keygen")
	cfg, err := fixture(t).check()
	if err != nil {
		t.Fatal(err)
	}
	old, err := render(cfg, version{1, 6, 6, ""}, "tcg", "/usr/bin/qemu-system-x86_64")
	if err != nil {
		t.Fatal(err)
	}
	cfg.DiskSize = 12 << 30
	cfg.IgnitionFile, cfg.ConfigDriveFile = "", cfg.IgnitionFile // stands in for a config drive
	cfg.UserScripts = []string{cfg.SSHPrivateKeyFile + ".pub"}
	cur, err := render(cfg, version{1, 12, 0, ""}, "kvm", "/usr/bin/qemu-system-x86_64")
	if err != nil {
		t.Fatal(err)
	}
	mustContain := func(name, text string, frags ...string) {
		t.Helper()
		for _, f := range frags {
			if !strings.Contains(text, f) {
				t.Errorf("%s template lacks %q:\n%s", name, f, text)
			}
		}
	}
	mustLack := func(name, text string, frags ...string) {
		t.Helper()
		for _, f := range frags {
			if strings.Contains(text, f) {
				t.Errorf("%s template has %q:\n%s", name, f, text)
			}
		}
	}
	common := []string{
		`format           = "raw"`, `disable_vnc       = true`, `http_bind_address = "127.0.0.1"`,
		`["-vnc", "none"]`, `hostfwd=tcp:127.0.0.1:{{ .SSHHostPort }}-:22`, `["-device", "virtio-net,netdev=user.0"]`,
		`file=` + filepath.Join(cfg.OutputDir, "flatcar.img") + `,if=virtio`,
		`"KUBERNETES_VERSION=v1.33.4"`, `"BUILD_USER=builder"`, `"PAYLOAD_DIR=` + guestPayloadDir + `"`, `"NODE_BIN_DIR=/opt/bin"`, `"NODE_UPDATE_UNITS=update-engine.service locksmithd.service"`,
		filepath.Join(cfg.WorkDir, "scripts", "sysprep.sh"), `shutdown_command     = "sudo -n sh /run/flatcar-capo-shutdown.sh"`,
		`source      = "` + cfg.Payload + `/"`,
	}
	mustContain("1.6.6", old, append(common, `skip_resize_disk = true`, `accelerator = "tcg"`,
		`"-fw_cfg", "name=opt/org.flatcar-linux/config,file=`+cfg.ConfigDriveFile+`"`)...)
	mustLack("1.6.6", old, "required_plugins", "disk_size", "--provision", ".pub")
	mustContain("1.12.0", cur, append(common, `required_plugins`, `source  = "github.com/hashicorp/qemu"`,
		`disk_size        = "12288M"`, `accelerator = "kvm"`, `file=`+cfg.ConfigDriveFile+`,if=virtio,format=raw,readonly=on`,
		cfg.SSHPrivateKeyFile+".pub")...)
	mustLack("1.12.0", cur, "skip_resize_disk", "fw_cfg")
}

func TestHCLString(t *testing.T) {
	for in, want := range map[string]string{
		`/a/b`:          `"/a/b"`,
		`say "hi"\now`:  `"say \"hi\"\\now"`,
		"${HOME} %{x}":  `"$${HOME} %%{x}"`,
		"$HOME 100%":    `"$HOME 100%"`,
		"line\nnext\t.": `"line\nnext\t."`,
	} {
		if got := hclString(in); got != want {
			t.Errorf("hclString(%q) = %s, want %s", in, got, want)
		}
	}
}

// packer112 finds the packer 1.12 that scripts/install-packer.sh builds (FLATCAR_CAPO_PACKER_112
// overrides); install-deps.sh runs that script for the test profile.
func packer112(t *testing.T) string {
	t.Helper()
	p := os.Getenv("FLATCAR_CAPO_PACKER_112")
	if p == "" {
		p = testutil.CachedPacker112()
	}
	_, err := os.Stat(p)
	testutil.RequireEnv(t, err, "packer 1.12 with the QEMU plugin (run scripts/install-packer.sh)")
	return p
}

// The rendered template passes `packer validate` under both packers: Debian's 1.6.6 and 1.12 with
// the QEMU plugin.
func TestTemplateValidatesWithRealPackers(t *testing.T) {
	testutil.RequireTools(t, "packer", "ssh-keygen", "qemu-system-x86_64", "qemu-img")
	for _, c := range []struct {
		name   string
		packer func(*testing.T) string
		major  string
	}{
		{"debian-1.6", func(*testing.T) string { return "" }, "1.6."},
		{"1.12-plugin", packer112, "1.12."},
	} {
		t.Run(c.name, func(t *testing.T) {
			packer := c.packer(t)
			for _, disk := range []int64{0, 1 << 30} {
				cfg := fixture(t)
				cfg.Packer, cfg.DiskSize = packer, disk
				cfg.UserScripts = []string{cfg.SSHPrivateKeyFile + ".pub"}
				pi, err := validate(context.Background(), cfg)
				if err != nil {
					t.Fatalf("packer validate: %v\ntemplate:\n%s", err, pi.Template)
				}
				if !strings.HasPrefix(pi.PackerVersion, c.major) {
					t.Fatalf("%s is packer %s, want %sx", pi.Packer, pi.PackerVersion, c.major)
				}
				if _, err := os.Stat(filepath.Join(cfg.OutputDir)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("validate created the output directory: %v", err)
				}
			}
		})
	}
}
