// Package images preloads container images into a node image: it pulls refs for the image's
// platform with go-containerregistry (digests verified, @sha256 pins honoured, blobs cached by
// digest and fetched in parallel), from the mirrors and with the CA and docker-config credentials
// the user gives, and writes them as one OCI archive plus the containerd settings and the import
// unit a Flatcar node needs to have them in containerd's k8s.io namespace before kubelet starts.
package images

import (
	"bufio"
	"fmt"
	"github.com/flatcar-capo/flatcar-capo/pkg/infile"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Ref is one image to preload, as the user (or kubeadm) wrote it.
type Ref struct {
	Given  string // as written
	Name   string // containerd's name for it: registry/repo:tag, registry/repo@digest or both
	Repo   name.Repository
	Tag    string // "" for a digest-only ref
	Digest string // the @sha256: pin, "" when none
}

// Registry is the registry host as containerd names it (docker.io, not index.docker.io).
func (r Ref) Registry() string {
	if reg := r.Repo.RegistryStr(); reg != name.DefaultRegistry {
		return reg
	}
	return "docker.io"
}

// ParseRef reads registry/repo[:tag][@sha256:...]; a bare name gets docker.io and :latest, as
// containerd and kubelet do.
func ParseRef(s string) (Ref, error) {
	s = strings.TrimSpace(s)
	if s == "" || strings.ContainsAny(s, " \t") {
		return Ref{}, fmt.Errorf("invalid image reference %q: want registry/repository:tag or ...@sha256:<digest>", s)
	}
	left, dig, pinned := strings.Cut(s, "@")
	r := Ref{Given: s}
	if pinned {
		h, err := v1.NewHash(dig)
		if err != nil || h.Algorithm != "sha256" {
			return Ref{}, fmt.Errorf("invalid image reference %q: the pin after @ must be sha256:<64 hex digits>", s)
		}
		r.Digest = h.String()
	}
	// A tag is the part after the last colon that is not followed by a slash (a port is).
	repo := left
	if i := strings.LastIndexByte(left, ':'); i > strings.LastIndexByte(left, '/') {
		repo, r.Tag = left[:i], left[i+1:]
	}
	if r.Tag == "" && !pinned {
		r.Tag = "latest"
	}
	rp, err := name.NewRepository(repo, name.StrictValidation)
	if err != nil {
		return Ref{}, fmt.Errorf("invalid image reference %q: %v", s, err)
	}
	if r.Tag != "" {
		if _, err := name.NewTag(rp.Name()+":"+r.Tag, name.StrictValidation); err != nil {
			return Ref{}, fmt.Errorf("invalid image reference %q: bad tag %q", s, r.Tag)
		}
	}
	r.Repo = rp
	r.Name = r.Registry() + "/" + rp.RepositoryStr()
	if r.Tag != "" {
		r.Name += ":" + r.Tag
	}
	if r.Digest != "" {
		r.Name += "@" + r.Digest
	}
	return r, nil
}

// ParseRefs parses each ref and drops duplicates (same containerd name), keeping the order.
func ParseRefs(refs []string) ([]Ref, error) {
	var out []Ref
	seen := map[string]bool{}
	for _, s := range refs {
		r, err := ParseRef(s)
		if err != nil {
			return nil, err
		}
		if !seen[r.Name] {
			seen[r.Name] = true
			out = append(out, r)
		}
	}
	return out, nil
}

// ReadRefsFile reads --images-file: one ref per line, blank lines and # comments ignored.
func ReadRefsFile(path string) ([]string, error) {
	f, _, err := infile.Open("--images-file", path, infile.ImagesFile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var refs []string
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		line, _, _ := strings.Cut(sc.Text(), "#")
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if _, err := ParseRef(line); err != nil {
			return nil, fmt.Errorf("--images-file %s line %d: %v", path, n, err)
		}
		refs = append(refs, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--images-file %s: %w", path, err)
	}
	return refs, nil
}
