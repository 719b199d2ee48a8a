package images

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
	"strings"

	"github.com/flatcar-capo/flatcar-capo/pkg/httpx"
)

// unreachableError is a registry (or its mirror) that could not be reached at all: no DNS
// answer, connection refused, a dial timeout, a proxy that refuses the host. Every image on it fails alike, so Pull says it
// once, with what to do on a machine without internet.
type unreachableError struct {
	host     string // the host contacted
	registry string // the ref's registry
	mirror   bool   // host is a --registry-mirror
	ref      string
	err      error
}

func (e *unreachableError) Error() string { return e.ref + ": " + e.host + ": " + e.err.Error() }
func (e *unreachableError) Unwrap() error { return e.err }

// asUnreachable wraps err when it says the host could not be reached.
func asUnreachable(r Ref, src source, err error) error {
	var dns *net.DNSError
	var op *net.OpError
	if !errors.As(err, &dns) && !(errors.As(err, &op) && op.Op == "dial") && !errors.As(err, new(*httpx.ProxyRefusedError)) {
		return nil
	}
	return &unreachableError{host: src.host, registry: r.Registry(), mirror: src.host != r.Repo.RegistryStr(), ref: r.Given, err: err}
}

// joinResolveErrors is errors.Join of errs, except that the images of each unreachable host
// become one error naming the host, the images and the fix (not one DNS error per image).
func joinResolveErrors(errs []error) error {
	byHost := map[string][]*unreachableError{}
	var out []error
	for _, err := range errs {
		var u *unreachableError
		if errors.As(err, &u) {
			byHost[u.host] = append(byHost[u.host], u)
		} else if err != nil {
			out = append(out, err)
		}
	}
	for _, h := range slices.Sorted(maps.Keys(byHost)) {
		us := byHost[h]
		refs := make([]string, len(us))
		for i, u := range us {
			refs[i] = u.ref
		}
		sort.Strings(refs)
		cause := us[0].err
		var dns *net.DNSError
		var op *net.OpError
		var refused *httpx.ProxyRefusedError
		if errors.As(cause, &refused) {
			cause = refused // without the URL and Go's bare "Forbidden"
		} else if errors.As(cause, &dns) {
			cause = dns // "lookup HOST: no such host", without the URLs around it
		} else if errors.As(cause, &op) {
			cause = op // "dial tcp HOST: connect: connection refused", once (not per https and http try)
		}
		what, fix := "mirror", "check that it answers, or build without preloaded images with --no-preload-images"
		if !us[0].mirror {
			what, fix = "registry", fmt.Sprintf("without internet, pull them from a registry you run with --registry-mirror %s=https://YOUR-REGISTRY (--registry-ca for its CA), "+
				"preload only the images listed in a file with --images-file FILE, or build without preloaded images with --no-preload-images", us[0].registry)
		}
		out = append(out, fmt.Errorf("cannot reach %s %s (%v) for %d image(s): %s; %s", what, h, cause, len(refs), strings.Join(refs, ", "), fix))
	}
	return errors.Join(out...)
}
