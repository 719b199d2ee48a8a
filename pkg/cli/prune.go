package cli

import (
	"cmp"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/flatcar-capo/flatcar-capo/pkg/fleet"
)

func newPruneCommand() *cobra.Command {
	var (
		ff        fleetFlags
		keep      int
		yes, hide bool
		protect   []string
	)
	cmd := &cobra.Command{
		Use:   "prune --cloud C[,C] [--keep N] [--yes | --hide]",
		Short: "Keep the newest N images of each channel, Kubernetes minor and method in each cloud; list or remove the rest",
		Long: `Among the images flatcar-capo uploaded (tagged flatcar-capo; nothing else is ever looked at)
that the credentials' project owns (other projects' public or shared images are never grouped,
kept or deleted), group each cloud's by channel, Kubernetes minor and build method (the flatcar_channel,
flatcar_capo_method and kubernetes_version properties upload sets, or build's default name),
order each group by Flatcar version, then Kubernetes patch, then upload time, and keep the newest
--keep of each. Without --yes or --hide this only lists what would go.

--yes deletes the rest. --hide sets os_hidden instead: the images stay bootable by ID, so running
clusters and their MachineDeployments keep working, while image lists and CAPO's name filter skip
them. Images named in a --protect file (manifests, build records: any name or ID in them) are never
touched, nor are images still uploading or whose slot cannot be told. --channel, --method and
--kubernetes-version narrow what is considered. -o json for CI.

--keep is 1 or more: --keep 0 is refused (exit 2), since keeping none would delete the image
every new node of a slot boots from; delete a slot's last image by ID if that is really meant.
An image Glance lists twice gets one decision, and a listing whose pages repeat is refused.`,
		Example: `  flatcar-capo prune --cloud east,west --keep 2
  flatcar-capo prune --cloud east --keep 1 --hide --protect cluster.yaml
  flatcar-capo prune --config fleet.yaml --yes -o json`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			ff.c.Keep = keep
			rep, err := fleet.Prune(cmd.Context(), fleet.PruneRequest{ConfigFile: ff.config, Flags: ff.c, Yes: yes, Hide: hide,
				KeepGiven: cmd.Flags().Changed("keep"), Protect: protect})
			if rep == nil {
				return err
			}
			return cmp.Or(report(cmd, rep, func(w io.Writer) error { return printPrune(w, rep) }), err)
		},
	}
	f := cmd.Flags()
	addFleetFlags(f, &ff)
	f.IntVar(&keep, "keep", 0, "images kept per channel, Kubernetes minor and method in each cloud (default 1, or keep in --config)")
	f.BoolVar(&yes, "yes", false, "delete the images prune lists (without it nothing changes)")
	f.BoolVar(&hide, "hide", false, "hide the images (os_hidden) instead of deleting them")
	f.StringArrayVar(&protect, "protect", nil, "manifest, build record or directory of them in use: every image they name is kept (repeatable)")
	addOutputFlag(f)
	return cmd
}

func printPrune(w io.Writer, rep *fleet.PruneReport) error {
	if len(rep.Decisions) == 0 {
		fmt.Fprintln(w, "no flatcar-capo images found")
		return nil
	}
	ds := append([]fleet.Decision{}, rep.Decisions...)
	sort.SliceStable(ds, func(i, j int) bool { return ds[i].Cloud < ds[j].Cloud })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLOUD\tACTION\tIMAGE\tID\tWHY")
	counts := map[string]int{}
	for _, d := range ds {
		action := d.Action
		if rep.DryRun && (action == fleet.Delete || action == fleet.Hide) {
			action = "would " + action
		} else if d.Error != "" {
			action += " FAILED"
		}
		counts[d.Action]++
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", printable(d.Cloud), action, printable(d.Name), printable(d.ID), printable(d.Reason))
	}
	tw.Flush()
	if rep.DryRun && counts[fleet.Delete] > 0 {
		fmt.Fprintf(w, "%d image(s) would be deleted: run again with --yes to delete them, or --hide to hide them\n", counts[fleet.Delete])
	}
	return nil
}

// printable is s as it is, or quoted with Go escapes when it holds control characters or
// invalid UTF-8: an image name is anyone's text, and a terminal must not run its escapes.
func printable(s string) string {
	if utf8.ValidString(s) && strings.IndexFunc(s, unicode.IsControl) < 0 {
		return s
	}
	return strconv.Quote(s)
}
