// Command flatcar-capo builds, retargets, converts and uploads Flatcar images for CAPO.
package main

import (
	"os"

	"github.com/flatcar-capo/flatcar-capo/pkg/cli"
)

func main() { os.Exit(cli.Execute()) }
