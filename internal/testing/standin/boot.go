package standin

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flatcar-capo/flatcar-capo/internal/testing/qemuboot"
	"github.com/flatcar-capo/flatcar-capo/internal/testing/testutil"
	"golang.org/x/crypto/ssh"
)

// fwCfgName is where Flatcar's Ignition reads its config on QEMU.
const fwCfgName = "opt/org.flatcar-linux/config"

// BootOptions describe one boot of the guest.
type BootOptions struct {
	Ignition    []byte // Ignition config passed through QEMU fw_cfg (FwCfgName)
	ConfigDrive string // a config-2 image (ISO 9660 or vfat), attached read-only as a virtio disk
	UEFI        bool   // OVMF instead of SeaBIOS
	Snapshot    bool   // the guest's writes go to a throwaway overlay, not to the image
	User        string // SSH user; default TestUserName
	Key         string // SSH private key file (TestUser's); required for SSH
	Timeout     time.Duration
	Memory      int // MiB; default 1024
	CPUs        int // vCPUs; default 1 (kubeadm's control plane wants 2)
	// Isolated: QEMU's user network with restrict=on, so the guest reaches nothing on the host
	// (no registry, no mirror); SSH still comes in through the port forward. IPv4 only.
	Isolated bool
	// MetadataService is a 127.0.0.1:PORT HTTP server the guest reaches as the OpenStack metadata
	// service, http://169.254.169.254 (Ignition's and coreos-metadata's fallback when there is no
	// config drive). QEMU's user network then is 169.254.169.0/24 (guest 169.254.169.15, host
	// .2, DNS .3): QEMU refuses a guestfwd to 169.254.169.254 from its default 10.0.2.0/24.
	MetadataService string
	// Peer adds a second NIC on a network this guest shares only with other guests (QEMU's
	// socket netdev over 127.0.0.1: an Ethernet between the QEMU processes, the host not on it).
	Peer *PeerNet
	// Forwards are more of the host's 127.0.0.1 ports led to the guest's (QEMU hostfwd, as
	// SSH's), e.g. a control plane's API server for the management side.
	Forwards []Forward
}

// Forward leads the host's 127.0.0.1:Host to the guest's port Guest on its user network.
type Forward struct{ Host, Guest int }

// PeerNet is one guest's end of a guest-only network: the first guest listens on Port, the
// others connect to it. No DHCP there: the guest's config gives the NIC (by MAC) its address.
type PeerNet struct {
	Port   int
	Listen bool
	MAC    string // e.g. 52:54:00:26:00:10
}

// UserNetMAC is the MAC of every guest's first NIC (QEMU's user network, SSH's way in), so a
// guest's network config can tell it from a Peer NIC.
const UserNetMAC = "52:54:00:12:34:56"

// Guest is a running VM.
type Guest struct {
	Image     string
	SSHPort   int
	SerialLog string // file with the console output

	opts   BootOptions
	cmd    *exec.Cmd
	done   chan struct{} // closed when QEMU has exited
	err    error         // QEMU's exit, valid after done
	client *ssh.Client
	mu     sync.Mutex
}

// Boot boots image under QEMU TCG and waits until SSH accepts opts.Key (when given). QEMU is
// killed when the test ends; failures show the tail of the serial log.
func Boot(t testing.TB, image string, opts BootOptions) *Guest {
	t.Helper()
	testutil.RequireTools(t, "qemu-system-x86_64")
	start := time.Now()
	g, err := Start(context.Background(), image, t.TempDir(), opts)
	if g != nil {
		t.Cleanup(func() {
			g.Kill()
			if t.Failed() {
				keep := filepath.Join(os.TempDir(), "standin-"+strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())+"-serial.log")
				if os.WriteFile(keep, g.Log(), 0o644) == nil {
					t.Logf("standin: serial log kept in %s", keep)
				}
			}
		})
	}
	if err != nil {
		t.Fatalf("standin: %v", err)
	}
	t.Logf("standin: %s up, SSH on 127.0.0.1:%d after %.1fs", filepath.Base(image), g.SSHPort, time.Since(start).Seconds())
	return g
}

// Start is Boot without testing.TB: work holds the serial log and firmware variables. The
// caller must Kill or Shutdown the guest.
func Start(ctx context.Context, image, work string, opts BootOptions) (*Guest, error) {
	if opts.Timeout == 0 {
		opts.Timeout = 600 * time.Second
	}
	if opts.Memory == 0 {
		opts.Memory = 1024
	}
	if opts.User == "" {
		opts.User = TestUserName
	}
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var g *Guest
		g, err = start(image, work, opts)
		if err != nil {
			return nil, err
		}
		if err = g.waitSSH(ctx); err == nil {
			return g, nil
		}
		g.Kill()
		if !strings.Contains(err.Error(), "host forwarding") { // only a lost port race is retried
			return g, err
		}
	}
	return nil, err
}

