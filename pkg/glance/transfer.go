package glance

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/flatcar-capo/flatcar-capo/pkg/progress"
	"github.com/flatcar-capo/flatcar-capo/pkg/redact"
)

// putData streams size bytes of file into the image's data, with a Content-Length (gophercloud's
// imagedata.Upload sends a chunked body that Glance behind uWSGI can refuse) and computes the
// sha512 of exactly the bytes sent. A 401 (token revoked or expired meanwhile) re-authenticates
// and starts over once.
func putData(ctx context.Context, c *Cloud, id string, open Opener, size int64, rep progress.Reporter) (string, error) {
	url := c.Image.ServiceURL("images", id, "file")
	for attempt := 0; ; attempt++ {
		sum, status, token, err := putOnce(ctx, c, url, open, size, rep)
		if err != nil {
			return "", err
		}
		switch {
		case status == http.StatusNoContent || status == http.StatusOK || status == http.StatusCreated:
			return sum, nil
		case status == http.StatusUnauthorized && attempt == 0:
			if err := c.Provider.Reauthenticate(ctx, token); err != nil {
				return "", fmt.Errorf("re-authenticating after the token was refused: %w", err)
			}
			continue
		}
		return "", &httpStatusError{Method: http.MethodPut, URL: url, Status: status}
	}
}

func putOnce(ctx context.Context, c *Cloud, url string, open Opener, size int64, rep progress.Reporter) (sum string, status int, token string, err error) {
	ra, closer, err := open()
	if err != nil {
		return "", 0, "", err
	}
	defer closer.Close()
	var body io.Reader
	var wait func() (string, error)
	if f, ok := ra.(*os.File); ok {
		hctx, cancel := context.WithCancel(ctx)
		if body, wait, err = sendfileBody(hctx, f, size, rep); err != nil {
			cancel()
			return "", 0, "", err
		}
		defer func() { cancel(); wait() }() // a failed request stops the hashing too
	} else {
		h := sha512.New()
		body = io.TeeReader(io.NewSectionReader(ra, 0, size), io.MultiWriter(h, rep))
		wait = func() (string, error) { return hex.EncodeToString(h.Sum(nil)), nil }
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, io.NopCloser(body))
	if err != nil {
		return "", 0, "", err
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("User-Agent", c.Provider.UserAgent.Join())
	for k, v := range c.Provider.AuthenticatedHeaders() {
		req.Header.Set(k, v)
	}
	token = req.Header.Get("X-Auth-Token")
	resp, err := c.Provider.HTTPClient.Do(req)
	if err != nil {
		return "", 0, token, err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	sum, err = wait()
	if err == nil && resp.StatusCode >= 400 && resp.StatusCode != http.StatusUnauthorized {
		err = &httpStatusError{Method: http.MethodPut, URL: url, Status: resp.StatusCode, Body: answer}
	}
	return sum, resp.StatusCode, token, err
}

// sendfileBody sends a plain file with sendfile(2) (net/http hands an *os.File inside an
// io.LimitedReader to the kernel): no copy through this process, and Glance's socket stays full.
// The sha512 is computed meanwhile by a second reader of the same file, and progress follows
// the file position that sendfile advances.
func sendfileBody(ctx context.Context, f *os.File, size int64, rep progress.Reporter) (io.Reader, func() (string, error), error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, nil, err
	}
	var sum string
	var hashErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		sum, hashErr = hashData(ctx, func() (io.ReaderAt, io.Closer, error) { return f, io.NopCloser(nil), nil }, size, "sha512", progress.None)
	})
	stop := make(chan struct{})
	wg.Go(func() { // progress: the file position is how far sendfile got
		var last int64
		report := func() {
			if pos, err := f.Seek(0, io.SeekCurrent); err == nil && pos > last {
				rep.Add(pos - last)
				last = pos
			}
		}
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				report()
				return
			case <-t.C:
				report()
			}
		}
	})
	wait := sync.OnceValues(func() (string, error) { // called on success and deferred for failures
		close(stop)
		wg.Wait()
		return sum, hashErr
	})
	return &io.LimitedReader{R: f, N: size}, wait, nil
}

// httpStatusError is an unexpected answer from Glance; 5xx ones are worth a retry.
type httpStatusError struct {
	Method, URL string
	Status      int
	Body        []byte // Glance's explanation (a 400 says why: a refused image signature)
}

func (e *httpStatusError) Error() string {
	if bytes.Contains(e.Body, []byte("Signature verification failed")) {
		return fmt.Sprintf("Glance refused the image signature (HTTP %d: %s): the signature is not of these bytes, or not made by the key of the certificate in Barbican", e.Status, glanceExplanation(e.Body, e.Status))
	}
	msg := fmt.Sprintf("%s %s: Glance answered HTTP %d %s", e.Method, e.URL, e.Status, http.StatusText(e.Status))
	if len(e.Body) > 0 && e.Status < 500 {
		msg += ": " + glanceExplanation(e.Body, e.Status)
	}
	return msg
}

// glanceExplanation is the one line webob's error page carries, without its HTML and without
// the status line it repeats.
func glanceExplanation(body []byte, status int) string {
	s := strings.TrimPrefix(redact.Excerpt(body, 300), "an HTML page: ")
	line := strconv.Itoa(status) + " " + http.StatusText(status)
	for {
		t := strings.TrimLeft(strings.TrimPrefix(s, line), ": ")
		if t == s {
			return s
		}
		s = t
	}
}

// newHash returns the hash Glance names os_hash_algo (sha512 unless the operator changed it).
func newHash(algo string) (hash.Hash, error) {
	switch algo {
	case "sha512", "":
		return sha512.New(), nil
	case "sha384":
		return sha512.New384(), nil
	case "sha256":
		return sha256.New(), nil
	case "sha1":
		return sha1.New(), nil
	case "md5":
		return md5.New(), nil
	}
	return nil, fmt.Errorf("Glance hashes images with %q, which flatcar-capo does not know", algo)
}

// Opener opens the bytes to upload: the file itself, or a qcow2 stream made from a raw file.
type Opener func() (io.ReaderAt, io.Closer, error)

// fileOpener opens a file as it is.
func fileOpener(path string) Opener {
	return func() (io.ReaderAt, io.Closer, error) {
		f, err := os.Open(path)
		return f, f, err
	}
}

// hashData computes algo over the first size bytes of the data, reporting progress.
func hashData(ctx context.Context, open Opener, size int64, algo string, rep progress.Reporter) (string, error) {
	h, err := newHash(algo)
	if err != nil {
		return "", err
	}
	f, closer, err := open()
	if err != nil {
		return "", err
	}
	defer closer.Close()
	sink := io.MultiWriter(h, rep)
	r := io.NewSectionReader(f, 0, size)
	buf := make([]byte, 1<<20)
	for {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		n, err := r.Read(buf)
		sink.Write(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", fmt.Errorf("reading the image: %w", err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// isTransient tells whether an error may go away on its own (network, 5xx, throttling).
func isTransient(err error) bool {
	if err == nil {
		return false
	}
	status := 0
	var se *httpStatusError
	var ge *glanceHTTPError
	var ue gophercloud.ErrUnexpectedResponseCode
	switch {
	case errors.As(err, &se):
		status = se.Status
	case errors.As(err, &ge):
		status = ge.status
	case errors.As(err, &ue):
		status = ue.Actual
	default:
		return isNetworkError(err)
	}
	return status >= 500 || status == http.StatusRequestTimeout || status == http.StatusTooManyRequests
}

// isNetworkError is true for a Glance that went away or never answered.
func isNetworkError(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	return errors.As(err, new(net.Error)) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
