package kubetest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/filelock"
)

// TestRealNodeDirWaitsOnlyForTheNodeBinaries: while scripts/install-kubernetes.sh holds its lock,
// RealNodeDir returns as soon as kubeadm, kubelet, kubectl and the CNI plugins are in place (the
// build goes on with etcd and CoreDNS), not when the lock is let go.
func TestRealNodeDirWaitsOnlyForTheNodeBinaries(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	top := filepath.Join(cache, "flatcar-capo", "kubernetes")
	dir := filepath.Join(top, RealVersion)
	if err := os.MkdirAll(filepath.Join(dir, "cni"), 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.Create(filepath.Join(top, buildLock))
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if ok, err := filelock.TryLock(lock, filelock.Exclusive); !ok || err != nil {
		t.Fatalf("lock: %v %v", ok, err)
	}
	got := make(chan string, 1)
	go func() { got <- RealNodeDir(t) }()
	time.Sleep(time.Second)
	select {
	case d := <-got:
		t.Fatalf("RealNodeDir returned %s before the node binaries were built", d)
	default:
	}
	for _, b := range nodeBinaries {
		if err := os.WriteFile(filepath.Join(dir, b), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case d := <-got:
		if d != dir {
			t.Errorf("RealNodeDir = %s, want %s", d, dir)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("RealNodeDir still waits for the lock though the node binaries are there")
	}
}