func start(image, work string, opts BootOptions) (*Guest, error) {
	snapshot := ""
	if opts.Snapshot {
		snapshot = ",snapshot=on"
	}
	drive, err := qemuboot.Drive(image, snapshot)
	if err != nil {
		return nil, err
	}
	port, err := testutil.FreePort()
	if err != nil {
		return nil, err
	}
	userNet := "" // the user network's options
	if opts.Isolated {
		// IPv4 only, as most tenant networks: with slirp's IPv6 on, kubeadm may pick the
		// guest's fec0:: address and run its IPv6 preflight on an IPv4 cluster.
		userNet = ",restrict=on,ipv6=off"
	}
	for _, f := range opts.Forwards {
		userNet += fmt.Sprintf(",hostfwd=tcp:127.0.0.1:%d-:%d", f.Host, f.Guest)
	}
	if opts.MetadataService != "" {
		// One busybox nc per guest connection (a chardev would be a single connection).
		userNet += ",net=169.254.169.0/24,guestfwd=tcp:169.254.169.254:80-cmd:busybox nc " + strings.Replace(opts.MetadataService, ":", " ", 1)
	}
	serial := filepath.Join(work, fmt.Sprintf("serial-%d.log", port))
	args := append([]string{
		"-accel", "tcg", "-m", strconv.Itoa(opts.Memory), "-smp", strconv.Itoa(max(opts.CPUs, 1)), "-no-reboot",
		"-display", "none", "-vga", "none", "-monitor", "none", "-nodefaults",
		"-chardev", "file,id=serial0,path=" + qemuboot.OptEscape(serial), "-serial", "chardev:serial0",
		"-netdev", fmt.Sprintf("user,id=net0%s,hostfwd=tcp:127.0.0.1:%d-:22", userNet, port),
		"-device", "virtio-net-pci,netdev=net0,mac=" + UserNetMAC,
	}, drive...)
	if p := opts.Peer; p != nil {
		mode := "connect"
		if p.Listen {
			mode = "listen"
		}
		args = append(args, "-netdev", fmt.Sprintf("socket,id=net1,%s=127.0.0.1:%d", mode, p.Port),
			"-device", "virtio-net-pci,netdev=net1,mac="+p.MAC)
	}
	if opts.ConfigDrive != "" {
		args = append(args, "-drive", "file="+qemuboot.OptEscape(opts.ConfigDrive)+",format=raw,if=virtio,readonly=on")
	}
	if opts.Ignition != nil {
		ign := filepath.Join(work, fmt.Sprintf("config-%d.ign", port))
		if err := os.WriteFile(ign, opts.Ignition, 0o600); err != nil {
			return nil, err
		}
		args = append(args, "-fw_cfg", "name="+fwCfgName+",file="+qemuboot.OptEscape(ign))
	}
	if opts.UEFI {
		drives, err := qemuboot.UEFIDrives(filepath.Join(work, fmt.Sprintf("OVMF_VARS-%d.fd", port)))
		if err != nil {
			return nil, err
		}
		args = append(args, drives...)
	}
	g := &Guest{Image: image, SSHPort: port, SerialLog: serial, opts: opts, done: make(chan struct{})}
	g.cmd = exec.Command("qemu-system-x86_64", args...)
	var stderr bytes.Buffer
	g.cmd.Stdout, g.cmd.Stderr = &stderr, &stderr
	// No stray VMs: QEMU dies with the test process. Pdeathsig follows the thread that started
	// QEMU, so that goroutine keeps its thread (locked, never unlocked) until QEMU exits.
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := make(chan error)
	go func() {
		runtime.LockOSThread()
		if err := g.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		err := g.cmd.Wait()
		if err != nil {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
		}
		g.err = err
		close(g.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("starting qemu-system-x86_64: %w", err)
	}
	return g, nil
}

// waitSSH dials until the guest accepts the key, QEMU exits or the timeout passes.
func (g *Guest) waitSSH(ctx context.Context) error {
	deadline := time.Now().Add(g.opts.Timeout)
	var lastErr error
	for time.Now().Before(deadline) {
		select {
		case <-g.done:
			return fmt.Errorf("QEMU exited before SSH came up: %v\n%s", g.err, g.LogTail(4000))
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if bytes.Contains(g.Log(), []byte(initrdFailedMarker)) {
			return fmt.Errorf("the initramfs failed:\n%s", g.LogTail(4000))
		}
		if g.opts.Key == "" {
			// No key: wait for sshd's banner only.
			if c, err := net.DialTimeout("tcp", g.addr(), 5*time.Second); err == nil {
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				buf := make([]byte, 4)
				_, err := c.Read(buf)
				c.Close()
				if err == nil && string(buf) == "SSH-" {
					return nil
				}
			}
		} else if client, err := g.dial(); err == nil {
			g.client = client
			return nil
		} else {
			lastErr = err
		}
		time.Sleep(2 * time.Second)
	}
	return fmt.Errorf("no SSH login on 127.0.0.1:%d within %s (last error: %v)\n%s", g.SSHPort, g.opts.Timeout, lastErr, g.LogTail(4000))
}

func (g *Guest) addr() string { return fmt.Sprintf("127.0.0.1:%d", g.SSHPort) }

// Log returns the serial console output so far.
func (g *Guest) Log() []byte {
	b, _ := os.ReadFile(g.SerialLog)
	return b
}

// LogTail returns the last n bytes of the serial console output.
func (g *Guest) LogTail(n int) string { return qemuboot.Tail(g.Log(), n) }

// closeSSH closes the guest's SSH connection, if any.
func (g *Guest) closeSSH() {
	g.mu.Lock()
	if g.client != nil {
		g.client.Close()
		g.client = nil
	}
	g.mu.Unlock()
}

// Kill stops QEMU at once (safe to call more than once).
func (g *Guest) Kill() {
	g.closeSSH()
	select {
	case <-g.done:
		return
	default:
	}
	g.cmd.Process.Kill()
	<-g.done
}

// Shutdown powers the guest off cleanly (systemctl poweroff) and waits for QEMU to exit; after a
// timeout QEMU is killed and an error returned.
func (g *Guest) Shutdown() error {
	g.SSH("sudo systemctl poweroff") // the connection drops as the guest goes down
	g.closeSSH()
	select {
	case <-g.done:
		return nil
	case <-time.After(300 * time.Second):
		g.Kill()
		return fmt.Errorf("the guest did not power off within 300 s (killed QEMU)\n%s", g.LogTail(3000))
	}
}
