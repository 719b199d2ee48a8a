// Package glancetest is Keystone v3 and Glance v2 in one in-process httptest server, for the
// tests of any package that uploads (as gophercloud's testhelper serves its own tests).
package glancetest

import (
	"cmp"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Cloud is Keystone v3, Glance v2 and Barbican v1 in one in-process httptest server, with just
// what upload and prune use (token, catalog, list, create, upload data, show, patch, delete;
// secrets listed by name, stored, shown, read). It keeps images
// in memory and computes os_hash_value over the bytes it received, like Glance; damage makes it
// store damaged bytes, to exercise the hash check. The real Keystone + Glance tests remain the
// proof that upload works against OpenStack; this one makes the rare paths cheap to reach.
type Cloud struct {
	srv *httptest.Server
	URL string // Keystone's, Glance's and Barbican's endpoint

	mu     sync.Mutex
	images map[string]map[string]any
	// secrets are Barbican's: metadata as Barbican shows it, and the payload apart.
	secrets  map[string]map[string]any
	payloads map[string][]byte
	nextID   int
	damage   bool
	oneSec   bool     // every image created in the same second
	calls    []string // "METHOD /path", in order
	onList   func()   // runs after each list is answered (OnList)
	hostile  Hostile
}

// project is the ID of the project the fake's tokens are scoped to: the owner of every image
// its users create (PutFor makes images of other projects).
const project = "p1"

// Token is the token the fake's Keystone hands out, shaped as Keystone's fernet tokens are.
const Token = "gAAAAABpFakeKeystoneToken0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"

// pageSize is how many images one list page holds when the client names no limit (Glance's
// limit_param_default).
const pageSize = 25

// Hostile are the ways a real cloud's Glance (or a proxy in front of it) answers oddly, for the
// tests of what prune and upload do with such answers. The zero value is a well-behaved Glance.
type Hostile struct {
	// RepeatIDs lists every image of a page twice, and the last image of a page again at the
	// top of the next (a Glance whose marker paging overlaps).
	RepeatIDs bool
	// RepeatNext answers every page after the first with the first page's next link, so a
	// client that follows it blindly never ends.
	RepeatNext bool
	// PageSize, when set, is the most images a page holds (a cloud with a small api_limit_max).
	PageSize int
	// UploadDelay holds every image's data this long before storing it (a slow upload, so that
	// another run sees it in flight).
	UploadDelay time.Duration
	// UploadGate, when not nil, holds every image's data (after UploadDelay) until it is
	// closed: a test that needs another run to see the upload in flight, however slow that
	// run is to start, closes it once that run has listed (OnList).
	UploadGate <-chan struct{}
	// BarbicanHangs makes Barbican accept every request and never answer.
	BarbicanHangs bool
	// EchoHeaders makes every error answer (HTTP 4xx/5xx) echo the request's headers in its
	// body, as some proxies and gateways do (X-Auth-Token included).
	EchoHeaders bool
}

// echoHeaders writes the request's headers into w as JSON, as an echoing gateway's error
// page does.
func echoHeaders(w io.Writer, r *http.Request) {
	json.NewEncoder(w).Encode(map[string]any{"request": r.Method + " " + r.URL.String(), "headers": r.Header})
}

// Misbehave makes the fake answer as h says from now on.
func (f *Cloud) Misbehave(h Hostile) {
	f.mu.Lock()
	f.hostile = h
	f.mu.Unlock()
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
	f := &Cloud{images: map[string]map[string]any{}, secrets: map[string]map[string]any{}, payloads: map[string][]byte{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v3/auth/tokens", f.token)
	mux.HandleFunc("GET /{$}", f.versions)
	mux.HandleFunc("GET /v2/images", f.list)
	mux.HandleFunc("POST /v2/images", f.create)
	mux.HandleFunc("GET /v2/images/{id}", f.show)
	mux.HandleFunc("PUT /v2/images/{id}/file", f.upload)
	mux.HandleFunc("DELETE /v2/images/{id}", f.delete)
	mux.HandleFunc("PATCH /v2/images/{id}", f.patch)
	// Barbican lives under /barbican: gophercloud reads each endpoint's version document.
	mux.HandleFunc("GET /barbican/{$}", f.barbicanVersions)
	mux.HandleFunc("GET /barbican/v1/secrets", f.barbican(f.listSecrets))
	mux.HandleFunc("POST /barbican/v1/secrets", f.barbican(f.createSecret))
	mux.HandleFunc("GET /barbican/v1/secrets/{id}", f.barbican(f.showSecret))
	mux.HandleFunc("GET /barbican/v1/secrets/{id}/payload", f.barbican(f.secretPayload))
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.calls = append(f.calls, r.Method+" "+r.URL.Path)
		echo := f.hostile.EchoHeaders
		f.mu.Unlock()
		if !echo {
			mux.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, r)
		maps.Copy(w.Header(), rec.Header())
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
		if rec.Code >= 400 {
			echoHeaders(w, r)
		}
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
	w.Header().Set("X-Subject-Token", Token)
	writeJSON(w, http.StatusCreated, map[string]any{"token": map[string]any{
		"methods":    []string{"password"},
		"expires_at": time.Now().Add(time.Hour).UTC().Format("2006-01-02T15:04:05.000000Z"),
		"issued_at":  time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"),
		"user":       map[string]any{"id": "u1", "name": "demo", "domain": map[string]any{"id": "default", "name": "Default"}},
		"project":    map[string]any{"id": project, "name": "demo", "domain": map[string]any{"id": "default", "name": "Default"}},
		"catalog": []any{map[string]any{"type": "image", "name": "glance", "id": "s1", "endpoints": []any{
			map[string]any{"id": "e1", "interface": "public", "region": "RegionOne", "region_id": "RegionOne", "url": f.srv.URL},
		}}, map[string]any{"type": "key-manager", "name": "barbican", "id": "s2", "endpoints": []any{
			map[string]any{"id": "e2", "interface": "public", "region": "RegionOne", "region_id": "RegionOne", "url": f.srv.URL + "/barbican"},
		}}},
	}})
}

// versions is Glance's version document, which the client reads to find the v2 API.
func (f *Cloud) versions(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusMultipleChoices, map[string]any{"versions": []any{map[string]any{
		"id": "v2.16", "status": "CURRENT", "links": []any{map[string]any{"rel": "self", "href": f.srv.URL + "/v2/"}}}}})
}

// list answers as Glance v2 does: only the images the token's project may see (its own, and
// public or shared ones of other projects; community ones only when asked for), filtered by
// name, tag (every one given), owner and os_hidden (absent: the images that are not hidden), in
// pages of limit (PageSize) after marker with a next link while more follow.
func (f *Cloud) list(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer func() {
		fn := f.onList
		f.mu.Unlock()
		if fn != nil {
			fn()
		}
	}()
	q := r.URL.Query()
	hidden := q.Get("os_hidden") == "true"
	out := []map[string]any{}
	for _, img := range f.images {
		vis, _ := img["visibility"].(string)
		own := img["owner"] == project
		switch {
		case !own && vis != "public" && vis != "shared" && vis != "community",
			!own && vis == "community" && q.Get("visibility") != "community",
			q.Get("visibility") != "" && vis != q.Get("visibility"),
			q.Has("name") && img["name"] != q.Get("name"),
			q.Has("owner") && img["owner"] != q.Get("owner"),
			img["os_hidden"] != hidden,
			!hasTags(img, q["tag"]):
			continue
		}
		out = append(out, img)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i]["created_at"].(string), out[j]["created_at"].(string)
		return a < b || a == b && out[i]["id"].(string) < out[j]["id"].(string)
	})
	start := 0
	if m := q.Get("marker"); m != "" {
		start = -1
		for i, img := range out {
			if img["id"] == m {
				start = i + 1
			}
		}
		if start < 0 {
			writeJSON(w, http.StatusNotFound, map[string]any{"message": "marker " + m + " could not be found"})
			return
		}
	}
	limit := pageSize
	if n, err := strconv.Atoi(q.Get("limit")); err == nil && n > 0 {
		limit = n
	}
	limit = min(limit, cmp.Or(f.hostile.PageSize, 1000)) // Glance's api_limit_max

	page := out[start:min(start+limit, len(out))]
	body := map[string]any{"images": page, "first": "/v2/images", "schema": "/v2/schemas/images"}
	if start+limit < len(out) && len(page) > 0 {
		next := url.Values{}
		for k, v := range q {
			next[k] = v
		}
		next.Set("marker", page[len(page)-1]["id"].(string))
		if f.hostile.RepeatNext && start > 0 {
			next.Set("marker", out[min(limit, len(out))-1]["id"].(string))
		}
		body["next"] = "/v2/images?" + next.Encode()
	}
	if f.hostile.RepeatIDs {
		var twice []map[string]any
		if start > 0 {
			twice = append(twice, out[start-1])
		}
		for _, img := range page {
			twice = append(twice, img, img)
		}
		body["images"] = twice
	}
	writeJSON(w, http.StatusOK, body)
}

