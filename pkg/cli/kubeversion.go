package cli

import (
	"cmp"
	"context"

	"github.com/spf13/pflag"

	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
)

const kubernetesVersionHelp = "Kubernetes: stable (release/stable.txt of --kubernetes-mirror), a minor such as 1.36 (its latest patch, release/stable-1.36.txt), or an exact " + kubernetes.ExampleVersion

// addKubernetesVersionFlag is --kubernetes-version with the forms every command takes.
func addKubernetesVersionFlag(f *pflag.FlagSet, p *string, def string) {
	help := kubernetesVersionHelp
	if def == "" {
		help += " (required)"
	}
	f.StringVar(p, "kubernetes-version", def, help)
}

// resolveKubernetesVersion makes v exact through mirror's marker files; bad forms are usage errors.
func resolveKubernetesVersion(ctx context.Context, c *httpx.Client, mirror, v string) (string, error) {
	if _, err := kubernetes.ParseSpec(v); err != nil {
		return "", err
	}
	if kubernetes.IsExact(v) {
		return v, nil
	}
	return kubernetes.ResolveVersion(ctx, c, cmp.Or(mirror, kubernetes.DefaultMirror), v)
}
