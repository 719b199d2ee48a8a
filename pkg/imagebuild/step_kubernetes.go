package imagebuild

import (
	"cmp"
	"context"
	"path/filepath"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
	"github.com/flatcar-capo/flatcar-capo/pkg/redact"
)

// stepKubernetes downloads kubeadm, kubelet, kubectl, crictl and the CNI plugins on the host and
// checks each against its .sha256 before any VM boots; a mismatch stops the build here.
type stepKubernetes struct{ noCleanup }

func (*stepKubernetes) Name() string { return "kubernetes" }

func (*stepKubernetes) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	o, rec := options(state), buildRecord(state)
	if !needsKubernetesDownloads(o) {
		note(state, "skipped: --sysext gives the Kubernetes sysext, nothing to download")
		return multistep.ActionContinue
	}
	ko := o.Kubernetes
	ko.CacheDir = cmp.Or(ko.CacheDir, downloadCache(o, state))
	set, err := kubernetes.Download(ctx, o.client(), ko, indented{o.Log, "  "})
	if err != nil {
		return halt(state, err)
	}
	keyK8s.put(state, set)
	cached := 0
	rec.Downloads = rec.Downloads[:0]
	for _, f := range set.Files {
		rec.Downloads = append(rec.Downloads, record.Download{Name: f.Name, URL: redact.URL(f.URL), SHA256: f.SHA256})
		if f.Cached {
			cached++
		}
	}
	note(state, "Kubernetes %s, crictl %s, CNI %s: %d files sha256-verified (%d from the cache)",
		ko.Kubernetes, ko.Crictl, ko.CNI, len(set.Files), cached)
	return multistep.ActionContinue
}

// needsKubernetesDownloads is false for the sysext method with --sysext: the Kubernetes sysext
// is among them (stepSysext refuses otherwise), so an air-gapped site needs no mirror.
func needsKubernetesDownloads(o *Options) bool {
	return o.Method != MethodSysext || len(o.Sysext) == 0
}

// downloadCache is where a step's verified downloads are kept when their own options name no
// cache: --cache-dir, else the build directory's cache.
func downloadCache(o *Options, state multistep.StateBag) string {
	return cmp.Or(o.CacheDir, filepath.Join(keyWorkDir.get(state), "cache"))
}
