package deploy_test

// The manifests against the Kubernetes API types, with no cluster: every object, as written and as kustomize
// renders it, decodes strictly (no unknown or duplicate field, every value of its field's JSON type: a quoted
// number for an integer field fails, quantities and int-or-strings parse) into its k8s.io/api type, so that a misspelt field fails here rather than being
// dropped by `kubectl apply` or refused by the API server. KEDA's ScaledObject is not a built-in type: it decodes
// into scaledObject below, which follows KEDA's keda.sh/v1alpha1 fields and takes the HPA behavior from k8s.io/api.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	yaml "go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

// scaledObject is KEDA's ScaledObject (https://keda.sh/docs/latest/reference/scaledobject-spec/), the fields
// KEDA v2 defines; the trigger metadata are strings (KEDA refuses a number there).
type scaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ScaleTargetRef struct {
			APIVersion             string `json:"apiVersion,omitempty"`
			Kind                   string `json:"kind,omitempty"`
			Name                   string `json:"name"`
			EnvSourceContainerName string `json:"envSourceContainerName,omitempty"`
		} `json:"scaleTargetRef"`
		PollingInterval       *int32 `json:"pollingInterval,omitempty"`
		InitialCooldownPeriod *int32 `json:"initialCooldownPeriod,omitempty"`
		CooldownPeriod        *int32 `json:"cooldownPeriod,omitempty"`
		IdleReplicaCount      *int32 `json:"idleReplicaCount,omitempty"`
		MinReplicaCount       *int32 `json:"minReplicaCount,omitempty"`
		MaxReplicaCount       *int32 `json:"maxReplicaCount,omitempty"`
		Fallback              *struct {
			FailureThreshold int32  `json:"failureThreshold"`
			Replicas         int32  `json:"replicas"`
			Behavior         string `json:"behavior,omitempty"`
		} `json:"fallback,omitempty"`
		Advanced *struct {
			RestoreToOriginalReplicaCount bool `json:"restoreToOriginalReplicaCount,omitempty"`
			HorizontalPodAutoscalerConfig *struct {
				Name     string                                         `json:"name,omitempty"`
				Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
			} `json:"horizontalPodAutoscalerConfig,omitempty"`
			ScalingModifiers *struct {
				Formula          string `json:"formula,omitempty"`
				Target           string `json:"target,omitempty"`
				ActivationTarget string `json:"activationTarget,omitempty"`
				MetricType       string `json:"metricType,omitempty"`
			} `json:"scalingModifiers,omitempty"`
		} `json:"advanced,omitempty"`
		Triggers []struct {
			Type              string            `json:"type"`
			Name              string            `json:"name,omitempty"`
			UseCachedMetrics  bool              `json:"useCachedMetrics,omitempty"`
			Metadata          map[string]string `json:"metadata"`
			MetricType        string            `json:"metricType,omitempty"`
			AuthenticationRef *struct {
				Name string `json:"name"`
				Kind string `json:"kind,omitempty"`
			} `json:"authenticationRef,omitempty"`
		} `json:"triggers"`
	} `json:"spec"`
}

// apiTypes are the types the manifests may use, by apiVersion and kind.
var apiTypes = map[string]func() any{
	"v1/Namespace":                  func() any { return &corev1.Namespace{} },
	"v1/ConfigMap":                  func() any { return &corev1.ConfigMap{} },
	"v1/Secret":                     func() any { return &corev1.Secret{} },
	"v1/Service":                    func() any { return &corev1.Service{} },
	"apps/v1/Deployment":            func() any { return &appsv1.Deployment{} },
	"policy/v1/PodDisruptionBudget": func() any { return &policyv1.PodDisruptionBudget{} },
	"keda.sh/v1alpha1/ScaledObject": func() any { return &scaledObject{} },
}

// typedObject is one decoded manifest document.
type typedObject struct {
	where string
	kind  string
	name  string
	obj   any
}

