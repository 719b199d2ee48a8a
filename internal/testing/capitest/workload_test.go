package capitest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const specsManifest = `apiVersion: controlplane.cluster.x-k8s.io/v1beta2
kind: KubeadmControlPlane
metadata: {name: p}
spec:
  kubeadmConfigSpec:
    clusterConfiguration:
      controllerManager:
        extraArgs:
        - {name: cloud-provider, value: external}
        - {name: leader-elect-lease-duration, value: 15s}
    files:
    - {path: /etc/ours, content: x}
---
apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
kind: KubeadmConfigTemplate
metadata: {name: p-md-0}
spec:
  template:
    spec: {format: ignition}
---
apiVersion: v1
kind: Secret
metadata: {name: s}
`

// AddToSpecs adds the user's files and logins after the manifest's own, to the right spec each.
func TestAddToSpecs(t *testing.T) {
	f := filepath.Join(t.TempDir(), "m.yaml")
	if err := os.WriteFile(f, []byte(specsManifest), 0o600); err != nil {
		t.Fatal(err)
	}
	cp := Additions{Files: map[string]string{"/etc/b": "B", "/etc/a": "A"}, Users: []User{{Name: "u", SSHKey: "ssh-ed25519 K\n", Groups: "sudo"}},
		ExtraArgs: map[string]map[string]string{"controllerManager": {"leader-elect-lease-duration": "60s"}, "scheduler": {"v": "2"}}}
	if err := AddToSpecs(f, cp, Additions{Files: map[string]string{"/etc/w": "W"}, PreKubeadmCommands: []string{"echo w"}}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(f)
	docs, err := splitDocs(b)
	if err != nil || len(docs) != 3 {
		t.Fatalf("%d documents, %v:\n%s", len(docs), err, b)
	}
	cpSpec := fmt.Sprint(docs[0]["spec"])
	for _, want := range []string{"path:/etc/ours", "path:/etc/a", "path:/etc/b", "sshAuthorizedKeys:[ssh-ed25519 K]", "groups:sudo"} {
		if !strings.Contains(cpSpec, want) {
			t.Errorf("the KubeadmControlPlane's spec lacks %s: %s", want, cpSpec)
		}
	}
	cc := fmt.Sprint(docs[0]["spec"].(map[string]any)["kubeadmConfigSpec"].(map[string]any)["clusterConfiguration"])
	if want := "map[controllerManager:map[extraArgs:[map[name:cloud-provider value:external] map[name:leader-elect-lease-duration value:60s]]] scheduler:map[extraArgs:[map[name:v value:2]]]]"; cc != want {
		t.Errorf("v1beta2 clusterConfiguration:\n%s\nwant\n%s", cc, want)
	}
	if w := fmt.Sprint(docs[1]["spec"]); !strings.Contains(w, "path:/etc/w") || strings.Contains(w, "users") || !strings.Contains(w, "format:ignition") ||
		!strings.Contains(w, "preKubeadmCommands:[echo w]") {
		t.Errorf("the KubeadmConfigTemplate's spec: %s", w)
	}
	// v1beta1: extraArgs is a map.
	v1 := strings.Replace(strings.ReplaceAll(specsManifest, "/v1beta2", "/v1beta1"),
		"extraArgs:\n        - {name: cloud-provider, value: external}\n        - {name: leader-elect-lease-duration, value: 15s}",
		"extraArgs: {cloud-provider: external, leader-elect-lease-duration: 15s}", 1)
	if err := os.WriteFile(f, []byte(v1), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := AddToSpecs(f, cp, Additions{}); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(f)
	if docs, err = splitDocs(b); err != nil {
		t.Fatal(err)
	}
	cc = fmt.Sprint(docs[0]["spec"].(map[string]any)["kubeadmConfigSpec"].(map[string]any)["clusterConfiguration"])
	if want := "map[controllerManager:map[extraArgs:map[cloud-provider:external leader-elect-lease-duration:60s]] scheduler:map[extraArgs:map[v:2]]]"; cc != want {
		t.Errorf("v1beta1 clusterConfiguration:\n%s\nwant\n%s", cc, want)
	}
	if err := AddToSpecs(f+".none", cp, cp); err == nil {
		t.Error("a missing manifest was accepted")
	}
	if err := os.WriteFile(f, []byte("kind: Secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := AddToSpecs(f, cp, cp); err == nil || !strings.Contains(err.Error(), "want one KubeadmControlPlane") {
		t.Errorf("a manifest without the specs: %v", err)
	}
}

// The routes' proxy tunnels CONNECT to a routed address into its 127.0.0.1 target, and refuses
// any other address.
func TestRoutes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.WriteString(c, "hello from the guest\n"); c.Close() }()
		}
	}()
	proxy, err := startRoutes(t, map[string]string{"10.26.0.10:6443": ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(proxy)
	connect := func(addr string) (string, string) {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", addr, addr)
		r := bufio.NewReader(c)
		resp, err := http.ReadResponse(r, &http.Request{Method: http.MethodConnect})
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			return resp.Status, ""
		}
		line, _ := r.ReadString('\n')
		return resp.Status, line
	}
	if status, got := connect("10.26.0.10:6443"); got != "hello from the guest\n" {
		t.Errorf("the routed address: %s %q", status, got)
	}
	if status, _ := connect("10.26.0.11:6443"); !strings.HasPrefix(status, "403") {
		t.Errorf("an unrouted address: %s, want 403", status)
	}
}
