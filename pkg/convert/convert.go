// Package convert turns disk images from one format into another (raw and qcow2, both ways),
// writing the output atomically: a failed or interrupted conversion leaves no output file.
package convert

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/flatcar-capo/flatcar-capo/pkg/atomicfile"
	"github.com/flatcar-capo/flatcar-capo/pkg/disk"
	"github.com/flatcar-capo/flatcar-capo/pkg/errs"
	"github.com/flatcar-capo/flatcar-capo/pkg/progress"
	"github.com/flatcar-capo/flatcar-capo/pkg/qcow2"
	"github.com/flatcar-capo/flatcar-capo/pkg/vdisk"
)

// Options tune a conversion.
type Options struct {
	To       disk.Format // output format; "" picks it from the output's extension (OutputFormat)
	Compress bool        // qcow2 output: deflate clusters in parallel
	Compat   string      // qcow2 output: "1.1" (default) or "0.10"
	Workers  int         // 0: GOMAXPROCS
	// Sync waits until the output is on disk before renaming it into place. Off by default, as
	// in qemu-img convert: the rename alone keeps an interrupted run from leaving a partial output.
	Sync     bool
	Progress progress.Func // of the bytes of data written
	// Hash, on uncompressed qcow2 output, is given the output's bytes in order as they are
	// written (see qcow2.Options.Hash): the caller's digest of the file without a second read.
	Hash io.Writer
	// Mode of the output (0: 0644); 0600 for an image that carries a secret.
	Mode fs.FileMode
}

// Result describes a finished conversion.
type Result struct {
	Input        string      `json:"input"`
	Output       string      `json:"output"`
	InputFormat  disk.Format `json:"inputFormat"`
	OutputFormat disk.Format `json:"outputFormat"`
	Compressed   bool        `json:"compressed"`
	VirtualSize  int64       `json:"virtualSize"`
	DataBytes    int64       `json:"dataBytes"`   // bytes of the input that may hold data (holes excluded)
	OutputBytes  int64       `json:"outputBytes"` // length of the output file
	Seconds      float64     `json:"seconds"`
	Warnings     []string    `json:"warnings,omitempty"` // what the output needs before a cloud takes it (a hybrid MBR)
}

// OutputFormat returns the format to write: to when given, else from out's extension
// (.qcow2 -> qcow2, .raw and .bin -> raw). .img is ambiguous (Flatcar's .img files are qcow2).
func OutputFormat(out string, to disk.Format) (disk.Format, error) {
	switch to {
	case disk.FormatRaw, disk.FormatQcow2:
		return to, nil
	case "":
	default:
		return "", errs.Invalidf("unknown output format %q: use qcow2 or raw", to)
	}
	switch strings.ToLower(filepath.Ext(out)) {
	case ".qcow2":
		return disk.FormatQcow2, nil
	case ".raw", ".bin":
		return disk.FormatRaw, nil
	}
	return "", errs.Invalidf("cannot tell the output format from the name %s; give --to qcow2 or --to raw (Flatcar's .img files are qcow2)", out)
}

func compatVersion(compat string) (uint32, error) {
	switch compat {
	case "", "1.1", "v3":
		return 3, nil
	case "0.10", "v2":
		return 2, nil
	}
	return 0, errs.Invalidf("unknown qcow2 compat level %q: use 1.1 or 0.10", compat)
}

// File converts the image in to the file out, detecting in's format from its header.
func File(ctx context.Context, in, out string, opts Options) (Result, error) {
	start := time.Now()
	res := Result{Input: in, Output: out}
	format, err := OutputFormat(out, opts.To)
	if err != nil {
		return res, err
	}
	if _, err := compatVersion(opts.Compat); err != nil {
		return res, err
	}
	if opts.Compress && format != disk.FormatQcow2 {
		return res, errs.Invalidf("--compress needs qcow2 output, %s is %s", out, format)
	}
	if same, err := SameFile(in, out); err != nil {
		return res, err
	} else if same {
		return res, errs.Invalidf("the output %s is the input itself; write to another file", out)
	}
	img, err := disk.Open(in, false)
	if err != nil {
		return res, err
	}
	defer img.Close()
	res.InputFormat, res.OutputFormat, res.Compressed, res.VirtualSize = img.Format, format, opts.Compress, img.Size()
	if mbr, err := disk.ReadMBR(img.Disk); err == nil && mbr.Kind == disk.MBRHybrid {
		res.Warnings = append(res.Warnings, disk.HybridMBRAdvice(out))
	}
	if res.OutputBytes, res.DataBytes, err = Write(ctx, img.Disk, out, format, opts); err != nil {
		return res, fmt.Errorf("converting %s to %s: %w", in, out, err)
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// Write writes the virtual disk src to the file out in format, atomically. It returns the
// length of the output and the bytes of source data it read.
func Write(ctx context.Context, src vdisk.Disk, out string, format disk.Format, opts Options) (outBytes, dataBytes int64, err error) {
	version, err := compatVersion(opts.Compat)
	if err != nil {
		return 0, 0, err
	}
	if err := src.Extents(ctx, func(_, n int64) error { dataBytes += n; return nil }); err != nil {
		return 0, 0, err
	}
	prog := opts.Progress.Start("converting "+filepath.Base(out), dataBytes)
	defer prog.Finish()
	f, err := atomicfile.Create(out)
	if err != nil {
		return 0, 0, err
	}
	defer f.Abort()
	f.NoSync = !opts.Sync
	switch format {
	case disk.FormatQcow2:
		err = qcow2.Write(ctx, src, f.File, qcow2.Options{Compress: opts.Compress, Version: version, Workers: opts.Workers, Progress: prog, Hash: opts.Hash})
	case disk.FormatRaw:
		err = qcow2.CopyToRaw(ctx, src, f.File, opts.Workers, prog)
	default:
		err = errs.Invalidf("unknown output format %q", format)
	}
	if err != nil {
		return 0, 0, err
	}
	st, err := f.Stat()
	if err := cmp.Or(err, ctx.Err()); err != nil {
		return 0, 0, err
	}
	return st.Size(), dataBytes, f.Commit(cmp.Or(opts.Mode, 0o644))
}

// SameFile says whether the output path b names the input a (so writing b would destroy a); a
// missing b is not the same file, and a missing a is left for opening it to report.
func SameFile(a, b string) (bool, error) {
	sa, err := os.Stat(a)
	if err != nil {
		return false, nil // opening the input reports it
	}
	sb, err := os.Stat(b)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return os.SameFile(sa, sb), nil
}