func hasTags(img map[string]any, want []string) bool {
	tags, _ := img["tags"].([]string)
	for _, t := range want {
		if !slices.Contains(tags, t) {
			return false
		}
	}
	return true
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
	img["owner"], img["os_hidden"] = project, false
	if img["visibility"] == nil {
		img["visibility"] = "shared"
	}
	tags := []string{}
	if t, ok := img["tags"].([]any); ok {
		for _, v := range t {
			s, _ := v.(string)
			tags = append(tags, s)
		}
	}
	img["tags"] = tags
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
	delay, gate := f.hostile.UploadDelay, f.hostile.UploadGate
	if img, ok := f.images[r.PathValue("id")]; ok && (delay > 0 || gate != nil) {
		img["status"] = "saving"
	}
	f.mu.Unlock()
	time.Sleep(delay)
	if gate != nil {
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
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
	img, ok := f.image(w, r)
	if !ok || !f.mayChange(w, img) {
		return
	}
	if img["protected"] == true { // as Glance answers for a protected image
		writeJSON(w, http.StatusForbidden, map[string]any{"message": "Image " + r.PathValue("id") + " is protected and cannot be deleted."})
		return
	}
	delete(f.images, r.PathValue("id"))
	w.WriteHeader(http.StatusNoContent)
}

// mayChange answers 403, as Glance does, when img belongs to another project (this fake's
// tokens are not admin's); the caller holds f.mu.
func (f *Cloud) mayChange(w http.ResponseWriter, img map[string]any) bool {
	if img["owner"] != project {
		writeJSON(w, http.StatusForbidden, map[string]any{"message": "You are not permitted to modify this image."})
		return false
	}
	return true
}

// patch applies a JSON patch (Glance's application/openstack-images-v2.1-json-patch) of
// replace and add operations on top-level attributes: os_hidden, properties.
func (f *Cloud) patch(w http.ResponseWriter, r *http.Request) {
	var ops []struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	if err := json.NewDecoder(r.Body).Decode(&ops); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": err.Error()})
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	img, ok := f.image(w, r)
	if !ok || !f.mayChange(w, img) {
		return
	}
	for _, op := range ops {
		if op.Op != "replace" && op.Op != "add" {
			writeJSON(w, http.StatusBadRequest, map[string]any{"message": "unsupported op " + op.Op})
			return
		}
		img[strings.TrimPrefix(op.Path, "/")] = op.Value
	}
	writeJSON(w, http.StatusOK, img)
}

// Put stores an image of this project as if an earlier run had made it.
func (f *Cloud) Put(name, status string, data []byte, tags ...string) string {
	return f.PutFor(nil, name, status, data, tags...)
}

// PutFor is Put with attributes and properties set or overridden: "owner" (another project's
// image), "visibility", "os_hidden", "os_version" ...
func (f *Cloud) PutFor(attrs map[string]any, name, status string, data []byte, tags ...string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	id := fmt.Sprintf("00000000-0000-0000-0000-%012d", f.nextID)
	img := map[string]any{"id": id, "name": name, "status": status, "disk_format": "raw", "container_format": "bare",
		"tags": append([]string{}, tags...), "size": nil, "visibility": "shared",
		"created_at": f.createdAt(), "owner": project, "os_hidden": false}
	maps.Copy(img, attrs)
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

// Has says whether image id exists.
func (f *Cloud) Has(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.images[id]
	return ok
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

// barbicanVersions is Barbican's version document.
func (f *Cloud) barbicanVersions(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusMultipleChoices, map[string]any{"versions": map[string]any{"values": []any{map[string]any{
		"id": "v1", "status": "stable", "links": []any{map[string]any{"rel": "self", "href": f.srv.URL + "/barbican/v1/"}}}}}})
}

// barbican wraps a Barbican handler: with BarbicanHangs it answers nothing until the client
// gives up.
func (f *Cloud) barbican(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		hang := f.hostile.BarbicanHangs
		f.mu.Unlock()
		if hang {
			<-r.Context().Done()
			return
		}
		h(w, r)
	}
}

// PutSecret stores a secret in Barbican as another user or tool would; it returns its UUID.
func (f *Cloud) PutSecret(name, secretType string, payload []byte) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	id := fmt.Sprintf("5ec0e700-0000-4000-8000-%012d", f.nextID)
	f.secrets[id] = map[string]any{"name": name, "secret_type": secretType, "status": "ACTIVE",
		"secret_ref": f.srv.URL + "/barbican/v1/secrets/" + id, "created": "2026-12-01T00:00:00", "content_types": map[string]any{"default": "application/octet-stream"}}
	f.payloads[id] = payload
	return id
}

