package imagebuild

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/pkg/atomicfile"
	"github.com/flatcar-capo/flatcar-capo/pkg/digest"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
	"github.com/flatcar-capo/flatcar-capo/pkg/rootfs"
	"github.com/flatcar-capo/flatcar-capo/pkg/sysext"
)

// The sysext method: get the sysexts (made from the verified Kubernetes downloads, or --sysext
// FILE|URL, each checked as systemd-sysext would), then bake them into a fresh ROOT. No VM.
type sysextMethod struct{ noTools }

func (sysextMethod) Steps() []multistep.Step {
	return []multistep.Step{&stepSysext{}, &stepImages{}, &stepBakeRoot{}}
}

// Sysext is one sysext a build bakes into the image.
type Sysext struct {
	Name     string    `json:"name"`     // extension-release.<Name>, linked as /etc/extensions/<Name>.raw
	FileName string    `json:"fileName"` // stored as /opt/extensions/<Name>/<FileName>
	Source   string    `json:"source"`   // --sysext value, or "made from Kubernetes <v>"
	Path     string    `json:"-"`        // local file (in the work or output directory)
	SHA512   string    `json:"sha512"`
	Bytes    int64     `json:"bytes"`
	hashedAt time.Time // a --sysext's modification time when the build hashed it
}

// stepSysext makes the Kubernetes sysext from the sha256-verified release binaries, or takes the
// --sysext images (downloading URLs), checks each with sysext.Check (extension-release named
// like its link, no os-release, Flatcar would merge it, every file readable), and copies it
// next to the artifact so the record carries its sha512.
type stepSysext struct{}

func (*stepSysext) Name() string { return "sysext" }

func (*stepSysext) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	o := options(state)
	work := keyWorkDir.get(state)
	// The same inputs give the same image (a second runner's upload reuses the first's): the
	// sysext, the OEM edit and the ROOT bake all write the base image's own time, unless
	// SOURCE_DATE_EPOCH says another (Run read it).
	if keyEpoch.get(state).IsZero() {
		img, err := openWork(state)
		if err != nil {
			return halt(state, err)
		}
		t, err := rootfs.Epoch(img)
		if err != nil {
			return halt(state, err)
		}
		keyEpoch.put(state, t)
	}
	var exts []Sysext
	var err error
	if len(o.Sysext) == 0 {
		exts, err = makeKubernetesSysext(ctx, state, o, work)
	} else {
		exts, err = takeSysexts(o, keySysextFiles.get(state))
	}
	if err != nil {
		return halt(state, err)
	}
	if c, err := makeContainerdSysext(ctx, state, work); err != nil {
		return halt(state, err)
	} else if c != nil {
		for _, x := range exts {
			if x.Name == sysext.ContainerdName {
				return halt(state, errs.Invalidf("--sysext %s is a containerd sysext and --containerd-version makes one too; give one of them", x.Source))
			}
		}
		exts = append(exts, *c)
	}
	var notes []string
	for i := range exts {
		if err := keepNextToArtifact(ctx, o, &exts[i]); err != nil {
			return halt(state, err)
		}
		notes = append(notes, fmt.Sprintf("%s (%d MiB, sha512 %.12s…)", exts[i].FileName, exts[i].Bytes>>20, exts[i].SHA512))
	}
	keySysexts.put(state, exts)
	note(state, "%s", strings.Join(notes, ", "))
	return multistep.ActionContinue
}

// Cleanup removes the copies next to the artifact when the build did not finish.
func (*stepSysext) Cleanup(state multistep.StateBag) {
	_, halted := state.GetOk(multistep.StateHalted)
	_, cancelled := state.GetOk(multistep.StateCancelled)
	if !halted && !cancelled {
		return
	}
	for _, x := range keySysexts.get(state) {
		if filepath.Dir(x.Path) == filepath.Clean(options(state).OutputDir) {
			os.Remove(x.Path)
		}
	}
}

