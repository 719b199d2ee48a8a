// Package cli holds the cobra commands: one file per verb, flag parsing, report format and exit
// codes. Logic lives in the other packages under pkg/.
package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flatcar-capo/flatcar-capo/pkg/interrupt"
	"github.com/flatcar-capo/flatcar-capo/pkg/redact"
)

// Exit codes shared by every command.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitInterrupted = 130
)

// Version is set at build time with -ldflags "-X github.com/flatcar-capo/flatcar-capo/pkg/cli.Version=...".
var Version = "dev"

// NewRootCommand builds the whole command tree.
func NewRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "flatcar-capo",
		Short: "Build, retarget, convert and upload Flatcar images for Cluster API Provider OpenStack",
		Long: `flatcar-capo turns a published Flatcar Container Linux release into an image that boots
correctly on OpenStack under Cluster API Provider OpenStack (CAPO), without root.

The main job, all steps in one: build a CAPO-ready image (Kubernetes installed by a Packer QEMU
build, or baked in as a systemd-sysext without a VM), set its OEM, convert and upload it:

  build      flatcar-capo build --oem openstack --channel stable [--method sysext] [--cloud NAME]

Every step of the pipeline is also a command of its own:

  release    resolve a channel/version to artifact URLs
  fetch      download, verify (OpenPGP + SHA512) and decompress a release image
  convert    qcow2 <-> raw, streaming and sparse-aware
  oem        show or set the OEM settings (flatcar.oem.id) in the image's OEM partition
  inspect    report partitions, OEM settings and a readiness verdict for a target cloud
  upload     upload to Glance, verified and idempotent
  manifests  render CAPO cluster templates for Flatcar nodes
  lint       find the Ignition pitfalls in existing CAPO manifests
  sysext     make or inspect a Kubernetes systemd-sysext image

Conventions: -o/--output text|json selects the report format; a file a command writes is named
with --output-file; flags can also be set through FLATCAR_CAPO_<FLAG> environment variables
(for example FLATCAR_CAPO_OUTPUT=json; a repeatable flag's help says whether its variable is a
comma-separated list, like FLATCAR_CAPO_CLOUD=east,west, or one value). Exit codes: 0 ok,
1 failure, 2 usage error or invalid value, 130 interrupted (the message says what was left).`,
		Example: `  # Make a downloaded qemu image boot correctly on OpenStack (Ignition reads Nova user-data)
  flatcar-capo oem set flatcar.raw --id openstack

  # Check an image before uploading it; exits 1 when it is not ready for the target
  flatcar-capo inspect flatcar.raw --for openstack`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       Version,
	}
	root.SetVersionTemplate("flatcar-capo {{.Version}}\n")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usagef("%v (see '%s --help')", err, c.CommandPath())
	})
	// Each verb's constructor is in the verb's own file.
	root.AddCommand(newBuildCommand(), newConvertCommand(), newFetchCommand(), newInspectCommand(), newLintCommand(),
		newManifestsCommand(), newOEMCommand(), newPlanCommand(), newPruneCommand(), newReleaseCommand(),
		newSysextCommand(), newUploadCommand(), newVerifyCommand(), newVersionCommand())
	root.InitDefaultCompletionCmd() // cobra adds it only when executing; the walk below needs it now
	rejectUnknownSubcommands(root)
	argsAreUsage(root)
	documentEnv(root)
	markInputs(root)
	root.PersistentPreRunE = func(c *cobra.Command, args []string) error {
		if err := applyEnvDefaults(c); err != nil {
			return err
		}
		return checkInputs(c, args)
	}
	return root
}

// Execute runs the CLI with os.Args and returns the process exit code.
func Execute() int {
	return Run(os.Args[1:], os.Stdout, os.Stderr)
}

// Run runs the CLI with the given arguments; it is what main and in-process tests call.
func Run(args []string, stdout, stderr io.Writer) int {
	// No credential given in a URL (--release-server http://u:SECRET@...) is ever shown: every
	// message goes through redact, and the values themselves are masked wherever they appear.
	registerURLSecrets(args)
	stderr = redact.Writer(stderr)
	out := &countingWriter{w: stdout}
	ctx, stop := interruptContext(stderr)
	defer stop()
	root := NewRootCommand()
	root.SetArgs(args)
	root.SetOut(out)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	code := exitCode(ctx, err)
	if out.n == 0 && wantsJSON(cmd) {
		left, _, _ := interrupt.Report(err)
		je := jsonError{Error: redact.String(err.Error()), ExitCode: code, Left: nonNil(left)}
		for i := range je.Left {
			je.Left[i] = redact.String(je.Left[i])
		}
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		enc.Encode(je)
	}
	if code == exitInterrupted {
		reportInterrupted(stderr, cmd, err)
		return code
	}
	fmt.Fprintf(stderr, "Error: %s\n", redact.String(err.Error()))
	return code
}

// rejectUnknownSubcommands makes every command group (a command with subcommands and no action
// of its own) fail with "unknown command", exit 2, on an unknown subcommand. Cobra checks that
// only on the root; elsewhere `oem sett x.img` printed help and exited 0, a silent no-op in a CI
// script. Called on the whole tree, so groups added later get it too. A bare group prints help.
func rejectUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		rejectUnknownSubcommands(sub)
	}
	if !c.HasSubCommands() || c.Run != nil || c.RunE != nil {
		return
	}
	c.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if cmd.SuggestionsMinimumDistance <= 0 {
			cmd.SuggestionsMinimumDistance = 2 // cobra's default, set only on its own root path
		}
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += fmt.Sprintf("; did you mean %s?", strings.Join(s, " or "))
		}
		return usagef("%s (see '%s --help')", msg, cmd.CommandPath())
	}
	c.RunE = func(cmd *cobra.Command, args []string) error { return cmd.Help() }
}
