package imagebuild

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/packer-plugin-sdk/multistep"
)

// stepPayload lays the verified downloads out for the guest (bin/kubeadm bin/kubelet
// bin/kubectl crictl.tar.gz cni-plugins.tgz versions.env), so the VM needs no network.
type stepPayload struct{ noCleanup }

func (*stepPayload) Name() string { return "payload" }

func (*stepPayload) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	set := keyK8s.get(state)
	dir := filepath.Join(keyWorkDir.get(state), "payload")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return halt(state, err)
	}
	if err := set.WritePayload(dir); err != nil {
		return halt(state, fmt.Errorf("payload: %w", err))
	}
	if err := writeImagesPayload(ctx, state, dir); err != nil {
		return halt(state, fmt.Errorf("payload: %w", err))
	}
	// --containerd-version: packer/scripts/install-containerd-sysext.sh installs it.
	if _, err := makeContainerdSysext(ctx, state, filepath.Join(dir, "containerd")); err != nil {
		return halt(state, fmt.Errorf("payload: %w", err))
	}
	keyPayload.put(state, dir)
	note(state, "%d files in %s", len(set.Files)+1, dir)
	return multistep.ActionContinue
}
