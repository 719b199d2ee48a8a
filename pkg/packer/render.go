package packer

import (
	"bytes"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"text/template"

	packerfiles "github.com/flatcar-capo/flatcar-capo/packer"
	"github.com/flatcar-capo/flatcar-capo/pkg/node"
)

// templateFile is the rendered template's name in the build directory.
const templateFile = "flatcar-capo.pkr.hcl"

// templateData is what packer/flatcar-capo.pkr.hcl.tmpl sees.
type templateData struct {
	PackerVersion                    string
	RequiredPlugins                  bool
	BaseImage, OutputDir, OutputName string
	QEMUBinary, Accelerator          string
	CPUs, MemoryMiB                  int
	DiskSize                         string // "" = skip_resize_disk
	SSHUser, SSHPrivateKeyFile       string
	SSHTimeout, ShutdownTimeout      string
	QEMUArgs                         [][]string
	PayloadSource, GuestPayload      string
	SetupScripts, UserScripts, Env   []string
	SysprepScript                    string
}

// scriptEnv is the environment of the provisioning scripts: where things go on the node
// (pkg/node), the caller's Vars, where the payload is and whom sysprep removes.
func scriptEnv(cfg Config) []string {
	env := node.Env()
	maps.Copy(env, cfg.Vars)
	env["PAYLOAD_DIR"] = guestPayloadDir
	env["BUILD_USER"] = cfg.SSHUser
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// qemuArgs are the QEMU options the template adds. They replace packer's own -netdev (its SSH
// forward listens on every interface), -drive and -device (one replaced, all replaced), and -vnc
// (1.6.6 ignores disable_vnc).
func qemuArgs(cfg Config) [][]string {
	disk := filepath.Join(cfg.OutputDir, cfg.OutputName)
	args := [][]string{
		{"-netdev", "user,id=user.0,hostfwd=tcp:127.0.0.1:{{ .SSHHostPort }}-:22"},
		{"-device", "virtio-net,netdev=user.0"},
		{"-drive", "file=" + qemuEscape(disk) + ",if=virtio,cache=writeback,discard=unmap,detect-zeroes=unmap,format=raw"},
	}
	if cfg.ConfigDriveFile != "" {
		args = append(args, []string{"-drive", "file=" + qemuEscape(cfg.ConfigDriveFile) + ",if=virtio,format=raw,readonly=on"})
	}
	if cfg.IgnitionFile != "" {
		args = append(args, []string{"-fw_cfg", "name=opt/org.flatcar-linux/config,file=" + qemuEscape(cfg.IgnitionFile)})
	}
	args = append(args,
		[]string{"-vnc", "none"},
		[]string{"-serial", "file:" + filepath.Join(cfg.WorkDir, "serial.log")},
	)
	return args
}

// qemuEscape doubles commas, QEMU's escape inside an option value.
func qemuEscape(s string) string { return strings.ReplaceAll(s, ",", ",,") }

// render produces the HCL2 template for packer version v. cfg must be checked, WorkDir the
// directory the scripts are materialised in.
func render(cfg Config, v version, accel, qemu string) (string, error) {
	t, err := template.New(packerfiles.Template).Funcs(template.FuncMap{"hcl": hclString, "hclList": hclList}).
		ParseFS(packerfiles.FS, packerfiles.Template)
	if err != nil {
		return "", fmt.Errorf("packer template: %w", err)
	}
	script := func(name string) string { return filepath.Join(cfg.WorkDir, filepath.FromSlash(name)) }
	d := templateData{
		PackerVersion:     v.String(),
		RequiredPlugins:   v.NeedsQEMUPlugin(),
		BaseImage:         cfg.BaseImage,
		OutputDir:         cfg.OutputDir,
		OutputName:        cfg.OutputName,
		QEMUBinary:        qemu,
		Accelerator:       accel,
		CPUs:              cfg.CPUs,
		MemoryMiB:         cfg.MemoryMiB,
		SSHUser:           cfg.SSHUser,
		SSHPrivateKeyFile: cfg.SSHPrivateKeyFile,
		SSHTimeout:        cfg.SSHTimeout.String(),
		ShutdownTimeout:   "10m0s",
		QEMUArgs:          qemuArgs(cfg),
		PayloadSource:     cfg.Payload + "/", // trailing slash: the directory's contents
		GuestPayload:      guestPayloadDir,
		UserScripts:       cfg.UserScripts,
		Env:               scriptEnv(cfg),
		SysprepScript:     script(packerfiles.Sysprep),
	}
	if cfg.DiskSize > 0 {
		d.DiskSize = fmt.Sprintf("%dM", cfg.DiskSize>>20)
	}
	for _, s := range packerfiles.Setup {
		d.SetupScripts = append(d.SetupScripts, script(s))
	}
	var b bytes.Buffer
	if err := t.Execute(&b, d); err != nil {
		return "", fmt.Errorf("packer template: %w", err)
	}
	return b.String(), nil
}

// hclString quotes s as an HCL string literal: JSON-style escapes, and the template sequences
// ${ and %{ doubled so they stay literal.
func hclString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\t':
			b.WriteString(`\t`)
		case (c == '$' || c == '%') && i+1 < len(s) && s[i+1] == '{':
			b.WriteByte(c)
			b.WriteByte(c)
		case c < 0x20:
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func hclList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = hclString(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
