package images

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// registryNameRule is what a registry name in --registry-mirror may be: it becomes a directory
// under /etc/containerd/certs.d and a TOML key, so nothing else is accepted.
const registryNameRule = "a registry is host[:port] (a DNS name such as registry.k8s.io, an IPv4 address or a bracketed IPv6 address such as [fd00::1], port 1-65535) or * for every registry"

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// validateHostPort checks host[:port]: a DNS name (labels of a-z, 0-9 and inner '-'), an IPv4
// address or a bracketed IPv6 address, and an optional port 1-65535. It is the one check for
// every host written into the node's containerd settings.
func validateHostPort(s string) error {
	if s == "" {
		return fmt.Errorf("empty")
	}
	if hasControl(s) {
		return fmt.Errorf("it contains a control character (newline, tab, ...)")
	}
	host, port := s, ""
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 {
			return fmt.Errorf("%q: an unclosed [ (an IPv6 address is [addr] or [addr]:port)", s)
		}
		host, port = s[1:end], strings.TrimPrefix(s[end+1:], ":")
		if s[end+1:] != "" && !strings.HasPrefix(s[end+1:], ":") {
			return fmt.Errorf("%q: after ] only :port may follow", s)
		}
		if ip := net.ParseIP(host); ip == nil || ip.To4() != nil || strings.Contains(host, "%") {
			return fmt.Errorf("%q: %q is not an IPv6 address", s, host)
		}
	} else {
		if i := strings.LastIndex(s, ":"); i >= 0 {
			host, port = s[:i], s[i+1:]
			if strings.Contains(host, ":") {
				return fmt.Errorf("%q: an IPv6 address must be in brackets, e.g. [fd00::1]:5000", s)
			}
		}
		switch {
		case host == "":
			return fmt.Errorf("%q: no host name", s)
		case len(host) > 253:
			return fmt.Errorf("%q: the host name is longer than 253 characters", s)
		}
		for _, l := range strings.Split(host, ".") {
			switch {
			case l == "":
				return fmt.Errorf("%q: the host name has an empty label (a leading, trailing or double dot)", s)
			case !dnsLabel.MatchString(l):
				return fmt.Errorf("%q: %q is not a DNS label (lowercase a-z, 0-9 and inner '-', at most 63)", s, l)
			}
		}
	}
	if port != "" || strings.HasSuffix(s, ":") {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '0' {
			return fmt.Errorf("%q: port %q is not a number 1-65535", s, port)
		}
	}
	return nil
}

// validateRegistryName checks a --registry-mirror registry: "*" or host[:port].
func validateRegistryName(s string) error {
	if s == "*" {
		return nil
	}
	if strings.Contains(s, "/") {
		return fmt.Errorf("%q has a path: the left of = is a registry, not a repository (to mirror into a project, put the path in the URL: registry.k8s.io=https://harbor.example/v2/PROJECT)", s)
	}
	if err := validateHostPort(s); err != nil {
		return fmt.Errorf("%v; %s", err, registryNameRule)
	}
	return nil
}

// validateHTTPURL checks an http(s) URL whose host goes into the node's settings: the scheme,
// a valid host[:port], no user, query or fragment (what is left is the path, for the caller).
func validateHTTPURL(raw string) (*url.URL, error) {
	if hasControl(raw) || strings.ContainsAny(raw, "\"'\\ ") {
		return nil, fmt.Errorf("it contains a space, quote, backslash or control character")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("not a URL: %v", err)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return nil, fmt.Errorf("the scheme must be http or https")
	}
	u.Host = strings.ToLower(u.Host) // DNS names are case-insensitive; containerd matches exactly
	if err := validateHostPort(u.Host); err != nil {
		return nil, fmt.Errorf("the host: %v", err)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return nil, fmt.Errorf("a mirror URL has no query or fragment")
	}
	return u, nil
}

func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// TOMLString is s as a TOML basic string (the one quoting of what goes into hosts.toml and the
// containerd drop-in); control characters are refused, as no value we write may hold one.
func TOMLString(s string) (string, error) {
	if hasControl(s) {
		return "", fmt.Errorf("%q: a control character cannot go into containerd's settings", s)
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`, nil
}

// EnvFileValue is s quoted for a systemd EnvironmentFile= (double quotes; inside them systemd
// unescapes \" \\ \` \$); control characters are refused.
func EnvFileValue(s string) (string, error) {
	if hasControl(s) {
		return "", fmt.Errorf("%q: a control character cannot go into a systemd environment file", s)
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "`", "\\`", `$`, `\$`).Replace(s) + `"`, nil
}
