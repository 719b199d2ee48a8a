package packer

import (
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestParseLine(t *testing.T) {
	l, ok := parseLine(`1764565000,qemu.flatcar,ui,say,==> qemu.flatcar: Waiting for SSH%!(PACKER_COMMA) port 3344\n  second line`)
	if !ok {
		t.Fatal("a machine-readable ui line was not recognised")
	}
	want := line{Timestamp: 1764565000, Target: "qemu.flatcar", Type: "ui",
		Data: []string{"say", "==> qemu.flatcar: Waiting for SSH, port 3344\n  second line"}}
	if !reflect.DeepEqual(l, want) {
		t.Fatalf("ParseLine = %#v, want %#v", l, want)
	}
	if kind, text, ok := l.UI(); !ok || kind != "say" || !strings.HasPrefix(text, "==> qemu.flatcar: Waiting for SSH, port") {
		t.Fatalf("UI() = %q %q %v", kind, text, ok)
	}
	l, ok = parseLine("1764565001,,artifact-count,1")
	if !ok || l.Target != "" || l.Type != "artifact-count" || !reflect.DeepEqual(l.Data, []string{"1"}) {
		t.Fatalf("global line = %#v %v", l, ok)
	}
	if _, _, ok := l.UI(); ok {
		t.Error("artifact-count taken for a ui line")
	}
	for _, plain := range []string{"", "Error: Failed to prepare build", "abc,qemu,ui,say,x", "12,x"} {
		if l, ok := parseLine(plain); ok {
			t.Errorf("ParseLine(%q) = %#v, want not machine-readable", plain, l)
		}
	}
}

func TestCondenserKeepsUILinesAndErrors(t *testing.T) {
	var got []string
	c := &condenser{log: lineWriter(func(s string) { got = append(got, s) })}
	for _, s := range []string{
		`1,,ui,say,qemu.flatcar: output will be in this color.`,
		`2,qemu.flatcar,ui,message,    qemu.flatcar: installed: kubeadm%!(PACKER_COMMA) kubelet\n\n`,
		`3,qemu.flatcar,artifact,0,id,`,
		`4,qemu.flatcar,ui,error,Build 'qemu.flatcar' errored after 1 minute: Timeout waiting for SSH.`,
		`5,qemu.flatcar,ui,error,--> qemu.flatcar: Timeout waiting for SSH.`,
		`5,,error-count,1`,
		`Error: plain text`,
	} {
		c.line(s)
	}
	want := []string{
		"qemu.flatcar: output will be in this color.",
		"    qemu.flatcar: installed: kubeadm, kubelet",
		"Build 'qemu.flatcar' errored after 1 minute: Timeout waiting for SSH.",
		"--> qemu.flatcar: Timeout waiting for SSH.",
		"Error: plain text",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("condensed lines:\n%q\nwant\n%q", got, want)
	}
	err := c.failure("packer build", &ExitError{Args: []string{"build"}, Code: 1}, "/w/packer.log")
	want1 := "packer build failed: Build 'qemu.flatcar' errored after 1 minute: Timeout waiting for SSH. (exit code 1); full packer log: /w/packer.log"
	if err.Error() != want1 {
		t.Errorf("failure message\n%s\nwant\n%s", err, want1)
	}
	// packer validate prints plain text: that is the message then.
	c = &condenser{log: io.Discard}
	c.line("Error: Unsupported argument")
	c.line(`  on x.pkr.hcl line 3: An argument named "foo" is not expected here.`)
	err = c.failure("packer validate", &ExitError{Code: 1}, "/w/packer.log")
	if !strings.Contains(err.Error(), `Error: Unsupported argument on x.pkr.hcl line 3: An argument named "foo"`) {
		t.Errorf("validate failure message: %v", err)
	}
}
