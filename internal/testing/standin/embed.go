package standin

import "embed"

// guestFiles are the units, scripts and configs laid over the Debian root (paths from /).
//
//go:embed all:guest
var guestFiles embed.FS
