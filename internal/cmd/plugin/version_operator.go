package plugin

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
)

// versionLabel is the recommended label the Helm chart sets to its appVersion.
const versionLabel = "app.kubernetes.io/version"

// OperatorVersion is the version of the operator a manager Deployment runs: the tag
// of the manager container's image, which both installs set (`kustomize edit set
// image`, the chart's image.tag defaulting to appVersion). An image pinned by digest
// has no tag; then the version label says it, else the version is unknown.
func OperatorVersion(d appsv1.Deployment) string {
	ref := managerImage(d)
	if i := strings.LastIndex(ref, "@"); i >= 0 {
		if v := d.Labels[versionLabel]; v != "" {
			return v
		}
		return "unknown (image pinned by digest)"
	}
	name := ref[strings.LastIndex(ref, "/")+1:] // a registry's host:port is not a tag
	if i := strings.LastIndex(name, ":"); i >= 0 {
		return name[i+1:]
	}
	return "latest"
}

// managerImage is the image of the container named manager (the first container when
// none is).
func managerImage(d appsv1.Deployment) string {
	cs := d.Spec.Template.Spec.Containers
	for _, c := range cs {
		if c.Name == "manager" {
			return c.Image
		}
	}
	if len(cs) > 0 {
		return cs[0].Image
	}
	return ""
}

// describeManager says where the operator runs, its image and how many replicas are
// ready.
func describeManager(d appsv1.Deployment) string {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	return fmt.Sprintf("Deployment %s/%s, image %s, %d/%d ready", d.Namespace, d.Name, managerImage(d), d.Status.ReadyReplicas, want)
}
