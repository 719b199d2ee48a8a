package capoproof_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"sigs.k8s.io/yaml"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/fetchtest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/novatest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/occmtest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/registrytest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/standin"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
)

// newerVersion is the stand-in release the worker is upgraded to: the channel's next point
// release (the same guest published under this version, standin.ReleaseOptions.Version).
const newerVersion = "4459.2.1"

// images builds the proof's images as the node proof does: a stand-in release per version on one
// release server, real Kubernetes from one 127.0.0.1 mirror, kubeadm's real images preloaded from
// one registry, one build cache. The first build pays for the mirror and the registry; another
// release's image is one more `build`.
type images struct {
	t       *testing.T
	dir     string
	mirror  *kubetest.Mirror
	reg     *registrytest.Registry
	srv     *fetchtest.Server
	sysexts []string
	occmDir string // scripts/install-occm.sh's build: the manager's binary and manifests
	occmRef string // its image, preloaded by `build --image`
}

func newImages(t *testing.T, dir string) *images {
	t.Helper()
	bin := kubetest.RealDir(t)
	b := &images{t: t, dir: dir, mirror: kubetest.NewReal(t, bin, registrytest.ContainerdDir(t)), reg: registrytest.Start(t),
		srv: fetchtest.NewServer(t), sysexts: []string{registrytest.ContainerdSysext(t, dir)}}
	refs, err := registrytest.KubeadmImageList(context.Background(), bin, kubetest.RealVersion)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.reg.PushReal(context.Background(), bin, refs); err != nil {
		t.Fatal(err)
	}
	// The cloud controller manager a user runs on the workload cluster, preloaded as users
	// preload an add-on's image (`build --image`): the guests have no route to a registry.
	b.occmDir = occmtest.Dir(t)
	if b.occmRef, err = occmtest.Push(context.Background(), b.reg, b.occmDir); err != nil {
		t.Fatal(err)
	}
	return b
}

// build publishes the stand-in release of that version and builds its image with
// `build --method sysext`; it returns the qcow2, named flatcar-stable-VERSION-kube-K8S-sysext.
func (b *images) build(version string) string {
	t := b.t
	t.Helper()
	rel := standin.PublishRelease(t, b.srv, standin.ReleaseOptions{Sysexts: b.sysexts, Version: version})
	out := filepath.Join(b.dir, "out-"+rel.Version)
	args := []string{"build", "--method", "sysext", "--base", "qemu", "--oem", "openstack", "--release-server", rel.ReleaseServer,
		"--keyring", rel.Keyring, "--channel", rel.Channel, "--version", rel.Version, "--cache-dir", filepath.Join(b.dir, "cache"),
		"--output-dir", out, "--registry-mirror", "registry.k8s.io=https://" + b.reg.Host, "--registry-ca", b.reg.CAFile,
		"--image", b.occmRef}
	res := testutil.RunCmd(t, testutil.Cmd{Args: append(args, b.mirror.Args()...), Env: []string{"DOCKER_CONFIG=" + b.reg.DockerConfig}}).MustSucceed(t)
	qcows, _ := filepath.Glob(filepath.Join(out, "*.qcow2"))
	if len(qcows) != 1 {
		t.Fatalf("artifacts in %s: %v\n%s", out, qcows, res.Stderr)
	}
	var steps []string // build's "[n/N] step   done   1.2s: note" lines: where the time went
	for _, m := range buildStep.FindAllStringSubmatch(res.Stderr, -1) {
		steps = append(steps, m[1]+" "+m[2])
	}
	t.Logf("build of release %s: %s", rel.Version, strings.Join(steps, ", "))
	return qcows[0]
}

// buildStep is one step's line in build's progress output (pkg/imagebuild's timed steps).
var buildStep = regexp.MustCompile(`(?m)^\[\d+/\d+\] (\S.*?)\s+(?:done|FAILED|stopped|interrupted)\s+([\d.]+s)`)

// uploadImage uploads image to the cloud's Glance as a user does, `flatcar-capo upload`, and
// returns its Glance ID.
func uploadImage(t *testing.T, cloud *novatest.Cloud, image, name string) string {
	t.Helper()
	up := testutil.RunCmd(t, testutil.Cmd{Prefix: []string{"ip", "netns", "exec", cloud.Netns},
		Args: []string{"upload", image, "--name", name, "--cloud", "local", "--visibility", "public"},
		Env:  []string{"OS_CLIENT_CONFIG_FILE=" + cloud.CloudsYAML}, Timeout: 15 * time.Minute}).MustSucceed(t)
	f := strings.Fields(up.Stdout)
	if len(f) == 0 {
		t.Fatalf("upload printed no image ID:\n%s", up.Combined())
	}
	return f[len(f)-1]
}