// decodeTyped splits a multi-document YAML stream and decodes each document strictly into its API type.
func decodeTyped(where string, data []byte) ([]typedObject, error) {
	var out []typedObject
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for i := 0; ; i++ {
		var n yaml.Node
		if err := dec.Decode(&n); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", where, i, err)
		}
		if len(n.Content) == 0 {
			continue
		}
		doc, err := yaml.Marshal(&n)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", where, i, err)
		}
		var head metav1.TypeMeta
		if err := sigsyaml.Unmarshal(doc, &head); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", where, i, err)
		}
		if head.Kind == "Kustomization" {
			continue
		}
		newObj, ok := apiTypes[head.APIVersion+"/"+head.Kind]
		if !ok {
			return nil, fmt.Errorf("%s: document %d: %s %s is not a type this test knows (add it to apiTypes)", where, i, head.APIVersion, head.Kind)
		}
		// YAML to JSON without the target type, as kubectl sends it (sigs.k8s.io/yaml's Unmarshal would convert
		// 5000 to "5000" for a string field, which the API server refuses), then JSON strictly into the type.
		js, err := sigsyaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", where, i, err)
		}
		obj := newObj()
		jd := json.NewDecoder(bytes.NewReader(js))
		jd.DisallowUnknownFields()
		if err := jd.Decode(obj); err != nil {
			return nil, fmt.Errorf("%s: document %d (%s %s): %w", where, i, head.Kind, head.APIVersion, err)
		}
		meta, _ := obj.(metav1.ObjectMetaAccessor)
		out = append(out, typedObject{where: fmt.Sprintf("%s document %d", where, i), kind: head.Kind, name: meta.GetObjectMeta().GetName(), obj: obj})
	}
}

// TestManifestsDecodeIntoAPITypes: every manifest of the base and the overlays, as written.
func TestManifestsDecodeIntoAPITypes(t *testing.T) {
	dirs := []string{k8sDir}
	overlays, err := filepath.Glob(filepath.Join(k8sRoot, "overlays", "*"))
	if err != nil {
		t.Fatal(err)
	}
	dirs = append(dirs, overlays...)
	n := 0
	for _, dir := range dirs {
		for _, name := range yamlFiles(t, dir) {
			objs, err := decodeTyped(filepath.Join("deploy", dir, name), readFile(t, filepath.Join(dir, name)))
			if err != nil {
				t.Error(err)
			}
			n += len(objs)
		}
	}
	if n == 0 {
		t.Fatal("no manifest decoded")
	}
}

// TestKustomizeOutputDecodesIntoAPITypes: what kubectl apply -k sends, for the base and every overlay (with
// kustomize or kubectl on PATH). deploy/k8s creates its namespace (before: the base set namespace: dedupeworker
// but no Namespace object, so a first apply failed with "namespaces \"dedupeworker\" not found"), and the KEDA
// overlay leaves the worker's replica count to the HPA KEDA makes (before: replicas 3 in its output, which every
// apply set back under the HPA's feet).
func TestKustomizeOutputDecodesIntoAPITypes(t *testing.T) {
	needKustomize(t)
	tmp := copyK8s(t)
	withOperatorFiles(t, tmp)
	ns := readKustomization(t, k8sDir).Namespace
	for _, dir := range []string{k8sRoot, kedaDir} {
		out, err := kustomizeBuild(t, tmp, dir)
		if err != nil {
			t.Fatalf("kustomize build deploy/%s: %v", dir, err)
		}
		objs, err := decodeTyped("kustomize build deploy/"+dir, out)
		if err != nil {
			t.Fatal(err)
		}
		var namespaces []string
		var replicas *int32
		found := false
		for _, o := range objs {
			switch obj := o.obj.(type) {
			case *corev1.Namespace:
				namespaces = append(namespaces, obj.Name)
			case *appsv1.Deployment:
				if workerKind(o.kind, o.name) == "Deployment" {
					replicas, found = obj.Spec.Replicas, true
				}
			}
		}
		if !slices.Equal(namespaces, []string{ns}) {
			t.Errorf("kustomize build deploy/%s: Namespace objects %v, want [%s]: kubectl apply -k must create the namespace it puts everything in", dir, namespaces, ns)
		}
		if !found {
			t.Fatalf("kustomize build deploy/%s: no worker Deployment", dir)
		}
		switch {
		case dir == kedaDir && replicas != nil:
			t.Errorf("kustomize build deploy/%s: the worker Deployment sets replicas %d: KEDA's HPA owns the count, and each apply would reset it", dir, *replicas)
		case dir != kedaDir && replicas == nil:
			t.Errorf("kustomize build deploy/%s: the worker Deployment sets no replicas (Kubernetes' default is 1)", dir)
		}
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
