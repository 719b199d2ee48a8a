package imagebuild

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/packer-plugin-sdk/multistep"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/glancetest"
	"github.com/flatcar-capo/flatcar-capo/pkg/digest"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/ignition"
	"github.com/flatcar-capo/flatcar-capo/pkg/packer"
	"github.com/flatcar-capo/flatcar-capo/pkg/record"
	"github.com/flatcar-capo/flatcar-capo/pkg/release"
)

var testRelease = release.Release{Channel: "stable", Version: "4459.2.0", Arch: "amd64"}

// Unit tests of the packer, reuse and upload steps' failure paths: packer is a scripted
// scriptedPacker, Glance the in-process glancetest fake; no VM, no packer, no OpenStack.

// stepState is a state bag as the steps before the one under test leave it.
func stepState(t *testing.T, o *Options) (multistep.StateBag, string) {
	t.Helper()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	state := new(multistep.BasicStateBag)
	keyOptions.put(state, o)
	keyRecord.put(state, newRecord(o))
	keyWorkDir.put(state, dir)
	write := func(name string, size int64) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if size > 0 {
			if err := os.Truncate(p, size); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	setWorkFile(state, write("work.raw", 64<<20))
	keyVM.put(state, vmFiles{user: ignition.DefaultUser, key: write("build_ed25519", 0), ignition: write("config.ign", 0)})
	for _, f := range packer.PayloadFiles {
		write(filepath.Join("payload", f), 0)
	}
	keyPayload.put(state, filepath.Join(dir, "payload"))
	return state, dir
}

// fakeQEMU puts stand-ins for qemu-system-x86_64 and qemu-img on PATH (the probe only looks
// them up; --accelerator tcg skips the KVM probe).
func fakeQEMU(t *testing.T) {
	t.Helper()
	bin := t.TempDir()
	for _, name := range []string{"qemu-system-x86_64", "qemu-img"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// writesImage is a packer build that leaves the raw image where the packer step expects it.
func writesImage(ctx context.Context, inv packer.Invocation) error {
	out := filepath.Join(filepath.Dir(inv.Dir), "packer-output")
	if err := os.MkdirAll(out, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "image.raw"), []byte("raw"), 0o600)
}

func stepError(t *testing.T, state multistep.StateBag) error {
	t.Helper()
	err := keyError.get(state)
	if err == nil {
		t.Fatal("the step halted without an error")
	}
	return err
}

// The preflight probes packer (version, plugins, QEMU, accelerator) and the packer step builds
// with what it found: `packer version` runs once per build, not twice.
func TestPackerProbedOncePerBuild(t *testing.T) {
	fakeQEMU(t)
	d := &scriptedPacker{Version: "Packer v1.6.6", Build: writesImage}
	o := &Options{Method: MethodPacker, Accelerator: "tcg", driver: d, Release: testRelease}
	state, _ := stepState(t, o)
	line, err := packerMethod{}.Preflight(context.Background(), o, state)
	if err != nil || !strings.Contains(line, "packer 1.6.6") {
		t.Fatalf("preflight: %q, %v", line, err)
	}
	if a := (&stepPacker{}).Run(context.Background(), state); a != multistep.ActionContinue {
		t.Fatalf("packer step halted: %v", keyError.get(state))
	}
	if n := d.Count("version"); n != 1 {
		t.Fatalf("`packer version` ran %d times in one build, want 1", n)
	}
	if d.Count("validate") != 1 || d.Count("build") != 1 {
		t.Fatalf("validate %d, build %d", d.Count("validate"), d.Count("build"))
	}
	if raw := keyWorkFile.get(state); filepath.Base(filepath.Dir(raw)) != "packer-output" || buildRecord(state).Tools.Packer != "1.6.6" {
		t.Fatalf("raw %q, tools %+v", raw, buildRecord(state).Tools)
	}
}

// Every way packer can fail halts the step with a message that says what failed and where the
// full log is, and leaves no output directory.
func TestPackerStepFailures(t *testing.T) {
	fakeQEMU(t)
	cases := []struct {
		name  string
		build func(ctx context.Context, inv packer.Invocation) error
		want  []string
	}{
		{"exit code", func(ctx context.Context, inv packer.Invocation) error {
			inv.Stdout("1700000000,,ui,error,Build 'qemu.flatcar' errored: Timeout waiting for SSH.")
			return &packer.ExitError{Args: inv.Args, Code: 1}
		}, []string{"packer build failed: Build 'qemu.flatcar' errored: Timeout waiting for SSH.", "exit code 1", "full packer log: "}},
		{"no image", func(ctx context.Context, inv packer.Invocation) error { return nil },
			[]string{"packer build finished but wrote no", "image.raw"}},
		{"sysprep", func(ctx context.Context, inv packer.Invocation) error {
			if err := writesImage(ctx, inv); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(inv.Dir, "serial.log"), []byte("boot\nflatcar-capo sysprep: ERROR could not remove core\n"), 0o600)
		}, []string{"the build VM reported at shutdown: flatcar-capo sysprep: ERROR could not remove core", "serial.log"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := &scriptedPacker{Version: "Packer v1.12.0", Plugins: "github.com/hashicorp/qemu/packer-plugin-qemu_v1.0.9_x5.0_linux_amd64", Build: c.build}
			o := &Options{Method: MethodPacker, Accelerator: "tcg", driver: d, Release: testRelease}
			state, dir := stepState(t, o)
			if a := (&stepPacker{}).Run(context.Background(), state); a != multistep.ActionHalt {
				t.Fatal("the packer step did not halt")
			}
			err := stepError(t, state)
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if keyLogFile.get(state) == "" {
				t.Error("no log file named for the failure")
			}
			if _, err := os.Stat(filepath.Join(dir, "packer-output")); !os.IsNotExist(err) {
				t.Errorf("the output directory is left: %v", err)
			}
		})
	}
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		d := &scriptedPacker{Version: "Packer v1.6.6", Build: func(ctx context.Context, inv packer.Invocation) error {
			cancel()
			return ctx.Err()
		}}
		o := &Options{Method: MethodPacker, Accelerator: "tcg", driver: d, Release: testRelease}
		state, _ := stepState(t, o)
		if a := (&stepPacker{}).Run(ctx, state); a != multistep.ActionHalt || !errors.Is(stepError(t, state), context.Canceled) {
			t.Fatalf("cancelled build: %v", keyError.get(state))
		}
	})
	t.Run("no packer", func(t *testing.T) {
		d := &scriptedPacker{Version: "Packer v1.5.0"}
		o := &Options{Method: MethodPacker, Accelerator: "tcg", driver: d, Release: testRelease}
		state, _ := stepState(t, o)
		if _, err := (packerMethod{}).Preflight(context.Background(), o, state); !errors.Is(err, packer.ErrMissingPacker) {
			t.Fatalf("packer 1.5.0: %v", err)
		}
		d = &scriptedPacker{Version: "Packer v1.11.2"}
		o.driver = d
		if _, err := (packerMethod{}).Preflight(context.Background(), o, state); !errors.Is(err, packer.ErrMissingPlugin) {
			t.Fatalf("packer 1.11.2 without its QEMU plugin: %v", err)
		}
	})
}

