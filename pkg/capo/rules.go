package capo

// Severity of a finding: errors make `lint` exit 1.
type Severity string

const (
	severityError   Severity = "error"
	severityWarning Severity = "warning"
)

// rule describes one check; docs/lint-rules.md lists the same catalog.
type rule struct {
	ID       string   `json:"id"`
	Severity Severity `json:"severity"`
	Summary  string   `json:"summary"`
	Fix      string   `json:"fix"`
}

// Rule IDs.
const (
	ruleYAML             = "yaml-invalid"
	ruleUnknownField     = "unknown-field"
	ruleCAPIValidation   = "capi-validation"
	ruleFlatcarFormat    = "flatcar-format"
	ruleRetryJoin        = "retry-join-ignition"
	ruleGzip             = "ignition-gzip"
	ruleBase64OldCAPI    = "ignition-base64"
	ruleCLCInvalid       = "clc-invalid"
	ruleCLCWarning       = "clc-warning"
	ruleVariableSyntax   = "clusterctl-variable"
	ruleUncheckedAPI     = "api-version-unchecked"
	ruleKubeadmOrdering  = "kubeadm-after-containerd"
	ruleEnvironmentFile  = "metadata-environment-file"
	ruleNodeName         = "node-name-metadata"
	ruleProviderID       = "provider-id-metadata"
	ruleEnvsubst         = "metadata-envsubst"
	ruleUserDataSize     = "user-data-size"
	ruleCABPKRender      = "cabpk-render"
	ruleFormatImmutable  = "format-immutable"
	ruleImageFilter      = "image-filter"
	ruleAdditionalSize   = "additional-config-size"
	ruleRootVolume       = "root-volume-min-disk"
	kubeadmDropinExample = `systemd:
  units:
  - name: kubeadm.service
    enabled: true
    dropins:
    - name: 10-flatcar.conf
      contents: |
        [Unit]
        Requires=containerd.service coreos-metadata.service
        After=containerd.service coreos-metadata.service
        [Service]
        EnvironmentFile=/run/metadata/flatcar`
)

