package standin

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

func (g *Guest) dial() (*ssh.Client, error) {
	pem, err := os.ReadFile(g.opts.Key)
	if err != nil {
		return nil, err
	}
	signer, err := ssh.ParsePrivateKey(pem)
	if err != nil {
		return nil, fmt.Errorf("SSH key %s: %w", g.opts.Key, err)
	}
	cfg := &ssh.ClientConfig{
		User:            g.opts.User,
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.InsecureIgnoreHostKey(), // a fresh test VM on loopback: no known host key
		Timeout:         20 * time.Second,
	}
	conn, err := net.DialTimeout("tcp", g.addr(), 10*time.Second)
	if err != nil {
		return nil, err
	}
	conn.SetDeadline(time.Now().Add(60 * time.Second))
	c, chans, reqs, err := ssh.NewClientConn(conn, g.addr(), cfg)
	if err != nil {
		conn.Close()
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	return ssh.NewClient(c, chans, reqs), nil
}

// SSH runs cmd in the guest as the SSH user (a login shell; use sudo for root) and returns its
// stdout; a non-zero exit is an error carrying stderr.
func (g *Guest) SSH(cmd string) (string, error) {
	g.mu.Lock()
	if g.client == nil {
		c, err := g.dial()
		if err != nil {
			g.mu.Unlock()
			return "", fmt.Errorf("ssh %s@127.0.0.1:%d: %w", g.opts.User, g.SSHPort, err)
		}
		g.client = c
	}
	client := g.client
	g.mu.Unlock()
	s, err := client.NewSession()
	if err != nil {
		return "", fmt.Errorf("ssh session: %w", err)
	}
	defer s.Close()
	var stdout, stderr bytes.Buffer
	s.Stdout, s.Stderr = &stdout, &stderr
	if err := s.Run(cmd); err != nil {
		return stdout.String(), fmt.Errorf("%q in the guest: %w\nstderr: %s", cmd, err, stderr.String())
	}
	return stdout.String(), nil
}

// Cmdline is the guest kernel's command line (/proc/cmdline).
func (g *Guest) Cmdline() (string, error) {
	out, err := g.SSH("cat /proc/cmdline")
	return strings.TrimSpace(out), err
}

// ForwardRemote makes the guest's remoteAddr (e.g. 127.0.0.1:5000) lead to the host's
// localAddr for as long as the guest runs (ssh -R): a host service on loopback becomes
// reachable from the guest under the same address, and only when the test says so.
func (g *Guest) ForwardRemote(remoteAddr, localAddr string) (stop func(), err error) {
	c, err := g.dial()
	if err != nil {
		return nil, err
	}
	ln, err := c.Listen("tcp", remoteAddr)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("ssh -R %s: %w", remoteAddr, err)
	}
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer in.Close()
				out, err := net.DialTimeout("tcp", localAddr, 10*time.Second)
				if err != nil {
					return
				}
				defer out.Close()
				done := make(chan struct{}, 2)
				go func() { io.Copy(out, in); done <- struct{}{} }()
				go func() { io.Copy(in, out); done <- struct{}{} }()
				<-done
			}()
		}
	}()
	return func() { ln.Close(); c.Close() }, nil
}
