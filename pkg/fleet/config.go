// Package fleet is flatcar-capo's view of many images at once: which (channel, Kubernetes
// version, method) slots each cloud's Glance is missing (plan), and which older images of a slot
// can go (prune). It schedules nothing itself: plan's JSON is a CI matrix, and each row is one
// ordinary `flatcar-capo build`.
package fleet

import (
	"bytes"
	"cmp"
	"errors"
	"io"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/infile"
	"github.com/flatcar-capo/flatcar-capo/pkg/release"
)

// methods a build can use; the names of `build --method`.
var methods = []string{"packer", "sysext"}

// Config is what fleet.yaml holds, and what plan's and prune's flags set.
type Config struct {
	Channels           []string `json:"channels" yaml:"channels"`
	KubernetesVersions []string `json:"kubernetesVersions" yaml:"kubernetesVersions"` // exact (v1.35.2), minor (1.35) or stable
	Methods            []string `json:"methods" yaml:"methods"`
	Clouds             []string `json:"clouds" yaml:"clouds"` // clouds.yaml names
	Arch               string   `json:"arch,omitempty" yaml:"arch,omitempty"`
	ReleaseServer      string   `json:"releaseServer,omitempty" yaml:"releaseServer,omitempty"`
	KubernetesMirror   string   `json:"kubernetesMirror,omitempty" yaml:"kubernetesMirror,omitempty"`
	// Properties (KEY=VALUE) and BuildArgs (extra `build` flags) are passed to every build that
	// `plan --build` runs, so a CI job's build line stays the plan's row and nothing else.
	Properties []string `json:"properties,omitempty" yaml:"properties,omitempty"`
	BuildArgs  []string `json:"buildArgs,omitempty" yaml:"buildArgs,omitempty"`
	OutputDir  string   `json:"outputDir,omitempty" yaml:"outputDir,omitempty"`
	Keep       int      `json:"keep,omitempty" yaml:"keep,omitempty"` // prune: images kept per slot and cloud
}

// LoadConfig reads a fleet file strictly: a misspelt key is an error, not a silent default.
func LoadConfig(path string) (Config, error) {
	var c Config
	b, err := infile.ReadFile("--config", path, infile.Config)
	if err != nil {
		return c, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) { // EOF: an empty file
		// One line: yaml.v3's "unmarshal errors:" list ("line N: field x not found in type ...") joined.
		msg := err.Error()
		var te *yaml.TypeError
		if errors.As(err, &te) {
			msg = strings.Join(te.Errors, "; ")
		}
		return c, errs.Invalidf("%s: %s (keys: channels, kubernetesVersions, methods, clouds, arch, releaseServer, kubernetesMirror, properties, buildArgs, outputDir, keep)", path, msg)
	}
	// keep: 0 decodes as "not given" (the default, 1): a file that says 0 must hear it is refused,
	// as --keep 0 is, not have the newest image kept silently.
	var given struct {
		Keep *int `yaml:"keep"`
	}
	if err := yaml.Unmarshal(b, &given); err == nil && given.Keep != nil && *given.Keep < 1 {
		return c, errs.Invalidf("%s: keep: %d: prune keeps at least the newest image of each slot, so keep must be 1 or more; to remove a slot's last image, delete it by ID (openstack image delete ID)", path, *given.Keep)
	}
	return c, nil
}

// Merge lays flag values over the file's: a flag the user gave wins, list by list.
func (c Config) Merge(flags Config) Config {
	pick := func(f, file []string) []string {
		if len(f) > 0 {
			return f
		}
		return file
	}
	c.Channels = pick(flags.Channels, c.Channels)
	c.KubernetesVersions = pick(flags.KubernetesVersions, c.KubernetesVersions)
	c.Methods = pick(flags.Methods, c.Methods)
	c.Clouds = pick(flags.Clouds, c.Clouds)
	c.Properties = pick(flags.Properties, c.Properties)
	c.BuildArgs = pick(flags.BuildArgs, c.BuildArgs)
	c.Arch = cmp.Or(flags.Arch, c.Arch)
	c.ReleaseServer = cmp.Or(flags.ReleaseServer, c.ReleaseServer)
	c.KubernetesMirror = cmp.Or(flags.KubernetesMirror, c.KubernetesMirror)
	c.OutputDir = cmp.Or(flags.OutputDir, c.OutputDir)
	c.Keep = cmp.Or(flags.Keep, c.Keep)
	return c
}

// Validate fills defaults and checks every value before any network call, naming the bad one.
func (c *Config) Validate() error {
	bad := errs.Invalidf
	c.Channels = splitAll(c.Channels)
	c.KubernetesVersions = splitAll(c.KubernetesVersions)
	c.Methods = splitAll(c.Methods)
	c.Clouds = splitAll(c.Clouds)
	if len(c.Channels) == 0 {
		c.Channels = []string{"stable"}
	}
	if len(c.Methods) == 0 {
		c.Methods = []string{"sysext"}
	}
	if len(c.KubernetesVersions) == 0 {
		return bad("no Kubernetes version: give --kubernetes-version (or kubernetesVersions in the config), e.g. v1.35.2")
	}
	c.Arch = cmp.Or(c.Arch, "amd64")
	c.ReleaseServer = cmp.Or(c.ReleaseServer, release.DefaultServer)
	for _, ch := range c.Channels {
		if err := release.ValidateChannel(ch); err != nil {
			return bad("%v", err)
		}
	}
	for _, m := range c.Methods {
		if !slices.Contains(methods, m) {
			return bad("unknown method %q: must be %s", m, strings.Join(methods, " or "))
		}
	}
	if err := release.ValidateArch(c.Arch); err != nil {
		return bad("%v", err)
	}
	if c.Keep < 0 {
		return bad("keep must be 1 or more, not %d", c.Keep)
	}
	return nil
}

// ValidateClouds is Validate for the commands that ask Glance (plan, prune): at least one cloud.
func (c *Config) ValidateClouds() error {
	if err := c.Validate(); err != nil {
		return err
	}
	if len(c.Clouds) == 0 {
		return errs.Invalidf("no cloud: give --cloud (or clouds in the config): the images are looked up in each cloud's Glance")
	}
	return nil
}

// splitAll accepts both repeated flags and comma lists (--channel stable,beta).
func splitAll(vs []string) []string {
	var out []string
	for _, v := range vs {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" && !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}
