package novatest

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// agentNetns matches the mount points of the namespaces Neutron's agents make for routers and
// DHCP servers.
var agentNetns = regexp.MustCompile(`^/run/netns/(qrouter|qdhcp|fip|snat)-[0-9a-f-]+$`)

// recordAgentNetns writes the names of this cloud's router and DHCP namespaces to the state
// (lines "qns PATH") before the agents stop. The agents mount them in `ip netns exec`'s private
// mount namespaces, so the host holds only empty files of those names under /run/netns, beside
// those of any other cloud running at the same time: down.sh removes this cloud's alone (an
// unlink would detach another cloud's namespace from its agents).
func (c *Cloud) recordAgentNetns() {
	if c.state == nil {
		return
	}
	c.mu.Lock()
	procs := append([]*proc(nil), c.procs...)
	c.mu.Unlock()
	seen := map[string]bool{}
	for _, p := range procs {
		if p.cmd.Process == nil {
			continue
		}
		for _, n := range netnsMounts(fmt.Sprintf("/proc/%d/mountinfo", p.cmd.Process.Pid)) {
			if !seen[n] {
				seen[n] = true
				c.record("qns", n)
			}
		}
	}
}

// netnsMounts are the agents' namespace mount points in a mountinfo file (field 5).
func netnsMounts(mountinfo string) []string {
	f, err := os.Open(mountinfo)
	if err != nil {
		return nil
	}
	defer f.Close()
	var names []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fs := strings.Fields(s.Text()); len(fs) > 4 && agentNetns.MatchString(fs[4]) {
			names = append(names, fs[4])
		}
	}
	return names
}
