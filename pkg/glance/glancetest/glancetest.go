// Package glancetest is Keystone v3 and Glance v2 in one in-process httptest server, for the
// tests of any package that uploads (as gophercloud's testhelper serves its own tests).
package glancetest

import (
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// Cloud is Keystone v3 and Glance v2 in one in-process httptest server, with just what
// upload uses (token, catalog, list by name, create, upload data, show, delete). It keeps images
// in memory and computes os_hash_value over the bytes it received, like Glance; damage makes it
// store damaged bytes, to exercise the hash check. The real Keystone + Glance tests remain the
// proof that upload works against OpenStack; this one makes the rare paths cheap to reach.
type Cloud struct {
	srv *httptest.Server
	URL string // Keystone's and Glance's endpoint

	mu     sync.Mutex
	images map[string]map[string]any
	nextID int
	damage bool
	oneSec bool     // every image created in the same second
	calls  []string // "METHOD /path", in order
	onList func()   // runs after each list is answered (OnList)
}

// OnList makes fn run after each list of images is answered: what another run does between
// this run's listing and its next step (a concurrent replace deleting the image it saw).
func (f *Cloud) OnList(fn func()) {
	f.mu.Lock()
	f.onList = fn
	f.mu.Unlock()
}

// Remove deletes image id, as another client would.
func (f *Cloud) Remove(id string) {
	f.mu.Lock()
	delete(f.images, id)
	f.mu.Unlock()
}

// New starts a fake cloud for the test; it stops when the test ends.
func New(t testing.TB) *Cloud {
	t.Helper()
	f := &Cloud{images: map[string]map[string]any{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v3/auth/tokens", f.token)
	mux.HandleFunc("GET /{$}", f.versions)
	mux.HandleFunc("GET /v2/images", f.list)
	mux.HandleFunc("POST /v2/images", f.create)
	mux.HandleFunc("GET /v2/images/{id}", f.show)
	mux.HandleFunc("PUT /v2/images/{id}/file", f.upload)
	mux.HandleFunc("DELETE /v2/images/{id}", f.delete)
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.calls = append(f.calls, r.Method+" "+r.URL.Path)
		f.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	f.URL = f.srv.URL
	t.Cleanup(f.srv.Close)
	return f
}

// Damage makes the cloud flip a byte of every upload before hashing it (a transfer that
// corrupts data).
func (f *Cloud) Damage(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.damage = on
}

// CreatedInOneSecond gives every image from now on the same created_at, as Glance's one-second
// resolution does to uploads that follow each other quickly.
func (f *Cloud) CreatedInOneSecond(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.oneSec = on
}

// createdAt is an image's created_at: one second per image, or the same for all (oneSec).
func (f *Cloud) createdAt() string {
	sec := f.nextID
	if f.oneSec {
		sec = 0
	}
	return time.Date(2026, 12, 1, 0, 0, sec, 0, time.UTC).Format(time.RFC3339)
}

// Calls are the requests so far, "METHOD /path", in order.
func (f *Cloud) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string{}, f.calls...)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func (f *Cloud) token(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Auth struct {
			Identity struct {
				Password struct {
					User struct{ Password string }
				}
			}
		}
	}
	json.NewDecoder(r.Body).Decode(&body)
	if body.Auth.Identity.Password.User.Password != "secret" {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{"code": 401, "message": "The request you have made requires authentication."}})
		return
	}
	w.Header().Set("X-Subject-Token", "fake-token")
	writeJSON(w, http.StatusCreated, map[string]any{"token": map[string]any{
		"methods":    []string{"password"},
		"expires_at": time.Now().Add(time.Hour).UTC().Format("2006-01-02T15:04:05.000000Z"),
		"issued_at":  time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"),
		"user":       map[string]any{"id": "u1", "name": "demo", "domain": map[string]any{"id": "default", "name": "Default"}},
		"project":    map[string]any{"id": "p1", "name": "demo", "domain": map[string]any{"id": "default", "name": "Default"}},
		"catalog": []any{map[string]any{"type": "image", "name": "glance", "id": "s1", "endpoints": []any{
			map[string]any{"id": "e1", "interface": "public", "region": "RegionOne", "region_id": "RegionOne", "url": f.srv.URL},
		}}},
	}})
}