// newMachineTemplate is the first steps of CAPI's "Updating Machine Infrastructure and Bootstrap
// Templates" (https://cluster-api.sigs.k8s.io/tasks/updating-machine-templates): infrastructure
// machine templates are immutable (CAPO's webhook refuses a changed spec), so a user duplicates
// the current one (`kubectl get -o json`, here current), changes the fields (CAPO v1beta1's
// spec.template.spec.image.filter.name, as `manifests` renders it), gives it a new
// metadata.name, and clears the server's metadata (resourceVersion, uid, ...) and status
// before creating it. The result is YAML for `kubectl create -f`.
func newMachineTemplate(current []byte, name, image string) ([]byte, error) {
	var o map[string]any
	if err := json.Unmarshal(current, &o); err != nil {
		return nil, err
	}
	if o["kind"] != "OpenStackMachineTemplate" || o["apiVersion"] != "infrastructure.cluster.x-k8s.io/v1beta1" {
		return nil, fmt.Errorf("%v %v is not an infrastructure.cluster.x-k8s.io/v1beta1 OpenStackMachineTemplate", o["apiVersion"], o["kind"])
	}
	old, _ := o["metadata"].(map[string]any)
	meta := map[string]any{"name": name}
	for _, k := range []string{"namespace", "labels"} {
		if v, ok := old[k]; ok {
			meta[k] = v
		}
	}
	if a, ok := old["annotations"].(map[string]any); ok {
		delete(a, "kubectl.kubernetes.io/last-applied-configuration") // the old object's, not this one's
		if len(a) > 0 {
			meta["annotations"] = a
		}
	}
	o["metadata"] = meta
	delete(o, "status")
	spec, _ := dig(o, "spec", "template", "spec").(map[string]any)
	img, _ := spec["image"].(map[string]any)
	filter, _ := img["filter"].(map[string]any)
	if filter == nil || len(img) != 1 {
		// CAPO takes exactly one of id, filter and imageRef; only filter.name names an upload.
		return nil, fmt.Errorf("template %v names its image by %v, not by image.filter.name as `flatcar-capo manifests` renders it", old["name"], img)
	}
	filter["name"] = image
	b, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	return yaml.JSONToYAML(b)
}

// replaceFirstPatch sets the MachineDeployment's rollout to delete the old Machine before it
// makes the new one (CAPI v1beta2's spec.rollout.strategy; v1beta1's spec.strategy), as users
// with no room for one more server do: here a third TCG guest starved the control plane's etcd
// (kube-apiserver's health check failed, kube-controller-manager exited four times).
const replaceFirstPatch = `{"spec":{"rollout":{"strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":0,"maxUnavailable":1}}}}}`

// infraRefPatch is the last step of that page: the MachineDeployment's
// spec.template.spec.infrastructureRef names the new template (a merge patch), and CAPI rolls
// its Machines (RollingUpdate; with replaceFirstPatch the old one is deleted first).
func infraRefPatch(template string) string {
	return fmt.Sprintf(`{"spec":{"template":{"spec":{"infrastructureRef":{"name":%q}}}}}`, template)
}

// dig is the value at path in nested JSON objects, nil when absent.
func dig(v any, path ...string) any {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// serverGone reports whether Nova no longer has the server (404).
func (o *openStack) serverGone(id string) bool {
	err := servers.Get(o.ctx, o.nova, id).Err
	if err != nil && !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		o.t.Logf("server %s: %v", id, err)
	}
	return gophercloud.ResponseCodeIs(err, http.StatusNotFound)
}

