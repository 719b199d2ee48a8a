package httpx

import "net/http"

// Transport is the client's round tripper, for the tests of what other HTTP users get.
func (c *Client) Transport() http.RoundTripper { return c.http.Transport }
