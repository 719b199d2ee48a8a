package imagebuild

import (
	"context"
	"path/filepath"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
	"github.com/flatcar-capo/flatcar-capo/pkg/signing"
)

// Plan is what --dry-run prints: everything resolved, nothing booted or written.
type Plan struct {
	Method            string `json:"method"`
	Channel           string `json:"channel"`
	FlatcarVersion    string `json:"flatcarVersion"`
	Arch              string `json:"arch"`
	Base              string `json:"base"`
	BaseURL           string `json:"baseUrl,omitempty"`
	BaseImage         string `json:"baseImage,omitempty"`
	OEM               string `json:"oem"`
	KubernetesVersion string `json:"kubernetesVersion"`
	// KubernetesRequested is the --kubernetes-version given (stable, 1.36) when it was resolved.
	KubernetesRequested string            `json:"kubernetesRequested,omitempty"`
	KubernetesFrom      string            `json:"kubernetesFrom,omitempty"` // --sysext: where the version was read
	CrictlVersion       string            `json:"crictlVersion"`
	CNIVersion          string            `json:"cniVersion"`
	Downloads           []kubernetes.File `json:"downloads"`
	ImageName           string            `json:"imageName"`
	Artifact            string            `json:"artifact"`
	Clouds              []string          `json:"clouds,omitempty"`
	Flavor              string            `json:"flavor"`
	Images              *ImagesDryRun     `json:"images,omitempty"` // what would be preloaded (images.go)
	Node                NodeSettings      `json:"node"`             // USB storage, official extensions (nodesettings.go)
	// Signed are the .sig files --sign-key would write; GlanceSigned says the upload is signed.
	Signed       []string `json:"signed,omitempty"`
	GlanceSigned bool     `json:"glanceSigned,omitempty"`
	// Method is the method's own plan (for packer: binary, version, accelerator, template, variables).
	MethodPlan any `json:"methodPlan,omitempty"`
}

// stepPlan fills the record's plan for --dry-run and stops.
type stepPlan struct{ noCleanup }

func (*stepPlan) Name() string { return "plan" }

func (*stepPlan) Run(ctx context.Context, state multistep.StateBag) multistep.StepAction {
	o, rec := options(state), buildRecord(state)
	rel := keyRelease.get(state)
	p := &Plan{Method: o.Method, Channel: rel.Channel, FlatcarVersion: rel.Version, Arch: rel.Arch, Base: o.Base,
		OEM: o.OEM, KubernetesVersion: o.Kubernetes.Kubernetes, Downloads: o.Kubernetes.Files(),
		KubernetesRequested: o.KubernetesRequested, KubernetesFrom: o.KubernetesFrom, CrictlVersion: o.Kubernetes.Crictl, CNIVersion: o.Kubernetes.CNI, ImageName: o.ImageName,
		Artifact: ArtifactPath(o), Clouds: o.Clouds, Flavor: flavors[o.Method], Node: o.Node}
	if !needsKubernetesDownloads(o) {
		p.Downloads = []kubernetes.File{}
	}
	if o.BaseImage != "" {
		p.BaseImage, _ = filepath.Abs(o.BaseImage)
	} else {
		p.BaseURL = rec.Base.URL
	}
	p.Images = planImages(ctx, o)
	if o.SignKey != nil {
		p.Signed = []string{p.Artifact + signing.SigSuffix, record.Path(p.Artifact) + signing.SigSuffix}
		p.GlanceSigned = o.GlanceSigning != nil
	}
	keyPlan.put(state, p)
	if err := methods[o.Method].Plan(ctx, o, p); err != nil {
		return halt(state, err)
	}
	setManifests(rec, o)
	note(state, "dry run: nothing downloaded, booted or written")
	return multistep.ActionContinue
}