// versions is Glance's version document, which the client reads to find the v2 API.
func (f *Cloud) versions(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusMultipleChoices, map[string]any{"versions": []any{map[string]any{
		"id": "v2.16", "status": "CURRENT", "links": []any{map[string]any{"rel": "self", "href": f.srv.URL + "/v2/"}}}}})
}

func (f *Cloud) list(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer func() {
		fn := f.onList
		f.mu.Unlock()
		if fn != nil {
			fn()
		}
	}()
	name := r.URL.Query().Get("name")
	out := []map[string]any{}
	for _, img := range f.images {
		if name == "" || img["name"] == name {
			out = append(out, img)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i]["created_at"].(string) < out[j]["created_at"].(string) })
	writeJSON(w, http.StatusOK, map[string]any{"images": out, "first": "/v2/images", "schema": "/v2/schemas/images"})
}

func (f *Cloud) create(w http.ResponseWriter, r *http.Request) {
	var img map[string]any
	if err := json.NewDecoder(r.Body).Decode(&img); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": err.Error()})
		return
	}
	f.mu.Lock()
	f.nextID++
	id := fmt.Sprintf("00000000-0000-0000-0000-%012d", f.nextID)
	img["id"], img["status"], img["size"] = id, "queued", nil
	img["created_at"] = f.createdAt()
	if img["tags"] == nil {
		img["tags"] = []string{}
	}
	f.images[id] = img
	f.mu.Unlock()
	writeJSON(w, http.StatusCreated, img)
}

// image returns the image the request's path names, or answers 404; the caller holds f.mu.
func (f *Cloud) image(w http.ResponseWriter, r *http.Request) (map[string]any, bool) {
	img, ok := f.images[r.PathValue("id")]
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "no such image"})
	}
	return img, ok
}

func (f *Cloud) show(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if img, ok := f.image(w, r); ok {
		writeJSON(w, http.StatusOK, img)
	}
}

func (f *Cloud) upload(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	img, ok := f.image(w, r)
	if !ok {
		return
	}
	if f.damage && len(data) > 0 {
		data[len(data)/2] ^= 0xff
	}
	sum := sha512.Sum512(data)
	img["status"], img["size"] = "active", len(data)
	img["os_hash_algo"], img["os_hash_value"] = "sha512", hex.EncodeToString(sum[:])
	w.WriteHeader(http.StatusNoContent)
}

func (f *Cloud) delete(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.image(w, r); !ok {
		return
	}
	delete(f.images, r.PathValue("id"))
	w.WriteHeader(http.StatusNoContent)
}

// Put stores an image as if an earlier run had made it.
func (f *Cloud) Put(name, status string, data []byte, tags ...string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	id := fmt.Sprintf("00000000-0000-0000-0000-%012d", f.nextID)
	img := map[string]any{"id": id, "name": name, "status": status, "disk_format": "raw", "container_format": "bare",
		"tags": append([]string{}, tags...), "size": nil, "visibility": "shared",
		"created_at": f.createdAt()}
	if data != nil {
		sum := sha512.Sum512(data)
		img["size"], img["os_hash_algo"], img["os_hash_value"] = len(data), "sha512", hex.EncodeToString(sum[:])
	}
	f.images[id] = img
	return id
}

// Named returns the statuses of the images called name, by ID.
func (f *Cloud) Named(name string) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]string{}
	for id, img := range f.images {
		if img["name"] == name {
			out[id] = img["status"].(string)
		}
	}
	return out
}

// Count is how many calls matched "METHOD /path-prefix".
func (f *Cloud) Count(prefix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

// CloudsYAML writes a clouds.yaml naming each fake (fake0, fake1, ...) and points
// OS_CLIENT_CONFIG_FILE at it for the test.
func CloudsYAML(t testing.TB, fakes ...*Cloud) {
	t.Helper()
	var b strings.Builder
	b.WriteString("clouds:\n")
	for i, f := range fakes {
		fmt.Fprintf(&b, "  fake%d:\n    auth:\n      auth_url: %s/v3\n      username: demo\n      password: secret\n      project_name: demo\n      user_domain_name: Default\n      project_domain_name: Default\n    region_name: RegionOne\n    identity_api_version: 3\n", i, f.srv.URL)
	}
	path := filepath.Join(t.TempDir(), "clouds.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OS_CLIENT_CONFIG_FILE", path)
	t.Setenv("OS_CLOUD", "")
}
