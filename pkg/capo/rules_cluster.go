package capo

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// Rules that need several documents: which image a bootstrap config boots, how a
// KubeadmControlPlane changes between two versions of it, and what a cloud has.

func docKey(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

// machineLink is a bootstrap config and the infrastructure template it is paired with.
type machineLink struct {
	owner, bootstrap, infra *Document
}

// links pairs bootstrap configs with machine templates through MachineDeployments,
// MachineSets, MachinePools, Machines and KubeadmControlPlanes. References are matched by
// kind, namespace and name (not version: the seed's MachineDeployment names an older one).
func links(docs []*Document) []machineLink {
	// The same object may be in several files (current and desired state): a reference
	// resolves in the referring document's own file first, then in the last file that has it.
	byKey := map[string]*Document{}
	for _, d := range docs {
		byKey[docKey(d.Kind, d.Namespace, d.Name)] = d
		byKey[d.File+"\x00"+docKey(d.Kind, d.Namespace, d.Name)] = d
	}
	lookup := func(owner *Document, ref map[string]any) *Document {
		if ref == nil {
			return nil
		}
		ns := cmp.Or(getString(ref, "namespace"), owner.Namespace)
		key := docKey(getString(ref, "kind"), ns, getString(ref, "name"))
		if d, ok := byKey[owner.File+"\x00"+key]; ok {
			return d
		}
		return byKey[key]
	}
	var out []machineLink
	for _, d := range docs {
		if d.Group() != "cluster.x-k8s.io" && d.Group() != "controlplane.cluster.x-k8s.io" {
			continue
		}
		var spec map[string]any
		var bootstrap *Document
		switch d.Kind {
		case "MachineDeployment", "MachineSet", "MachinePool":
			spec = getMap(d.obj, "spec", "template", "spec")
		case "Machine":
			spec = getMap(d.obj, "spec")
		case "KubeadmControlPlane":
			spec = getMap(d.obj, "spec", "machineTemplate")
			if s := getMap(spec, "spec"); s != nil { // v1beta2
				spec = s
			}
			bootstrap = d
		default:
			continue
		}
		if bootstrap == nil {
			bootstrap = lookup(d, getMap(spec, "bootstrap", "configRef"))
		}
		infra := lookup(d, getMap(spec, "infrastructureRef"))
		if bootstrap != nil && infra != nil {
			out = append(out, machineLink{owner: d, bootstrap: bootstrap, infra: infra})
		}
	}
	return out
}

// machineSpecPath is where an OpenStackMachine(Template) keeps the server spec; nil for
// other documents.
func machineSpecPath(d *Document) Path {
	if d.Group() != "infrastructure.cluster.x-k8s.io" {
		return nil
	}
	switch d.Kind {
	case "OpenStackMachineTemplate":
		return Path{"spec", "template", "spec"}
	case "OpenStackMachine":
		return Path{"spec"}
	}
	return nil
}

// machineSpec is the server spec of an OpenStackMachine(Template), nil for other documents.
func machineSpec(d *Document) map[string]any {
	if p := machineSpecPath(d); p != nil {
		return getMap(d.obj, p...)
	}
	return nil
}

// imageFilter reads the image selection of any CAPO version: a plain name (v1alpha5/6),
// {name, tags} (v1alpha7), {filter: {name, tags}} or {id} (v1beta1).
type imageFilter struct {
	Name string
	Tags []string
	ID   string
	Ref  string // imageRef.name: an ORC Image in the same namespace
	Path Path
}

func imageOf(spec map[string]any) (imageFilter, bool) {
	switch img := spec["image"].(type) {
	case string:
		return imageFilter{Name: img, Path: Path{"image"}}, true
	case map[string]any:
		f := imageFilter{ID: getString(img, "id"), Path: Path{"image"}}
		if ref := getString(img, "imageRef", "name"); ref != "" {
			return imageFilter{Ref: ref, Path: Path{"image", "imageRef", "name"}}, true
		}
		src := img
		if filter := getMap(img, "filter"); filter != nil {
			src, f.Path = filter, Path{"image", "filter"}
		}
		f.Name, f.Tags = getString(src, "name"), getStrings(src, "tags")
		return f, true
	}
	if id := getString(spec, "imageUUID"); id != "" {
		return imageFilter{ID: id, Path: Path{"imageUUID"}}, true
	}
	return imageFilter{}, false
}

func (f imageFilter) flatcar() bool {
	all := strings.ToLower(f.Name + " " + f.Ref + " " + strings.Join(f.Tags, " "))
	return strings.Contains(all, "flatcar")
}

func (f imageFilter) String() string {
	switch {
	case f.Ref != "":
		return "imageRef " + f.Ref
	case f.ID != "":
		return "id " + f.ID
	case len(f.Tags) > 0:
		return fmt.Sprintf("name %q, tags %v", f.Name, f.Tags)
	}
	return fmt.Sprintf("%q", f.Name)
}

// checkFlatcarFormat: a Flatcar image booted with cloud-config bootstrap data never joins.
func (l *linter) checkFlatcarFormat(docs []*Document) []Finding {
	var out []Finding
	reported := map[*Document]bool{}
	for _, link := range links(docs) {
		img, ok := imageOf(machineSpec(link.infra))
		if !ok || !img.flatcar() || reported[link.bootstrap] {
			continue
		}
		b, ok := newBootstrapSpec(link.bootstrap)
		if !ok || b.ignition() {
			continue
		}
		reported[link.bootstrap] = true
		out = append(out, newFinding(link.bootstrap, ruleFlatcarFormat, b.path.Child("format"),
			fmt.Sprintf("%s %s boots the Flatcar image %s (through %s %s) but the bootstrap format is %s",
				link.infra.Kind, link.infra.Name, img, link.owner.Kind, link.owner.Name, b.format())))
	}
	return out
}

const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// checkFormatChanges finds KubeadmControlPlanes whose format changes: the same object given
// twice (old then new, e.g. `lint current.yaml desired.yaml`), or against kubectl's
// last-applied-configuration annotation.
func (l *linter) checkFormatChanges(docs []*Document) []Finding {
	if l.capi.kcpFormatMutable() {
		return nil
	}
	var out []Finding
	previous := map[string]string{}
	for _, d := range docs {
		b, ok := newBootstrapSpec(d)
		if !ok || d.Kind != "KubeadmControlPlane" {
			continue
		}
		key := docKey(d.Kind, d.Namespace, d.Name)
		before, seen := previous[key]
		if !seen {
			if raw := getString(d.obj, "metadata", "annotations", lastAppliedAnnotation); raw != "" {
				var last map[string]any
				if json.Unmarshal([]byte(raw), &last) == nil {
					if before = getString(last, "spec", "kubeadmConfigSpec", "format"); before == "" {
						before = "cloud-config"
					}
					seen = true
				}
			}
		}
		if seen && before != b.format() {
			out = append(out, newFinding(d, ruleFormatImmutable, b.path.Child("format"),
				fmt.Sprintf("format changes from %s to %s, which the KubeadmControlPlane webhook of CAPI %s refuses (\"spec.kubeadmConfigSpec.format: Forbidden: cannot be modified\")",
					before, b.format(), l.capi)))
		}
		previous[key] = b.format()
	}
	return out
}

// checkImages asks the cloud how many active images each machine template's filter matches.
func (l *linter) checkImages(ctx context.Context, docs []*Document, lookup, minDisk ImageLookup) ([]Finding, error) {
	var out []Finding
	counts := map[string]int{}
	for _, d := range docs {
		spec := machineSpec(d)
		img, ok := imageOf(spec)
		if ok && img.Ref != "" {
			// The ORC Image's import filter is what must match one image (checkImageRefs
			// reports a missing Image; an import by ID is exact).
			orc := orcImageNamed(docs, d.Namespace, img.Ref)
			if orc == nil || getMap(orc.obj, "spec", "import", "filter") == nil {
				continue
			}
			f := getMap(orc.obj, "spec", "import", "filter")
			img = imageFilter{Name: getString(f, "name"), Tags: getStrings(f, "tags"), Path: img.Path}
		}
		if !ok || img.ID != "" || strings.Contains(img.Name+strings.Join(img.Tags, ""), "${") || imagePatchedByClass(docs, d) {
			continue // an ID is exact; a template variable or a ClusterClass patch is not known yet
		}
		key := img.String()
		n, cached := counts[key]
		if !cached {
			var err error
			if n, err = lookup(ctx, img.Name, img.Tags); err != nil {
				return nil, fmt.Errorf("looking up image %s for %s: %w", img, d, err)
			}
			counts[key] = n
		}
		if n == 1 && minDisk != nil {
			md, err := minDisk(ctx, img.Name, img.Tags)
			if err != nil {
				return nil, fmt.Errorf("looking up the min_disk of image %s for %s: %w", img, d, err)
			}
			if md > 0 {
				out = append(out, checkRootVolumes([]*Document{d}, md)...)
			}
		}
		if n != 1 {
			out = append(out, newFinding(d, ruleImageFilter, machineSpecPath(d).Child(img.Path...),
				fmt.Sprintf("image filter %s matches %d active images in the cloud, CAPO needs exactly 1", img, n)))
		}
	}
	return out, nil
}

// orcImageNamed finds the ORC Image of that name and namespace among the documents.
func orcImageNamed(docs []*Document, namespace, name string) *Document {
	for _, o := range docs {
		if o.Kind == "Image" && o.Group() == "openstack.k-orc.cloud" && o.Name == name && o.Namespace == namespace {
			return o
		}
	}
	return nil
}

// checkImageRefs: an imageRef must name an ORC Image in the same namespace, or CAPO waits for
// one forever.
func (l *linter) checkImageRefs(docs []*Document) []Finding {
	var out []Finding
	for _, d := range docs {
		img, ok := imageOf(machineSpec(d))
		if !ok || img.Ref == "" || strings.Contains(img.Ref, "${") || orcImageNamed(docs, d.Namespace, img.Ref) != nil || imagePatchedByClass(docs, d) {
			continue
		}
		out = append(out, newFinding(d, ruleImageFilter, machineSpecPath(d).Child(img.Path...),
			fmt.Sprintf("imageRef names the ORC Image %q, which is not among the linted objects in namespace %q", img.Ref, d.Namespace)))
	}
	return out
}

// checkRootVolumes: a root volume smaller than the image's min_disk is refused by Nova.
func checkRootVolumes(docs []*Document, minDisk int) []Finding {
	var out []Finding
	for _, d := range docs {
		spec := machineSpec(d)
		size, ok := get(spec, "rootVolume", "sizeGiB")
		n, isNum := size.(float64)
		if i, isInt := size.(int); isInt {
			n, isNum = float64(i), true
		}
		if !ok || !isNum || int(n) >= minDisk {
			continue
		}
		out = append(out, newFinding(d, ruleRootVolume, machineSpecPath(d).Child("rootVolume", "sizeGiB"),
			fmt.Sprintf("rootVolume.sizeGiB is %d, below the image's min_disk of %d GiB", int(n), minDisk)))
	}
	return out
}

// imagePatchedByClass reports an OpenStackMachineTemplate that a linted ClusterClass uses and
// whose image a patch of that class sets: each Cluster's variables decide the image, not the
// template.
func imagePatchedByClass(docs []*Document, d *Document) bool {
	if d.Kind != "OpenStackMachineTemplate" {
		return false
	}
	for _, c := range docs {
		if c.Kind != "ClusterClass" || c.Group() != "cluster.x-k8s.io" || c.Namespace != d.Namespace {
			continue
		}
		used := getString(c.obj, "spec", "controlPlane", "machineInfrastructure", "templateRef", "name") == d.Name
		for _, md := range getList(c.obj, "spec", "workers", "machineDeployments") {
			used = used || getString(md, "infrastructure", "templateRef", "name") == d.Name
		}
		if !used {
			continue
		}
		for _, p := range getList(c.obj, "spec", "patches") {
			for _, def := range getList(p, "definitions") {
				if getString(def, "selector", "kind") != d.Kind {
					continue
				}
				for _, jp := range getList(def, "jsonPatches") {
					if strings.HasPrefix(getString(jp, "path"), "/spec/template/spec/image") {
						return true
					}
				}
			}
		}
	}
	return false
}