// Secrets are the UUIDs of Barbican's secrets named name.
func (f *Cloud) Secrets(name string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for id, s := range f.secrets {
		if s["name"] == name {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

func (f *Cloud) listSecrets(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []map[string]any{}
	for _, id := range slices.Sorted(maps.Keys(f.secrets)) {
		if s := f.secrets[id]; !r.URL.Query().Has("name") || s["name"] == r.URL.Query().Get("name") {
			out = append(out, s)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"secrets": out, "total": len(out)})
}

func (f *Cloud) createSecret(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name, SecretType, Payload, PayloadContentEncoding string
	}
	var raw map[string]string
	if err := json.NewDecoder(r.Body).Decode(&raw); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"description": err.Error()})
		return
	}
	body.Name, body.SecretType, body.Payload, body.PayloadContentEncoding = raw["name"], raw["secret_type"], raw["payload"], raw["payload_content_encoding"]
	payload := []byte(body.Payload)
	if body.PayloadContentEncoding == "base64" {
		var err error
		if payload, err = base64.StdEncoding.DecodeString(body.Payload); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"description": err.Error()})
			return
		}
	}
	id := f.PutSecret(body.Name, body.SecretType, payload)
	writeJSON(w, http.StatusCreated, map[string]any{"secret_ref": f.srv.URL + "/barbican/v1/secrets/" + id})
}

func (f *Cloud) showSecret(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.secrets[r.PathValue("id")]
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"code": 404, "title": "Not Found", "description": "Secret not found."})
		return
	}
	writeJSON(w, http.StatusOK, s)
}

func (f *Cloud) secretPayload(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.payloads[r.PathValue("id")]
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"code": 404, "title": "Not Found", "description": "Secret not found."})
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Write(p)
}
