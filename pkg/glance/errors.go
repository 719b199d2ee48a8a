package glance

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
)

// isNetworkError is true for a Glance that went away or never answered.
func isNetworkError(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	return errors.As(err, new(net.Error)) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
