//go:build image

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"
	"gopkg.in/yaml.v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/kubetest"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"github.com/flatcar-capo/flatcar-capo/pkg/glance"
	"github.com/flatcar-capo/flatcar-capo/pkg/kubernetes"
)

// TestKubernetesExamplesInImage (make test-image): examples/kubernetes' Job and CronJob run their
// container as the kubelet would, with podman: the image reference the user sets
// (kustomization.yaml's newName:newTag, which the README's `kubectl set image` gives job.yaml too)
// naming the plain image loaded from bin/image.tar, the Pod's user, group and fsGroup, a read-only
// root, no capabilities, no privilege escalation, the emptyDir /work, the ConfigMap and the
// clouds.yaml Secret mounted read-only, the container's env and args. Both build with the sysext
// method, downloading and verifying the current release, against the stand-ins (set as extra
// FLATCAR_CAPO_* variables, as a user adds mirrors) and upload to the real Glance: job.yaml the
// current release with Kubernetes 1.36 to east and west, then the CronJob's plan --build what east
// still lacks (1.35).
func TestKubernetesExamplesInImage(t *testing.T) {
	testutil.RequireTools(t, "podman", "uwsgi", "keystone-manage", "glance-api", "mkfs.ext4", "mkfs.btrfs")
	testutil.RequireRoot(t, "rootful podman")
	ex := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "examples", "kubernetes", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var kust struct {
		Images []struct {
			Name    string `yaml:"name"`
			NewName string `yaml:"newName"`
			NewTag  string `yaml:"newTag"`
		} `yaml:"images"`
	}
	if err := yaml.Unmarshal(ex("kustomization.yaml"), &kust); err != nil || len(kust.Images) != 1 || kust.Images[0].NewName == "" || kust.Images[0].NewTag == "" {
		t.Fatalf("kustomization.yaml: %v %+v", err, kust)
	}
	userRef := kust.Images[0].NewName + ":" + kust.Images[0].NewTag
	archive := filepath.Join(testutil.RepoRoot(), "bin", "image.tar")
	if out, err := exec.Command("podman", "load", "-i", archive).CombinedOutput(); err != nil {
		t.Fatalf("podman load: %v\n%s(run make image first; make test-image does)", err, out)
	}
	if out, err := exec.Command("podman", "tag", "localhost/flatcar-capo:latest", userRef).CombinedOutput(); err != nil {
		t.Fatalf("podman tag: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("podman", "rmi", userRef).Run() })

	var job batchv1.Job
	if err := sigsyaml.UnmarshalStrict(ex("job.yaml"), &job); err != nil {
		t.Fatal(err)
	}
	var cron batchv1.CronJob
	var fleetYAML string
	for _, doc := range strings.Split(string(ex("cronjob.yaml")), "\n---\n") {
		var meta struct{ Kind string }
		sigsyaml.Unmarshal([]byte(doc), &meta)
		switch meta.Kind {
		case "CronJob":
			if err := sigsyaml.UnmarshalStrict([]byte(doc), &cron); err != nil {
				t.Fatal(err)
			}
		case "ConfigMap":
			var cm corev1.ConfigMap
			if err := sigsyaml.UnmarshalStrict([]byte(doc), &cm); err != nil {
				t.Fatal(err)
			}
			fleetYAML = cm.Data["fleet.yaml"]
		}
	}

	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	stack := testutil.StartOpenStack(t, filepath.Join(dir, "openstack"))
	// The examples ask for Kubernetes 1.35 and 1.36: each minor's latest patch.
	mirror := kubetest.New(t, kubernetes.Options{Kubernetes: "v1.36.1"})
	mirror.AddVersion("v1.35.4")
	mirror.SetMarker("stable-1.35.txt", []byte("v1.35.4\n"))
	si := newStandIns(t, dir, mirror)
	version := releaseVersion

	// The Secret: the examples' clouds east and west, two regions of the local cloud.
	var cfg struct {
		Clouds map[string]any `yaml:"clouds"`
	}
	b, err := os.ReadFile(stack().CloudsYAML)
	if err != nil || yaml.Unmarshal(b, &cfg) != nil {
		t.Fatalf("clouds.yaml: %v", err)
	}
	secret := filepath.Join(dir, "secret")
	os.Mkdir(secret, 0o755)
	out, _ := yaml.Marshal(map[string]any{"clouds": map[string]any{"east": cfg.Clouds["local"], "west": cfg.Clouds["local-two"]}})
	os.WriteFile(filepath.Join(secret, "clouds.yaml"), out, 0o644)
	configMap := filepath.Join(dir, "configmap")
	os.Mkdir(configMap, 0o755)
	os.WriteFile(filepath.Join(configMap, "fleet.yaml"), []byte(fleetYAML), 0o644)
	// runPod runs the pod's one container as the kubelet would; the volumes are mounted by name.
	runPod := func(name string, spec corev1.PodSpec, image string) string {
		t.Helper()
		c := spec.Containers[0]
		sc, psc := c.SecurityContext, spec.SecurityContext
		args := []string{"run", "--rm", "--network", "host", "--user", fmt.Sprintf("%d:%d", *psc.RunAsUser, *psc.RunAsGroup),
			"--group-add", fmt.Sprint(*psc.FSGroup), "-v", si.mount()}
		if sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem {
			args = append(args, "--read-only")
		}
		if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
			args = append(args, "--security-opt", "no-new-privileges")
		}
		for _, d := range sc.Capabilities.Drop {
			args = append(args, "--cap-drop", string(d))
		}
		vols := map[string]corev1.Volume{}
		for _, v := range spec.Volumes {
			vols[v.Name] = v
		}
		for _, m := range c.VolumeMounts {
			v := vols[m.Name]
			var src string
			switch {
			case v.EmptyDir != nil: // the kubelet gives an emptyDir to the fsGroup, setgid
				src = filepath.Join(t.TempDir(), "emptydir")
				os.Mkdir(src, 0o2775)
				os.Chown(src, 0, int(*psc.FSGroup))
				os.Chmod(src, 0o2775|os.ModeSetgid)
			case v.Secret != nil:
				src = secret
			case v.ConfigMap != nil:
				src = configMap
			default:
				t.Fatalf("%s: volume %s of a kind this test does not mount", name, m.Name)
			}
			opt := ""
			if m.ReadOnly {
				opt = ":ro"
			}
			args = append(args, "-v", src+":"+m.MountPath+opt)
		}
		for _, e := range c.Env {
			args = append(args, "-e", e.Name+"="+e.Value)
		}
		for k, v := range si.env() {
			args = append(args, "-e", k+"="+v)
		}
		if len(c.Command) > 0 {
			args = append(args, "--entrypoint", c.Command[0])
		}
		args = append(append(args, image), c.Args...)
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "podman", podmanRun(args)...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s in %s: %v\n%s", name, image, err, out)
		}
		return string(out)
	}
	// The user's reference: kustomize replaces the name kustomization.yaml lists; `kubectl set
	// image build=REF` the job's container's image.
	for _, spec := range []corev1.PodSpec{job.Spec.Template.Spec, cron.Spec.JobTemplate.Spec.Template.Spec} {
		if spec.Containers[0].Image != kust.Images[0].Name {
			t.Fatalf("the examples' image is %q, not the name kustomization.yaml sets", spec.Containers[0].Image)
		}
	}
	t.Logf("job.yaml:\n%s", runPod("job.yaml", job.Spec.Template.Spec, userRef))
	t.Logf("cronjob.yaml:\n%s", runPod("cronjob.yaml", cron.Spec.JobTemplate.Spec.Template.Spec, userRef))

	// job.yaml built 1.36 for east and west; the CronJob's plan --build 1.35 (1.36 was there) for east.
	glanceHas := func(cloud, name string) bool {
		t.Helper()
		t.Setenv("OS_CLIENT_CONFIG_FILE", filepath.Join(secret, "clouds.yaml"))
		c, err := glance.Connect(context.Background(), cloud)
		if err != nil {
			t.Fatal(err)
		}
		pages, err := images.List(c.Image, images.ListOpts{Name: name}).AllPages(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		imgs, _ := images.ExtractImages(pages)
		return len(imgs) == 1 && imgs[0].Status == images.ImageStatusActive
	}
	for _, w := range []struct{ cloud, kube string }{{"east", "v1.36.1"}, {"west", "v1.36.1"}, {"east", "v1.35.4"}} {
		if name := "flatcar-stable-" + version + "-kube-" + w.kube + "-sysext"; !glanceHas(w.cloud, name) {
			t.Errorf("%s has no active image %s", w.cloud, name)
		}
	}
}