// makeKubernetesSysext builds the bakery-layout Kubernetes sysext from the verified downloads.
func makeKubernetesSysext(ctx context.Context, state multistep.StateBag, o *Options, work string) ([]Sysext, error) {
	set := keyK8s.get(state)
	if set == nil {
		return nil, fmt.Errorf("no verified Kubernetes downloads to make the sysext from")
	}
	name, err := sysext.KubernetesFileName(o.Kubernetes.Kubernetes, o.Release.Arch)
	if err != nil {
		return nil, err
	}
	out := filepath.Join(work, name)
	in := sysext.KubernetesInputFromSet(set)
	in.ModTime = buildTime(state)
	if _, err := sysext.CreateKubernetes(ctx, in, out); err != nil {
		return nil, fmt.Errorf("making the Kubernetes sysext: %w", err)
	}
	x := Sysext{Name: sysext.KubernetesName, FileName: name, Source: "made from Kubernetes " + o.Kubernetes.Kubernetes, Path: out}
	if _, err := sysext.Check(out, x.Name, sysext.FlatcarHost(o.Release.Arch)); err != nil {
		return nil, fmt.Errorf("the Kubernetes sysext made here fails its own check: %w", err)
	}
	return []Sysext{x}, nil
}

// takeSysexts fetches and checks each --sysext; one of them must be the Kubernetes sysext of
// --kubernetes-version (the image name and the record say which Kubernetes the image runs).
func takeSysexts(o *Options, srcs map[string]sysextSource) ([]Sysext, error) {
	var exts []Sysext
	names := map[string]string{}
	for _, s := range o.Sysext {
		src, ok := srcs[s]
		if !ok {
			return nil, fmt.Errorf("--sysext %s was not resolved", s)
		}
		p := src.Path
		info, err := sysext.Open(p) // its errors name the file
		if err != nil {
			return nil, fmt.Errorf("--sysext: %w", err)
		}
		name := info.DefaultName()
		if name == "" {
			return nil, fmt.Errorf("--sysext %s: cannot tell which extension it is: it holds extension-release files for %v; name the file NAME.raw or NAME-<version>-<arch>.raw after the one it should be merged as", s, info.ReleaseNames)
		}
		if prev, ok := names[name]; ok {
			return nil, fmt.Errorf("--sysext %s and %s are both the %q extension; systemd-sysext merges one image per name", prev, s, name)
		}
		names[name] = s
		if _, err := sysext.Check(p, name, sysext.FlatcarHost(o.Release.Arch)); err != nil {
			return nil, fmt.Errorf("--sysext %s (%s): %w", s, name, err)
		}
		fileName := path.Base(filepath.ToSlash(p))
		if !strings.HasSuffix(fileName, ".raw") {
			fileName = name + ".raw"
		}
		exts = append(exts, Sysext{Name: name, FileName: fileName, Source: s, Path: p, SHA512: src.SHA512, Bytes: src.Bytes, hashedAt: src.ModTime})
	}
	k8s, ok := names[sysext.KubernetesName]
	if !ok {
		return nil, fmt.Errorf("none of the --sysext images is the %q extension (extension-release.%s); add one, or leave --sysext out to make it from --kubernetes-version",
			sysext.KubernetesName, sysext.KubernetesName)
	}
	for _, x := range exts {
		if x.Name != sysext.KubernetesName {
			continue
		}
		if v := versionInName(x.FileName); v != "" && v != o.Kubernetes.Kubernetes {
			return nil, fmt.Errorf("--sysext %s is Kubernetes %s but the build is for --kubernetes-version %s; pass --kubernetes-version %s (it names the image)", k8s, v, o.Kubernetes.Kubernetes, v)
		}
	}
	return exts, nil
}

// versionInName reads v1.33.4 from kubernetes-v1.33.4-x86-64.raw ("" when the name has none).
func versionInName(fileName string) string {
	rest, ok := strings.CutPrefix(fileName, sysext.KubernetesName+"-")
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, "-")
	if sysext.ValidVersion(v) != nil {
		return ""
	}
	return v
}

