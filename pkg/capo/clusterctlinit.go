package capo

// The clusterctl init variables of the feature gates a management cluster needs for what
// manifests renders: CABPK and KCP render Ignition only with KubeadmBootstrapFormatIgnition, and
// the core and KCP refuse every ClusterClass and topology Cluster without ClusterTopology.
const (
	GateIgnition = "EXP_KUBEADM_BOOTSTRAP_FORMAT_IGNITION=true"
	GateTopology = "CLUSTER_TOPOLOGY=true"
)

// clusterctlInit is the clusterctl init command that installs the providers the output needs.
func clusterctlInit(clusterClass bool) string {
	env := GateIgnition + " "
	if clusterClass {
		env += GateTopology + " "
	}
	return env + "clusterctl init --infrastructure openstack"
}