// rollOut is issue 46's upgrade: a second image for the newer stand-in release, built by the
// same builder and uploaded by `flatcar-capo upload`; the worker's OpenStackMachineTemplate
// duplicated with that image and the MachineDeployment pointed at it, as CAPI's docs tell users;
// then CAPI and CAPO replace the worker: a new Machine whose server Nova made from the new image,
// Running, its Node Ready with that server's providerID, and the old Machine, its Node and its
// Nova server gone. fip is the control plane's floating IP (for the guest reports); the old
// worker's console log goes to logDir before it is deleted. It returns
// the CAPO-PROOF line and the registry's pulls from the patch on; the figures go to figure.
func rollOut(t *testing.T, ctx context.Context, imgs *images, cloud *novatest.Cloud, w *watch, wl *workload, nova *openStack,
	fip, logDir string, figure func(format string, args ...any)) (line string, pulls int) {
	t.Helper()
	start := time.Now()
	image := imgs.build(newerVersion)
	name := strings.TrimSuffix(filepath.Base(image), ".qcow2")
	figure("rollout: image %s (stand-in release %s) built in %.0f s", name, newerVersion, time.Since(start).Seconds())
	start = time.Now()
	imageID := uploadImage(t, cloud, image, name)
	figure("rollout: image %s uploaded by `flatcar-capo upload` in %.0f s", imageID, time.Since(start).Seconds())

	// The worker now: one Machine of the MachineDeployment, Running, and its server.
	var old machine
	for _, m := range w.machines() {
		if !m.controlPlane() {
			if old.Metadata.Name != "" {
				t.Fatalf("more than one worker Machine before the rollout (%s, %s):\n%s", old.Metadata.Name, m.Metadata.Name, w.describe())
			}
			old = m
		}
	}
	md := old.Metadata.Labels["cluster.x-k8s.io/deployment-name"]
	if old.Status.Phase != "Running" || md == "" {
		t.Fatalf("want one Running worker Machine of a MachineDeployment before the rollout, have %q (%s, deployment %q):\n%s",
			old.Metadata.Name, old.Status.Phase, md, w.describe())
	}
	oldServerID := strings.TrimPrefix(old.infra.Spec.ProviderID, "openstack:///")
	oldServer := nova.server(oldServerID)
	keepConsole(t, cloud, logDir, oldServerID, oldServer.Name) // the rollout deletes it
	var deployment struct {
		Spec struct {
			Template struct {
				Spec struct{ InfrastructureRef struct{ Name string } }
			}
		}
	}
	w.get("machinedeployments.v1beta2.cluster.x-k8s.io/"+md, &deployment)
	oldTemplate := deployment.Spec.Template.Spec.InfrastructureRef.Name
	current, err := w.m.Kubectl("get", "-n", "default", "openstackmachinetemplates.infrastructure.cluster.x-k8s.io/"+oldTemplate, "-o", "json")
	if err != nil {
		t.Fatalf("kubectl get the worker's OpenStackMachineTemplate %s: %v\n%s", oldTemplate, err, current)
	}
	template := oldTemplate + "-" + strings.ReplaceAll(newerVersion, ".", "-")
	doc, err := newMachineTemplate([]byte(current), template, name)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(imgs.dir, "rollout-template.yaml")
	if err := os.WriteFile(file, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := w.m.Kubectl("create", "-n", "default", "-f", file); err != nil {
		t.Fatalf("the management side refused the new OpenStackMachineTemplate: %v\n%s\n%s", err, out, doc)
	}
	if out, err := w.m.Kubectl("patch", "-n", "default", "machinedeployments.v1beta2.cluster.x-k8s.io/"+md, "--type", "merge", "-p", replaceFirstPatch); err != nil {
		t.Fatalf("patching MachineDeployment %s's rollout strategy: %v\n%s", md, err, out)
	}
	patched := time.Now()
	pullsBefore := imgs.reg.PullRequests() // the build's own preload pulls are before this
	if out, err := w.m.Kubectl("patch", "-n", "default", "machinedeployments.v1beta2.cluster.x-k8s.io/"+md, "--type", "merge", "-p", infraRefPatch(template)); err != nil {
		t.Fatalf("patching MachineDeployment %s to %s: %v\n%s", md, template, err, out)
	}
	t.Logf("rollout: MachineDeployment %s moved from OpenStackMachineTemplate %s to %s (image %s)", md, oldTemplate, template, name)

	// CAPI's rollout, watched as one timeline from the patch.
	seen := map[string]bool{}
	event := func(what string) {
		if !seen[what] {
			seen[what] = true
			figure("rollout: %s %.0f s after the patch", what, time.Since(patched).Seconds())
		}
	}
	var nu machine
	var newNode node
	report := func() string {
		r := w.describe()
		for _, m := range []machine{nu, old} {
			if m.Metadata.Name != "" {
				r += "\n" + wl.guestReport(m, fip)
			}
		}
		return r
	}
	for deadline := patched.Add(60 * time.Minute); ; time.Sleep(10 * time.Second) {
		machines := w.machines()
		oldThere := false
		nu = machine{}
		for _, m := range machines {
			switch {
			case m.controlPlane():
			case m.Metadata.Name == old.Metadata.Name:
				oldThere = true
			case nu.Metadata.Name == "" || m.Status.Phase == "Running":
				nu = m
			}
		}
		if nu.Metadata.Name != "" {
			event("new worker Machine " + nu.Metadata.Name + " created")
			if nu.infra.Status.Ready && nu.infra.Spec.ProviderID != "" {
				event("new worker server ACTIVE (OpenStackMachine ready)")
			}
			if nu.Status.Phase == "Running" {
				event("new worker Machine Running (its Node found)")
			}
		}
		nodeReady := false
		if nu.Status.NodeRef.Name != "" {
			for _, n := range wl.nodes() {
				if n.Metadata.Name == nu.Status.NodeRef.Name && n.ready() {
					event("new node " + n.Metadata.Name + " Ready")
					newNode, nodeReady = n, true
					if !n.tainted(uninitializedTaint) {
						event("new node " + n.Metadata.Name + " initialized by the cloud controller manager")
					}
				}
			}
		}
		if !oldThere {
			event("old worker Machine " + old.Metadata.Name + " deleted")
		}
		serverGone := !oldThere && nova.serverGone(oldServerID)
		if serverGone {
			event("old worker server " + oldServer.Name + " deleted from Nova")
		}
		if nu.Status.Phase == "Running" && nodeReady && !newNode.tainted(uninitializedTaint) && serverGone {
			break
		}
		if msg := w.failure(openStackCluster{}, machines); msg != "" {
			t.Fatalf("the rollout failed: %s\n%s", msg, report())
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("the worker was not replaced within 60 min of the patch (new Machine %q %s, its node Ready %v (uninitialized %v), old Machine there %v):\n%s\n%s",
				nu.Metadata.Name, nu.Status.Phase, nodeReady, newNode.tainted(uninitializedTaint), oldThere, report(), wl.occmReport())
		}
	}

	// What the new worker is, read back from Nova, the management side and the workload cluster.
	id := strings.TrimPrefix(nu.infra.Spec.ProviderID, "openstack:///")
	s := nova.server(id)
	if s.Status != "ACTIVE" || s.Image["id"] != imageID {
		t.Errorf("the new worker's server %s is %s from image %v, want ACTIVE from the new image %s", s.Name, s.Status, s.Image["id"], imageID)
	}
	if s.Flavor["id"] != oldServer.Flavor["id"] || s.KeyName != oldServer.KeyName {
		t.Errorf("the new worker's server %s has flavor %v and key %q, the old one's %v and %q", s.Name, s.Flavor["id"], s.KeyName, oldServer.Flavor["id"], oldServer.KeyName)
	}
	var infra struct {
		Metadata struct{ Annotations map[string]string }
	}
	w.get("openstackmachines.infrastructure.cluster.x-k8s.io/"+nu.infra.Metadata.Name, &infra)
	if from := infra.Metadata.Annotations["cluster.x-k8s.io/cloned-from-name"]; from != template {
		t.Errorf("the new OpenStackMachine %s was cloned from %q, want the new template %s", nu.infra.Metadata.Name, from, template)
	}
	if newNode.Spec.ProviderID != nu.Spec.ProviderID || nu.Spec.ProviderID != "openstack:///"+id {
		t.Errorf("the new node %s has providerID %q, its Machine %q, want openstack:///%s", newNode.Metadata.Name, newNode.Spec.ProviderID, nu.Spec.ProviderID, id)
	}
	for _, n := range wl.nodes() {
		if n.Metadata.Name == old.Status.NodeRef.Name {
			t.Errorf("the old worker's node %s is still in the workload cluster after its Machine was deleted", n.Metadata.Name)
		}
	}
	workers := 0
	for _, m := range w.machines() {
		if !m.controlPlane() {
			workers++
		}
	}
	if workers != 1 {
		t.Errorf("%d worker Machines after the rollout, want the MachineDeployment's one", workers)
	}
	figure("rollout: new worker server %s ACTIVE (launched) %.0f s after Nova's create; replaced %s (server %s) in %.0f s",
		s.Name, s.LaunchedAt.Sub(s.Created).Seconds(), old.Metadata.Name, oldServerID, time.Since(patched).Seconds())
	return fmt.Sprintf("rollout: worker replaced by %s (server %s, image %s) Ready", nu.Metadata.Name, id, name), imgs.reg.PullRequests() - pullsBefore
}

// TestRolloutTemplate: the worker's OpenStackMachineTemplate of the manifest `manifests` renders,
// as `kubectl get -o json` returns it from a server, duplicated by newMachineTemplate with a new
// name and image, and the MachineDeployment patched by the real kubectl with infraRefPatch: the
// result passes `flatcar-capo lint` (CAPI's and CAPO's API types), names the new image where
// CAPO reads it, carries none of the old object's server metadata, and differs from the old
// template in nothing else.
func TestRolloutTemplate(t *testing.T) {
	kubectl := filepath.Join(kubetest.RealNodeDir(t), "kubectl")
	dir := t.TempDir()
	manifest := filepath.Join(dir, "cluster.yaml")
	const oldImage, newImage = "flatcar-stable-" + standin.Version + "-kube-" + kubetest.RealVersion + "-sysext", "flatcar-stable-" + newerVersion + "-kube-" + kubetest.RealVersion + "-sysext"
	testutil.Run(t, "manifests", "--flavor", "sysext-baked", "--api-server-load-balancer=false", "--output-file", manifest,
		"--image-name", oldImage, "--cluster-name", cluster, "--kubernetes-version", kubetest.RealVersion,
		"--set", "WORKER_MACHINE_COUNT=1", "--set", "OPENSTACK_NODE_MACHINE_FLAVOR="+workerFlavor).MustSucceed(t)
	b, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(b), "\n---\n")
	find := func(kind, name string) (int, map[string]any) {
		t.Helper()
		for i, d := range docs {
			var o map[string]any
			if err := yaml.Unmarshal([]byte(d), &o); err != nil {
				t.Fatalf("document %d: %v", i, err)
			}
			if o["kind"] == kind && (name == "" || dig(o, "metadata", "name") == name) {
				return i, o
			}
		}
		t.Fatalf("no %s %q in the manifest", kind, name)
		return 0, nil
	}
	mdAt, md := find("MachineDeployment", "")
	oldName, _ := dig(md, "spec", "template", "spec", "infrastructureRef", "name").(string)
	_, tmpl := find("OpenStackMachineTemplate", oldName)

	// What the API server adds to the object a user reads back.
	served := map[string]any{}
	for k, v := range tmpl {
		served[k] = v
	}
	served["metadata"] = map[string]any{"name": oldName, "namespace": "default", "uid": "0c5e6a4e-1b55-4e1a-9b55-2f3a1c2b9d10",
		"resourceVersion": "4242", "generation": 1, "creationTimestamp": "2026-12-06T03:00:00Z",
		"labels":          map[string]any{"cluster.x-k8s.io/cluster-name": cluster},
		"annotations":     map[string]any{"kubectl.kubernetes.io/last-applied-configuration": "{}"},
		"managedFields":   []any{map[string]any{"manager": "kubectl", "operation": "Apply"}},
		"ownerReferences": []any{map[string]any{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": cluster, "uid": "1"}}}
	served["status"] = map[string]any{}
	current, err := json.Marshal(served)
	if err != nil {
		t.Fatal(err)
	}
	newName := oldName + "-4459-2-1"
	doc, err := newMachineTemplate(current, newName, newImage)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := yaml.Unmarshal(doc, &got); err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	wantMeta := map[string]any{"name": newName, "namespace": "default", "labels": map[string]any{"cluster.x-k8s.io/cluster-name": cluster}}
	if g, _ := json.Marshal(got["metadata"]); string(g) != mustJSON(t, wantMeta) {
		t.Errorf("new template's metadata %s, want only %s (no uid, resourceVersion, managedFields, owner, last-applied)", g, mustJSON(t, wantMeta))
	}
	if _, ok := got["status"]; ok {
		t.Errorf("new template keeps the old one's status")
	}
	if n := dig(got, "spec", "template", "spec", "image", "filter", "name"); n != newImage {
		t.Errorf("new template's image.filter.name is %v, want %s", n, newImage)
	}
	// Nothing else changed: the old spec with the new image name is the new spec.
	dig(tmpl, "spec", "template", "spec", "image", "filter").(map[string]any)["name"] = newImage
	if g, w := mustJSON(t, got["spec"]), mustJSON(t, tmpl["spec"]); g != w {
		t.Errorf("new template's spec\n%s\nwant the old one with the new image\n%s", g, w)
	}

	// The MachineDeployment as `kubectl patch` makes it with infraRefPatch (--local: no server).
	mdFile := filepath.Join(dir, "md.yaml")
	if err := os.WriteFile(mdFile, []byte(docs[mdAt]), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectl, "patch", "--local", "-f", mdFile, "--type", "merge", "-p", infraRefPatch(newName), "-o", "yaml").Output()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		t.Fatalf("kubectl patch --local: %v\n%s", err, ee.Stderr)
	} else if err != nil {
		t.Fatal(err)
	}
	var patched map[string]any
	if err := yaml.Unmarshal(out, &patched); err != nil {
		t.Fatal(err)
	}
	if n := dig(patched, "spec", "template", "spec", "infrastructureRef", "name"); n != newName {
		t.Errorf("patched MachineDeployment's infrastructureRef.name is %v, want %s:\n%s", n, newName, out)
	}
	if g, w := dig(patched, "spec", "template", "spec", "infrastructureRef", "kind"), dig(md, "spec", "template", "spec", "infrastructureRef", "kind"); g != w {
		t.Errorf("patched infrastructureRef kind %v, want %v", g, w)
	}
	docs[mdAt] = strings.TrimSpace(string(out))
	upgraded := filepath.Join(dir, "upgraded.yaml")
	if err := os.WriteFile(upgraded, []byte(strings.Join(append(docs, string(doc)), "\n---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	// Unknown fields are lint's warnings (exit 0): any finding fails.
	res := testutil.Run(t, "lint", "-o", "json", upgraded)
	var lint struct{ Documents, Errors, Warnings int }
	if err := json.Unmarshal([]byte(res.Stdout), &lint); err != nil || res.Code != 0 || lint.Errors+lint.Warnings != 0 || lint.Documents != len(docs)+1 {
		t.Errorf("lint of the upgraded manifest (%d documents) exited %d, %v:\n%s", len(docs)+1, res.Code, err, res.Combined())
	}

	// A template that names its image another way is refused, not half-changed.
	delete(tmpl, "status")
	spec := dig(tmpl, "spec", "template", "spec").(map[string]any)
	spec["image"] = map[string]any{"imageRef": map[string]any{"name": "orc-image"}}
	if _, err := newMachineTemplate([]byte(mustJSON(t, tmpl)), newName, newImage); err == nil || !strings.Contains(err.Error(), "image.filter.name") {
		t.Errorf("a template with image.imageRef: err %v, want one naming image.filter.name", err)
	}
	if _, err := newMachineTemplate([]byte(mustJSON(t, md)), newName, newImage); err == nil {
		t.Errorf("a MachineDeployment taken for a template: no error")
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRolloutImages: one builder makes the proof's image and the newer release's from one
// mirror, registry and build cache; the second is named after the newer release, as
// `build` names images (flatcar-<channel>-<version>-kube-<k8s>-sysext), recorded as built from
// that release (its .build.json), and READY for openstack.
// The loop's opt-in: building the first image takes minutes.
func TestRolloutImages(t *testing.T) {
	testutil.RequireOptIn(t, proofEnv, "the CAPO loop's two images (make capo-proof)")
	testutil.RequireTools(t, "qemu-img", "mmdebstrap", "docker-registry")
	dir := t.TempDir()
	start := time.Now()
	imgs := newImages(t, dir)
	t.Logf("mirror and registry (kubeadm's images pushed) ready in %.0f s", time.Since(start).Seconds())
	start = time.Now()
	first := imgs.build(standin.Version)
	t.Logf("first image %s built in %.0f s", filepath.Base(first), time.Since(start).Seconds())
	start = time.Now()
	second := imgs.build(newerVersion)
	t.Logf("second image %s built in %.0f s", filepath.Base(second), time.Since(start).Seconds())
	for _, c := range []struct{ image, version string }{{first, standin.Version}, {second, newerVersion}} {
		if want := "flatcar-stable-" + c.version + "-kube-" + kubetest.RealVersion + "-sysext.qcow2"; filepath.Base(c.image) != want {
			t.Errorf("image %s, want %s", c.image, want)
		}
		if res := testutil.Run(t, "inspect", c.image, "--for", "openstack"); res.Code != 0 {
			t.Errorf("inspect %s --for openstack exited %d:\n%s", c.image, res.Code, res.Combined())
		}
		var rec struct{ FlatcarVersion, ImageName string }
		b, err := os.ReadFile(c.image + ".build.json")
		if err != nil || json.Unmarshal(b, &rec) != nil || rec.FlatcarVersion != c.version || rec.ImageName+".qcow2" != filepath.Base(c.image) {
			t.Errorf("build record of %s: %v %+v, want release %s", c.image, err, rec, c.version)
		}
	}
}
