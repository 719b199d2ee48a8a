// Command bunzip2 decompresses stdin to stdout with pkg/bzip2; the bzip2
// benchmark (scripts/bench/bzip2.sh) times it against bzip2 and lbzip2.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"

	"github.com/flatcar-capo/flatcar-capo/pkg/bzip2"
)

func main() {
	workers := flag.Int("workers", 0, "decoding goroutines (0 = GOMAXPROCS)")
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
	zr := bzip2.NewReaderWorkers(bufio.NewReaderSize(os.Stdin, 1<<20), *workers)
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	_, err := io.Copy(w, zr)
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bunzip2:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}