// The reuse step reuses only a finished artifact whose record has these inputs and whose sha512
// still matches; every other case rebuilds, and says why.
func TestReuseStepRebuildsUnlessEverythingMatches(t *testing.T) {
	o := &Options{Method: MethodPacker, Release: testRelease, OutputDir: t.TempDir()}
	artifact := filepath.Join(o.OutputDir, "image.qcow2")
	run := func(t *testing.T, key string) (multistep.StateBag, string) {
		t.Helper()
		state, _ := stepState(t, o)
		keyArtifact.put(state, artifact)
		buildRecord(state).InputsKey = key
		step := &stepReuse{}
		defer step.Cleanup(state) // releases the artifact lock the step takes
		if a := step.Run(context.Background(), state); a != multistep.ActionContinue {
			t.Fatalf("the reuse step halted: %v", keyError.get(state))
		}
		return state, keyNote.get(state)
	}
	if _, n := run(t, "k1"); n != "no finished artifact; building" {
		t.Fatalf("no artifact: %q", n)
	}
	if err := os.WriteFile(artifact, []byte("qcow2 bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, n := run(t, "k1"); !strings.Contains(n, "has no valid build record") {
		t.Fatalf("no record: %q", n)
	}
	sum, size, _ := digest.SHA512(artifact)
	old := &record.Record{InputsKey: "k1", Artifacts: []record.Artifact{{File: "image.qcow2", Bytes: size, SHA512: sum}}, Tools: record.Tools{Packer: "1.6.6"}}
	if err := old.Write(artifact); err != nil {
		t.Fatal(err)
	}
	if _, n := run(t, "k2"); !strings.Contains(n, "was built from other inputs; rebuilding") {
		t.Fatalf("other inputs: %q", n)
	}
	// A record without nodeFiles (an older flatcar-capo's) rebuilds and says so; other node
	// files (a changed kubeadm drop-in) rebuild too.
	runWith := func(t *testing.T, nodeFiles string) string {
		t.Helper()
		state, _ := stepState(t, o)
		keyArtifact.put(state, artifact)
		buildRecord(state).InputsKey, buildRecord(state).Inputs.NodeFiles = "k2", nodeFiles
		step := &stepReuse{}
		defer step.Cleanup(state)
		step.Run(context.Background(), state)
		return keyNote.get(state)
	}
	if n := runWith(t, "sha256:new"); !strings.Contains(n, "from an older flatcar-capo, does not name the node files") || !strings.HasSuffix(n, "rebuilding") {
		t.Fatalf("older record: %q", n)
	}
	old.Inputs.NodeFiles = "sha256:old"
	if err := old.Write(artifact); err != nil {
		t.Fatal(err)
	}
	if n := runWith(t, "sha256:new"); !strings.Contains(n, "node files changed") {
		t.Fatalf("other node files: %q", n)
	}
	state, n := run(t, "k1")
	if !keyReused.get(state) || !strings.Contains(n, "reusing") || buildRecord(state).Tools.Packer != "1.6.6" {
		t.Fatalf("matching artifact: reused %v, %q, %+v", keyReused.get(state), n, buildRecord(state).Tools)
	}
	o.Force = true
	if state, n := run(t, "k1"); keyReused.get(state) || n != "--force: rebuilding" {
		t.Fatalf("--force: %q", n)
	}
	o.Force = false
	if err := os.WriteFile(artifact, []byte("qcow2 bytez"), 0o644); err != nil {
		t.Fatal(err)
	}
	if state, n := run(t, "k1"); keyReused.get(state) || !strings.Contains(n, "does not match its record (sha512)") {
		t.Fatalf("changed artifact: %q", n)
	}
}

// The upload step: a cloud that is not configured is the caller's mistake (exit 2), a damaged
// transfer fails naming the cloud and records no Glance ID, a good one records it.
func TestUploadStepFailures(t *testing.T) {
	good, bad := glancetest.New(t), glancetest.New(t)
	bad.Damage(true)
	glancetest.CloudsYAML(t, good, bad)
	artifact := filepath.Join(t.TempDir(), "image.qcow2")
	if err := os.WriteFile(artifact, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, clouds ...string) (multistep.StateBag, multistep.StepAction) {
		t.Helper()
		o := &Options{Method: MethodPacker, Release: testRelease, Clouds: clouds, ImageName: "flatcar-test"}
		state, _ := stepState(t, o)
		keyArtifact.put(state, artifact)
		return state, (&stepUpload{}).Run(context.Background(), state)
	}
	if state, a := run(t); a != multistep.ActionContinue || keyNote.get(state) != "no --cloud: not uploaded" {
		t.Fatalf("no cloud: %v %q", a, keyNote.get(state))
	}
	state, a := run(t, "nosuchcloud")
	if err := stepError(t, state); a != multistep.ActionHalt || !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), `cloud "nosuchcloud" is not defined`) {
		t.Fatalf("unknown cloud: %v", err)
	}
	state, a = run(t, "fake1")
	if err := stepError(t, state); a != multistep.ActionHalt || errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "hash mismatch") || len(buildRecord(state).Glance) != 0 {
		t.Fatalf("damaged upload: %v, glance %+v", err, buildRecord(state).Glance)
	}
	if _, err := record.Read(artifact); err == nil {
		t.Fatal("a failed upload wrote the record")
	}
	state, a = run(t, "fake0")
	if a != multistep.ActionContinue || len(buildRecord(state).Glance) != 1 || buildRecord(state).Glance[0].Action != "uploaded" {
		t.Fatalf("good upload: %v, %+v", keyError.get(state), buildRecord(state).Glance)
	}
	if rec, err := record.Read(artifact); err != nil || len(rec.Glance) != 1 || rec.Glance[0].ID != buildRecord(state).Glance[0].ID {
		t.Fatalf("record after the upload: %+v, %v", rec, err)
	}
	if got := good.Named("flatcar-test"); len(got) != 1 {
		t.Fatalf("images in the good cloud: %v", got)
	}
}
