package deploy

import (
	"fmt"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// validator checks manifests offline against the Kubernetes API as this
// module's k8s.io/api and client-go define it. No JSON schemas of the
// API can be fetched here (kubeconform's come from a host this machine
// does not reach), so each document is instead
//   - decoded strictly into its typed Go object (k8s.io/api, or the
//     Prometheus Operator's for a ServiceMonitor): an unknown or
//     duplicate field, a value of the wrong type, or an unknown
//     apiVersion or kind is an error;
//   - converted to the API server's structured schema (the OpenAPI
//     schema client-go compiles in for server-side apply), which also
//     refuses duplicate keys in keyed lists (two containers, ports or
//     environment variables of one name).
//
// Neither checks that required fields are present, nor the API server's
// semantic validation (names, ranges).
type validator struct {
	decoder   runtime.Decoder
	converter managedfields.TypeConverter
}

func newValidator(t *testing.T) *validator {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := monitoringv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	codecs := serializer.NewCodecFactory(scheme, serializer.EnableStrict)
	return &validator{decoder: codecs.UniversalDeserializer(), converter: applyconfigurations.NewTypeConverter(scheme)}
}

// validate returns the typed object of one manifest, or why it is not
// valid.
func (v *validator) validate(doc string) (runtime.Object, error) {
	obj, gvk, err := v.decoder.Decode([]byte(doc), nil, nil)
	if err != nil {
		return nil, err
	}
	if gvk.Group == monitoringv1.SchemeGroupVersion.Group {
		return obj, nil // a custom resource: client-go has no schema of it
	}
	if _, err := v.converter.ObjectToTyped(obj); err != nil {
		return nil, fmt.Errorf("%s: %w", gvk.Kind, err)
	}
	return obj, nil
}
