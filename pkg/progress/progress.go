// Package progress is the one place that reports byte progress: a bar on a terminal, plain
// periodic lines when stderr is a pipe (CI logs stay readable), nothing when quiet.
package progress

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Mode selects how progress is shown.
type Mode int

const (
	Auto  Mode = iota // bar on a terminal, lines otherwise
	Lines             // always plain lines
	Quiet             // nothing
)

// Reporter counts bytes; it is an io.Writer so it can sit in an io.TeeReader/MultiWriter.
type Reporter interface {
	io.Writer
	Add(n int64)
	Finish()
}

// Func starts the reporter of one transfer of total bytes (total <= 0 when unknown) described
// by label: the one progress option every package takes. nil shows nothing.
type Func func(label string, total int64) Reporter

// None is the reporter that shows nothing.
var None Reporter = quiet{}

// Start is f's reporter for one transfer, None when f is nil.
func (f Func) Start(label string, total int64) Reporter {
	if f == nil {
		return None
	}
	return f(label, total)
}

// To reports every transfer on w in mode; nil when mode is Quiet.
func To(w io.Writer, mode Mode) Func {
	f, fd := w.(interface{ Fd() uintptr }) // os.File, or the CLI's redacting wrapper around one
	switch {
	case mode == Quiet:
		return nil
	case mode == Auto && fd && term.IsTerminal(int(f.Fd())):
		return func(label string, total int64) Reporter {
			return &bar{b: progressbar.NewOptions64(total,
				progressbar.OptionSetWriter(w),
				progressbar.OptionSetDescription(label),
				progressbar.OptionShowBytes(true),
				progressbar.OptionThrottle(100*time.Millisecond),
				progressbar.OptionClearOnFinish(),
			)}
		}
	}
	return func(label string, total int64) Reporter {
		return &lines{w: w, label: label, total: total, start: time.Now(), every: 5 * time.Second}
	}
}

type quiet struct{}

func (quiet) Write(p []byte) (int, error) { return len(p), nil }
func (quiet) Add(int64)                   {}
func (quiet) Finish()                     {}

type bar struct{ b *progressbar.ProgressBar }

func (b *bar) Write(p []byte) (int, error) { b.b.Add64(int64(len(p))); return len(p), nil }
func (b *bar) Add(n int64)                 { b.b.Add64(n) }
func (b *bar) Finish()                     { b.b.Finish() }

// lines prints "label: 1.2 GiB / 4.0 GiB (30%), 110 MiB/s" at most every few seconds.
type lines struct {
	mu          sync.Mutex
	w           io.Writer
	label       string
	total, done int64
	start, last time.Time
	every       time.Duration
}

func (l *lines) Write(p []byte) (int, error) { l.Add(int64(len(p))); return len(p), nil }

func (l *lines) Add(n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done += n
	if now := time.Now(); now.Sub(l.last) >= l.every {
		if !l.last.IsZero() {
			l.print(now)
		}
		l.last = now
	}
}

func (l *lines) Finish() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.print(time.Now())
}

func (l *lines) print(now time.Time) {
	rate := float64(l.done) / now.Sub(l.start).Seconds()
	if l.total > 0 {
		// Producers may count whole clusters or blocks against an exact total: never show >100%.
		done := min(l.done, l.total)
		fmt.Fprintf(l.w, "%s: %s / %s (%d%%), %s/s\n", l.label, Bytes(done), Bytes(l.total), done*100/l.total, Bytes(int64(rate)))
	} else {
		fmt.Fprintf(l.w, "%s: %s, %s/s\n", l.label, Bytes(l.done), Bytes(int64(rate)))
	}
}

// Bytes formats a byte count with binary units.
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
