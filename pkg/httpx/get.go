package httpx

import (
	"context"
	"fmt"
	"io"
	"net/http"
)

// GetSmall downloads a small file whole (version.txt, DIGESTS.asc, a .sha256), retrying
// transient failures, within the stall timeout and the download deadline.
func (c *Client) GetSmall(ctx context.Context, url string, max int64) ([]byte, error) {
	return c.retried(ctx, http.MethodGet, url, max)
}

// Probe asks whether url exists with a HEAD request (retried like any other); nil means it does.
func (c *Client) Probe(ctx context.Context, url string) error {
	_, err := c.retried(ctx, http.MethodHead, url, 0)
	return err
}

// retried sends once until it succeeds, fails for good or runs out of retries. Only a GET
// logs its retries and says how many attempts it gave up after.
func (c *Client) retried(ctx context.Context, method, url string, max int64) ([]byte, error) {
	ctx, cancel := c.withDeadline(ctx, url)
	defer cancel()
	get := method == http.MethodGet
	for attempt := 1; ; attempt++ {
		b, err := c.once(ctx, method, url, max)
		if err != nil && ctx.Err() != nil {
			return nil, ended(ctx, 0)
		}
		if err == nil || !transient(ctx, err) || attempt > c.o.Retries {
			if err != nil && attempt > 1 && get {
				err = fmt.Errorf("%w (gave up after %d attempts)", err, attempt)
			}
			return b, err
		}
		if get {
			fmt.Fprintf(c.o.Log, "%v; retrying (%d/%d)\n", err, attempt, c.o.Retries)
		}
		if err := c.backoff(ctx, attempt); err != nil {
			return nil, ended(ctx, 0)
		}
	}
}

// once sends one GET or HEAD; a GET's body is read whole if it has at most max bytes.
func (c *Client) once(ctx context.Context, method, url string, max int64) ([]byte, error) {
	resp, err := c.request(ctx, method, url, 0)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, &StatusError{URL: url, Code: resp.StatusCode, Status: resp.Status}
	}
	if method == http.MethodHead {
		return nil, nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("GET %s: larger than %d bytes, not the small file expected here", url, max)
	}
	return b, nil
}