// rules is the catalog, in the order findings are documented.
var rules = []rule{
	{ruleYAML, severityError, "The file is not valid YAML (or a document is not a mapping).",
		"Fix the YAML syntax at the reported line; nothing after it was checked."},
	{ruleUnknownField, severityWarning, "A field that the upstream Go type of the document (CAPI v1beta1/v1beta2, CAPO v1beta1) does not have: the API server rejects it under strict field validation or drops it silently.",
		"Check the spelling and the API version; move the field to where the type defines it."},
	{ruleCAPIValidation, severityError, "CAPI's own admission webhook refuses the document (KubeadmControlPlane, KubeadmControlPlaneTemplate, KubeadmConfig, KubeadmConfigTemplate, ClusterClass of v1beta2; CAPI v1.14.2's validation, run without a cluster as a management cluster with the KubeadmBootstrapFormatIgnition and ClusterTopology feature gates runs it): kubectl apply and clusterctl fail with this message.",
		"Change the field the message names as it says. For the init/join timeouts: set controlPlaneComponentHealthCheckSeconds to the same value in initConfiguration.timeouts and joinConfiguration.timeouts (flatcar-capo manifests renders both)."},
	{ruleUncheckedAPI, severityWarning, "A Cluster API or ORC document whose apiVersion/kind this flatcar-capo has no upstream Go type for, so its fields are not checked (a misspelt field goes unnoticed). CAPO's infrastructure.cluster.x-k8s.io/v1beta2 (CAPO v0.15) is one: its Go module is not available to this build, which knows CAPO v0.14.7's v1beta1.",
		"Check the document with the provider's own validation (kubectl apply --dry-run=server against a management cluster with that CAPO), or use the infrastructure.cluster.x-k8s.io/v1beta1 documents that flatcar-capo manifests renders (CAPO v0.14's API, checked)."},
	{ruleFlatcarFormat, severityError, "A MachineDeployment, MachineSet, Machine or KubeadmControlPlane pairs a Flatcar image with a bootstrap config whose format is cloud-config (the default): Flatcar has no cloud-init and the node never joins.",
		"Set format: ignition in the KubeadmConfigSpec and add the Ignition settings (flatcar-capo manifests shows a complete template); CAPI needs EXP_KUBEADM_BOOTSTRAP_FORMAT_IGNITION=true."},
	{ruleRetryJoin, severityError, "useExperimentalRetryJoin is set together with format: ignition; CABPK does not support it with Ignition.",
		"Remove useExperimentalRetryJoin (flatcar-capo manifests' kubeadm.service drop-in runs a failed kubeadm again, up to 10 times, 30 s apart: an init whose etcd started resumes, any other retry runs after kubeadm reset; a node that still fails is replaced by a MachineHealthCheck)."},
	{ruleGzip, severityError, "A file uses gzip or gzip+base64 encoding with format: ignition; CABPK's Ignition output does not support it.",
		"Store the file uncompressed (plain or base64 encoding), or ship it through additionalConfig."},
	{ruleBase64OldCAPI, severityError, "A base64-encoded file with format: ignition on CAPI before 1.2.0: the file is written to disk still encoded.",
		"Upgrade CAPI to 1.2.0 or newer, or store the content as plain text."},
	{ruleCLCInvalid, severityError, "additionalConfig is not a valid Container Linux Config: the transpiler (or Ignition's validation of its output) refuses it, so CABPK produces no bootstrap data; or it warns and the config sets strict: true, under which CABPK refuses every warning.",
		"Correct the reported line of additionalConfig (the transpiler's message says what it expects)."},
	{ruleCLCWarning, severityWarning, "The Container Linux Config transpiler warns about additionalConfig (an unrecognized key, a default it applies such as mode 0644), or cannot check a value that a clusterctl variable without a default gives. With strict: false (the default) CABPK logs the warning and keeps the config: the content behind an unrecognized key is dropped, a defaulted file is written.",
		"Read the transpiler's message: correct an unrecognized key, or state the default (e.g. mode: 0644) to silence it; give a variable a default (${VAR:=value}) to have its value checked."},
	{ruleVariableSyntax, severityError, "A ${...} reference that clusterctl's envsubst (drone/envsubst) refuses, such as ${VAR-default} or an unclosed brace: clusterctl generate cluster fails on the whole template.",
		"Use a form envsubst accepts (${VAR}, ${VAR:=default}, ${VAR:-default}, ${VAR%suffix}, ...), or escape it as $${...} when the shell on the node should see it."},
	{ruleKubeadmOrdering, severityError, "kubeadm.service is not ordered after containerd.service: kubeadm can start before the container runtime and fail (image-builder #939).",
		"Add a kubeadm.service drop-in in additionalConfig:\n" + kubeadmDropinExample},
	{ruleEnvironmentFile, severityError, "kubeadm.service does not load EnvironmentFile=/run/metadata/flatcar, so the COREOS_OPENSTACK_* variables from coreos-metadata are not available to envsubst in preKubeadmCommands. systemd does not expand globs such as /run/metadata/*.",
		"Add EnvironmentFile=/run/metadata/flatcar to the kubeadm.service drop-in (and Requires/After=coreos-metadata.service)."},
	{ruleNodeName, severityError, "nodeRegistration.name does not come from coreos-metadata; on OpenStack the node name must be the instance's hostname for the cloud provider to find it.",
		"Set nodeRegistration.name: ${COREOS_OPENSTACK_HOSTNAME} ($${COREOS_OPENSTACK_HOSTNAME} in a clusterctl template) and substitute it with envsubst in preKubeadmCommands."},
	{ruleProviderID, severityError, "The kubelet's provider-id is missing or does not come from coreos-metadata; CAPI matches Machines to Nodes by providerID.",
		"Set kubeletExtraArgs provider-id: openstack:///${COREOS_OPENSTACK_INSTANCE_UUID} (needs Flatcar 3815.2.0 or newer)."},
	{ruleEnvsubst, severityError, "The kubeadm configuration uses ${COREOS_OPENSTACK_*} but no preKubeadmCommand runs envsubst on /etc/kubeadm.yml, so kubeadm sees the literal text.",
		"Add to preKubeadmCommands: install -m 0600 /dev/null /etc/kubeadm.yml.tmp (it holds the bootstrap token), envsubst < /etc/kubeadm.yml > /etc/kubeadm.yml.tmp and mv /etc/kubeadm.yml.tmp /etc/kubeadm.yml."},
	{ruleUserDataSize, severityError, "The estimated user-data (CABPK's Ignition config, base64-encoded as Nova receives it) is over Nova's 65535-byte limit: the server create call fails.",
		"Move large files out of the bootstrap config: download them in preKubeadmCommands or bake them into the image."},
	{ruleCABPKRender, severityError, "CABPK's own Ignition renderer (sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/ignition, CAPI v1.14.2; the same code in 1.12 and 1.13) refuses the bootstrap config: it writes no bootstrap data Secret and the Machine never boots. A files[] entry without permissions is the usual cause: CABPK reads the Container Linux Config it makes of files[] strictly and gives no default mode.",
		"Set permissions on every files[] entry (for example \"0644\", or \"0600\" for secrets); otherwise change what the message names."},
	{ruleFormatImmutable, severityError, "A KubeadmControlPlane changes its format (for example from Ubuntu's cloud-config to Flatcar's ignition) on a CAPI release whose webhook refuses that: format is mutable from CAPI 1.4.0, 1.3.6 and 1.2.12.",
		"Upgrade CAPI to 1.4.0 or newer (or 1.3.6+, 1.2.12+) first. Then, in one update of the KubeadmControlPlane, set format: ignition with the Ignition settings, remove useExperimentalRetryJoin, and point machineTemplate at a new OpenStackMachineTemplate with the Flatcar image; KCP replaces the control plane machines one by one. (Unsetting useExperimentalRetryJoin was itself refused until kubernetes-sigs/cluster-api#9169 was fixed.)"},
	{ruleImageFilter, severityError, "The OpenStackMachineTemplate's image filter does not match exactly one active Glance image in the given cloud, or its imageRef names an ORC Image that is not among the linted objects (or whose import filter does not match exactly one image): CAPO refuses to create the machine.",
		"Upload the image (flatcar-capo upload), or make the name/tags unique; delete or deactivate duplicates. For imageRef, add the ORC Image (flatcar-capo manifests --image-ref orc writes it) in the same namespace."},
	{ruleAdditionalSize, severityError, "additionalConfig is longer than 32768 bytes, the MaxLength CAPI v1.14's API puts on ignition.containerLinuxConfig.additionalConfig: the API server refuses the object.",
		"Move large files out of additionalConfig: download them (storage.files with remote and verification.hash) or bake them into the image."},
	{ruleRootVolume, severityWarning, "An OpenStackMachineTemplate's rootVolume.sizeGiB is below the image's min_disk (from --from-record or the cloud): Nova refuses to create the server.",
		"Raise rootVolume.sizeGiB to at least the image's min_disk (its virtual size, rounded up to whole GiB)."},
}

// ruleByID returns the catalog entry of a rule.
func ruleByID(id string) rule {
	for _, r := range rules {
		if r.ID == id {
			return r
		}
	}
	panic("unknown lint rule " + id)
}
