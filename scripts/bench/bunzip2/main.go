// Command bunzip2 decompresses stdin to stdout with github.com/dsnet/compress/bzip2, read as
// `fetch` reads it (pkg/fetch/pipeline.go); the bzip2 benchmark (scripts/bench/bzip2.sh) times it
// against bzip2 and lbzip2.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"

	"github.com/dsnet/compress/bzip2"
)

func main() {
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile to this file")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bunzip2:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "bunzip2:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	zr, err := bzip2.NewReader(bufio.NewReaderSize(os.Stdin, 64<<10), nil)
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	if err == nil {
		_, err = io.CopyBuffer(w, zr, make([]byte, 1<<20))
	}
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bunzip2:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}