// download fetches a --sysext URL into dir (the build directory, removed at the end) with the
// build's client: its timeouts, retries and deadline; nothing is left on failure.
func download(ctx context.Context, o *Options, raw, dir string) (*httpx.Downloaded, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("--sysext %s: %w", raw, err)
	}
	name := path.Base(u.Path)
	if name == "/" || name == "." || name == "" {
		return nil, fmt.Errorf("--sysext %s: the URL names no file", raw)
	}
	if err := os.MkdirAll(filepath.Join(dir, "sysext"), 0o700); err != nil {
		return nil, err
	}
	d, err := o.client().Download(ctx, raw, filepath.Join(dir, "sysext", name), httpx.Digest{Algo: "sha512"}, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--sysext: %w", err)
	}
	return d, nil
}

// keepNextToArtifact copies the sysext into the output directory (users serve it for
// systemd-sysupdate or CAPO's sysext flavor); the record lists it with its sha512. A --sysext
// was hashed when the build resolved it: the copy is refused if the file changed since, and
// not hashed again. The sysext made here is hashed once, as it is copied.
func keepNextToArtifact(ctx context.Context, o *Options, x *Sysext) error {
	dst := filepath.Join(o.OutputDir, x.FileName)
	src, err := os.Open(x.Path)
	if err != nil {
		return err
	}
	defer src.Close()
	if x.SHA512 != "" {
		fi, err := src.Stat()
		if err != nil {
			return err
		}
		if fi.Size() != x.Bytes || !fi.ModTime().Equal(x.hashedAt) {
			return fmt.Errorf("--sysext %s changed during the build (it was %d bytes when hashed, now %d); run the build again", x.Source, x.Bytes, fi.Size())
		}
	}
	out, err := atomicfile.Create(dst)
	if err != nil {
		return err
	}
	defer out.Abort()
	if err := disk.CopySparse(ctx, out.File, src); err != nil {
		return fmt.Errorf("copying %s to %s: %w", x.Path, dst, err)
	}
	if x.SHA512 == "" { // the copy, read back
		if x.SHA512, x.Bytes, err = digest.SHA512(out.Name()); err != nil {
			return err
		}
	}
	if err := out.Commit(0o644); err != nil {
		return err
	}
	x.Path = dst
	return nil
}

// sysextPlan is the sysext method's part of a dry run.
type sysextPlan struct {
	Sysexts     []string `json:"sysexts"`
	Stored      string   `json:"stored"`
	Link        string   `json:"link"`
	KeepUpdates bool     `json:"keepUpdates"`
}

// Lines are the plan's text form.
func (p sysextPlan) Lines() []string {
	l := []string{"sysexts:"}
	for _, s := range p.Sysexts {
		l = append(l, "  "+s)
	}
	l = append(l, "stored:      "+p.Stored, "link:        "+p.Link, "ROOT:        a fresh ext4 carrying the image's ROOT plus the files above (no VM, no mount)")
	if !p.KeepUpdates {
		l = append(l, "updates:     update-engine.service and locksmithd.service masked")
	}
	return l
}

func (sysextMethod) Plan(ctx context.Context, o *Options, p *Plan) error {
	name, err := sysext.KubernetesFileName(o.Kubernetes.Kubernetes, o.Release.Arch)
	if err != nil {
		return err
	}
	sp := sysextPlan{Sysexts: o.Sysext, Stored: path.Join(sysext.KubernetesDir, name), Link: sysext.KubernetesLink, KeepUpdates: o.KeepUpdates}
	if len(sp.Sysexts) == 0 {
		sp.Sysexts = []string{"made from the Kubernetes " + o.Kubernetes.Kubernetes + " release binaries (" + name + ")"}
	}
	if c := o.Containerd; c.Version != "" {
		file, _ := sysext.ContainerdFileName(c.Version, o.Release.Arch)
		sp.Sysexts = append(sp.Sysexts, fmt.Sprintf("made from containerd %s and runc %s (%s; %s -> /dev/null)", c.Version, c.Runc, file, sysext.ContainerdMask))
	}
	p.MethodPlan = sp
	return nil
}
