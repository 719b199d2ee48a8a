//go:build race

package testutil

// raceBuild: this test binary runs under the race detector, so Binary builds the command with
// -race too and the command tests check the real command paths for races.
const raceBuild = true
