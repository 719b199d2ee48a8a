package glance

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"gopkg.in/yaml.v3"

	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/infile"
)

// oneCloudYAML returns a clouds.yaml document holding only the cloud called name of the file at
// path. gophercloud decodes every entry of the file into its types, so one malformed cloud
// (a mapping where a string belongs) broke all of them, and its error quoted the bad scalar,
// which may be a password. Here only the cloud in use is decoded, and a type error names the
// cloud, the field and the line, never the value.
func oneCloudYAML(path, name string) ([]byte, error) {
	data, err := infile.ReadFile("clouds.yaml", path, infile.CloudsYAML)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, errs.Invalidf("%s is not valid YAML: %s", path, hideValues(err.Error()))
	}
	entry := lookup(&doc, "clouds", name)
	if entry == nil {
		return nil, nil // no such cloud in this file (a secure.yaml need not have it)
	}
	var c clouds.Cloud
	if err := entry.Decode(&c); err != nil {
		return nil, errs.Invalidf("cloud %q in %s: %s; fix that field (its value is not shown: it may be a secret)", name, path, typeErrorFields(entry, err))
	}
	// Decoded, not copied as a node: aliases and merge keys (<<: *local) refer to the rest of
	// the file, which the new document does not hold.
	var plain any
	if err := entry.Decode(&plain); err != nil {
		return nil, errs.Invalidf("cloud %q in %s: %s", name, path, hideValues(err.Error()))
	}
	b, err := yaml.Marshal(map[string]map[string]any{"clouds": {name: plain}})
	if err != nil {
		return nil, fmt.Errorf("cloud %q in %s: %w", name, path, err)
	}
	return b, nil
}

// lookup follows mapping keys from a document node.
func lookup(n *yaml.Node, keys ...string) *yaml.Node {
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	for _, k := range keys {
		if n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}

var errLine = regexp.MustCompile(`line (\d+): cannot unmarshal (!!\w+)`)

// typeErrorFields turns yaml's "line 7: cannot unmarshal !!str `hunter2` into clouds.AuthInfo"
// into "field auth (line 7) cannot be a string", found by the line in the cloud's node tree.
func typeErrorFields(entry *yaml.Node, err error) string {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return hideValues(err.Error())
	}
	var parts []string
	for _, e := range te.Errors {
		m := errLine.FindStringSubmatch(e)
		if m == nil {
			parts = append(parts, hideValues(e))
			continue
		}
		line, _ := strconv.Atoi(m[1])
		field := fieldAt(entry, line, "")
		if field == "" {
			field = "a field"
		} else {
			field = "field " + field
		}
		parts = append(parts, fmt.Sprintf("%s (line %d) cannot be a %s", field, line, kindName(m[2])))
	}
	return strings.Join(parts, "; ")
}

// fieldAt is the dotted key path of the value node that starts on line.
func fieldAt(n *yaml.Node, line int, prefix string) string {
	if n.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		path := k.Value
		if prefix != "" {
			path = prefix + "." + k.Value
		}
		if inner := fieldAt(v, line, path); inner != "" { // only a mapping has fields inside
			return inner
		}
		if v.Line == line || k.Line == line && v.Kind != yaml.MappingNode {
			return path
		}
	}
	return ""
}

func kindName(tag string) string {
	switch tag {
	case "!!str":
		return "string"
	case "!!map":
		return "mapping"
	case "!!seq":
		return "list"
	case "!!int", "!!float":
		return "number"
	case "!!bool":
		return "boolean"
	}
	return strings.TrimPrefix(tag, "!!")
}

var backquoted = regexp.MustCompile("`[^`]*`")

// hideValues removes the scalars yaml quotes in its messages.
func hideValues(msg string) string { return backquoted.ReplaceAllString(msg, "(value not shown)") }

// secureYAMLFor is the secure.yaml gophercloud would merge into the cloud from path.
func secureYAMLFor(path string) string {
	if sec := os.Getenv("OS_CLIENT_SECURE_FILE"); sec != "" {
		return sec
	}
	return filepath.Join(filepath.Dir(path), "secure.yaml")
}

// envCloudYAML turns the OS_* variables of an openrc file into a one-cloud clouds.yaml document,
// so that both ways of configuring credentials go through the same parser. gophercloud's own
// AuthOptionsFromEnv ignores OS_USER_DOMAIN_NAME and OS_PROJECT_DOMAIN_NAME, which every
// Keystone v3 openrc sets.
func envCloudYAML() (string, error) {
	env := func(names ...string) string {
		for _, n := range names {
			if v := os.Getenv(n); v != "" {
				return v
			}
		}
		return ""
	}
	auth := clouds.AuthInfo{
		AuthURL:                     env("OS_AUTH_URL"),
		Token:                       env("OS_TOKEN"),
		Username:                    env("OS_USERNAME"),
		UserID:                      env("OS_USER_ID"),
		Password:                    env("OS_PASSWORD"),
		ApplicationCredentialID:     env("OS_APPLICATION_CREDENTIAL_ID"),
		ApplicationCredentialName:   env("OS_APPLICATION_CREDENTIAL_NAME"),
		ApplicationCredentialSecret: env("OS_APPLICATION_CREDENTIAL_SECRET"),
		SystemScope:                 env("OS_SYSTEM_SCOPE"),
		ProjectName:                 env("OS_PROJECT_NAME", "OS_TENANT_NAME"),
		ProjectID:                   env("OS_PROJECT_ID", "OS_TENANT_ID"),
		UserDomainName:              env("OS_USER_DOMAIN_NAME"),
		UserDomainID:                env("OS_USER_DOMAIN_ID"),
		ProjectDomainName:           env("OS_PROJECT_DOMAIN_NAME"),
		ProjectDomainID:             env("OS_PROJECT_DOMAIN_ID"),
		DomainName:                  env("OS_DOMAIN_NAME"),
		DomainID:                    env("OS_DOMAIN_ID"),
		TrustID:                     env("OS_TRUST_ID"),
	}
	if auth.AuthURL == "" {
		return "", errs.Invalidf("no cloud given: pass --cloud NAME (an entry of clouds.yaml), set OS_CLOUD, or source an openrc file that sets OS_AUTH_URL and the credentials")
	}
	cloud := clouds.Cloud{
		AuthInfo:   &auth,
		AuthType:   clouds.AuthType(env("OS_AUTH_TYPE")),
		CACertFile: env("OS_CACERT"),
	}
	// Application credentials carry their own scope; Keystone refuses one given next to them.
	if auth.ApplicationCredentialID != "" || auth.ApplicationCredentialName != "" {
		auth.ProjectName, auth.ProjectID, auth.ProjectDomainName, auth.ProjectDomainID = "", "", "", ""
	}
	switch strings.ToLower(env("OS_INSECURE")) {
	case "1", "true", "yes":
		f := false
		cloud.Verify = &f
	}
	doc, err := yaml.Marshal(clouds.Clouds{Clouds: map[string]clouds.Cloud{"env": cloud}})
	if err != nil {
		return "", err
	}
	return string(doc), nil
}
