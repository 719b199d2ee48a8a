// Package packer holds the Packer template and the provisioning scripts that run in the build
// VM. They are plain files in the repository (reviewable, runnable by hand) and embedded here,
// so the flatcar-capo binary carries them; pkg/packer (which imports this as packerfiles)
// materialises and renders them.
package packer

import "embed"

// FS holds flatcar-capo.pkr.hcl.tmpl and scripts/*.sh.
//
//go:embed flatcar-capo.pkr.hcl.tmpl scripts/*.sh
var FS embed.FS

// Template is the name of the Go text/template that renders the HCL2 Packer template.
const Template = "flatcar-capo.pkr.hcl.tmpl"

// Scripts are the provisioning scripts, in the order the template runs them around the user's
// own scripts: Setup before, Sysprep after.
var (
	Setup   = []string{"scripts/install-containerd-sysext.sh", "scripts/install-kubernetes.sh", "scripts/configure-containerd.sh", "scripts/install-images.sh"}
	Sysprep = "scripts/sysprep.sh"
)
