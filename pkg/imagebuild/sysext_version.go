package imagebuild

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/redact"
	"github.com/flatcar-capo/flatcar-capo/pkg/sysext"
)

// With --sysext the Kubernetes version is the sysext's, read from inside it (a file's name is only
// a name: the bakery links kubernetes.raw to whichever version it holds), so an offline build needs
// no marker file and the image is named after what the node will run.

// sysextKubernetes is the Kubernetes version inside the Kubernetes sysext among --sysext (its
// extension-release SYSEXT_VERSION_ID, else what its kubeadm says), with where it was read; "" when no
// --sysext holds Kubernetes.
func sysextKubernetes(ctx context.Context, o *Options, srcs map[string]sysextSource) (version, from string, err error) {
	var unreadable error
	for _, s := range o.Sysext {
		src, ok := srcs[s]
		if !ok { // a --dry-run URL, not downloaded: its name is all there is
			if v := versionInName(path.Base(filepath.ToSlash(s))); v != "" {
				return v, "the name of --sysext " + redact.URL(s), nil
			}
			continue
		}
		info, err := sysext.Open(src.Path)
		if err != nil { // with an exact --kubernetes-version the sysext step reports the damage
			if src.Path != s {
				err = fmt.Errorf("--sysext %s: %w", redact.URL(s), err)
			}
			unreadable = fmt.Errorf("%w: %w", errVersionUnknown, err)
			continue
		}
		rel, hasRelease := info.Releases[sysext.KubernetesName]
		_, hasKubeadm := info.Entry("usr/bin/kubeadm")
		if !hasRelease && !hasKubeadm {
			continue
		}
		for _, key := range []string{sysext.KubernetesVersionKey, "VERSION_ID"} { // VERSION_ID: as other tools may write it
			if v := rel[key]; sysext.ValidVersion(v) == nil {
				return v, fmt.Sprintf("%s in extension-release.%s of --sysext %s", key, sysext.KubernetesName, redact.URL(s)), nil
			}
		}
		if hasKubeadm {
			v, err := kubeadmVersion(ctx, src.Path)
			if err != nil {
				return "", "", errs.Invalid(fmt.Errorf("%w: --sysext %s: no SYSEXT_VERSION_ID in its extension-release, and %v: pass --kubernetes-version vX.Y.Z, or rebuild it with 'flatcar-capo sysext create'", errVersionUnknown, redact.URL(s), err))
			}
			return v, "usr/bin/kubeadm version of --sysext " + redact.URL(s), nil
		}
	}
	return "", "", unreadable
}

// errVersionUnknown: the sysext holds Kubernetes but says not which (an exact --kubernetes-version then decides).
var errVersionUnknown = errors.New("cannot tell the Kubernetes version inside the sysext")

var versionRe = regexp.MustCompile(`\bv[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?\b`)

// kubeadmVersion runs `kubeadm version -o short` of the sysext's kubeadm (copied out; only when
// it runs on this machine) and returns the version it prints.
func kubeadmVersion(ctx context.Context, image string) (string, error) {
	data, err := sysext.ReadFile(image, "usr/bin/kubeadm", 1<<30)
	if err != nil {
		return "", err
	}
	if f, err := elf.NewFile(bytes.NewReader(data)); err == nil {
		defer f.Close()
		if goarch(f.Machine) != runtime.GOARCH {
			return "", fmt.Errorf("its kubeadm is for %s, this machine is %s", f.Machine, runtime.GOARCH)
		}
	} else if !bytes.HasPrefix(data, []byte("#!")) {
		return "", fmt.Errorf("its usr/bin/kubeadm is neither an ELF program nor a script")
	}
	dir, err := os.MkdirTemp("", "flatcar-capo-kubeadm-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "kubeadm")
	if err := os.WriteFile(bin, data, 0o700); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "version", "-o", "short")
	cmd.Dir, cmd.Env = dir, []string{"PATH=/usr/bin:/bin", "HOME=" + dir}
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("its kubeadm version failed: %v", err)
	}
	v := versionRe.FindString(string(out))
	if sysext.ValidVersion(v) != nil {
		return "", fmt.Errorf("its kubeadm version printed no version (%q)", strings.TrimSpace(string(out)))
	}
	return v, nil
}

func goarch(m elf.Machine) string {
	switch m {
	case elf.EM_X86_64:
		return "amd64"
	case elf.EM_AARCH64:
		return "arm64"
	}
	return m.String()
}

// agreeWithSysext refuses a --kubernetes-version that names another release than the sysext's
// (an exact tag, or a minor the sysext's version is not in); stable says nothing offline.
func agreeWithSysext(requested, inside, from string) error {
	spec, err := kubernetes.ParseSpec(requested)
	if err != nil {
		return err
	}
	switch {
	case spec.Exact != "" && spec.Exact != inside,
		spec.Minor != "" && !strings.HasPrefix(inside, "v"+spec.Minor+"."):
		return errs.Invalidf("--kubernetes-version %s disagrees with the Kubernetes sysext, which holds %s (%s): drop --kubernetes-version (the sysext's version is used) or pass the sysext of %s",
			requested, inside, from, requested)
	}
	return nil
}
