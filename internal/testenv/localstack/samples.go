package localstack

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DecodeSample decodes config/samples/<file> of the repository at root into objs, in
// document order, and puts each into namespace ns: the sample as a user applies it,
// for the end-to-end tests and the demo to adjust (addresses, intervals) first.
func DecodeSample(root, file, ns string, objs ...client.Object) error {
	f, err := os.Open(filepath.Join(root, "config", "samples", file))
	if err != nil {
		return err
	}
	defer f.Close()
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	for _, o := range objs {
		if err := dec.Decode(o); err != nil {
			return fmt.Errorf("sample %s: %T: %w", file, o, err)
		}
		o.SetNamespace(ns)
	}
	return nil
}
