package deploy_test

// The KEDA overlay's trigger reads the consumer's lag from the server's monitoring endpoint in one NATS account.
// The base connects with nsc creds (user.creds), so the server runs with an operator and accounts, where the
// account is its public key: the global account "$G" of a server without accounts does not exist there, and a
// trigger naming it would never see the consumer. The overlay takes the account from a file the operator
// provides, as the base takes the creds, so that a build without it stops naming the file.

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

const (
	accountFile = "nats-account.env" // the operator's file of the KEDA overlay: NATS_ACCOUNT=<public key>
	accountVar  = "NATS_ACCOUNT"
	// accountPath is where the replacement writes the account in the ScaledObject.
	accountPath = "spec.triggers.0.metadata.account"
)

// kedaAccountWiring is the part of the overlay's kustomization that carries the account into the trigger.
type kedaAccountWiring struct {
	ConfigMapGenerator []struct {
		Name    string   `yaml:"name"`
		Envs    []string `yaml:"envs"`
		Options struct {
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"options"`
	} `yaml:"configMapGenerator"`
	Replacements []struct {
		Source struct {
			Kind      string `yaml:"kind"`
			Name      string `yaml:"name"`
			FieldPath string `yaml:"fieldPath"`
		} `yaml:"source"`
		Targets []struct {
			Select struct {
				Kind string `yaml:"kind"`
				Name string `yaml:"name"`
			} `yaml:"select"`
			FieldPaths []string `yaml:"fieldPaths"`
		} `yaml:"targets"`
	} `yaml:"replacements"`
}

// TestKEDAAccountFromOperator: the trigger's account is not "$G" as written, and the overlay replaces it with
// NATS_ACCOUNT of the operator's nats-account.env, through a ConfigMap that is local to the build (never applied).
// Before, the trigger named "$G", which cannot exist beside the base's nsc creds.
func TestKEDAAccountFromOperator(t *testing.T) {
	var so struct {
		Metadata struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
		Spec struct {
			Triggers []struct {
				Metadata map[string]string `yaml:"metadata"`
			} `yaml:"triggers"`
		} `yaml:"spec"`
	}
	added := overlayObjects(t, kedaDir)
	if len(added) != 1 {
		t.Fatalf("%s adds %d objects, want the ScaledObject", kedaDir, len(added))
	}
	added[0].decode(t, &so)
	if len(so.Spec.Triggers) != 1 {
		t.Fatalf("%s: %d triggers, want 1", added[0], len(so.Spec.Triggers))
	}
	if acct := so.Spec.Triggers[0].Metadata["account"]; acct == "$G" {
		t.Errorf("%s: trigger account %q: the global account of a server without accounts, which the base's nsc creds rule out", added[0], acct)
	}

	var k kedaAccountWiring
	if err := yaml.Unmarshal(readFile(t, filepath.Join(kedaDir, kustomFile)), &k); err != nil {
		t.Fatal(err)
	}
	generator := ""
	for _, g := range k.ConfigMapGenerator {
		if slices.Equal(g.Envs, []string{accountFile}) {
			generator = g.Name
			if g.Options.Annotations["config.kubernetes.io/local-config"] != "true" {
				t.Errorf("%s: configMapGenerator %s is applied to the cluster: annotate it config.kubernetes.io/local-config: \"true\"", kedaDir, g.Name)
			}
		}
	}
	if generator == "" {
		t.Fatalf("%s: no configMapGenerator reads %s", kedaDir, accountFile)
	}
	wired := false
	for _, r := range k.Replacements {
		if r.Source.Kind != "ConfigMap" || r.Source.Name != generator || r.Source.FieldPath != "data."+accountVar {
			continue
		}
		for _, tg := range r.Targets {
			if tg.Select.Kind == "ScaledObject" && tg.Select.Name == so.Metadata.Name && slices.Contains(tg.FieldPaths, accountPath) {
				wired = true
			}
		}
	}
	if !wired {
		t.Errorf("%s: no replacement from %s's %s to the ScaledObject's %s", kedaDir, generator, accountVar, accountPath)
	}
}

// TestKEDAAccountRendered renders the KEDA overlay with the real kustomize (when one is installed): without the
// operator's nats-account.env the build stops naming it; with it the trigger carries its account and the ConfigMap
// that carried it is not in the output.
func TestKEDAAccountRendered(t *testing.T) {
	needKustomize(t)
	tmp := copyK8s(t)
	withOperatorFiles(t, tmp)
	envFile := filepath.Join(tmp, kedaDir, accountFile)
	if err := os.Remove(envFile); err != nil {
		t.Fatal(err)
	}
	if _, err := kustomizeBuild(t, tmp, kedaDir); err == nil || !strings.Contains(err.Error(), accountFile) {
		t.Errorf("kustomize build %s without %s: err = %v, want an error naming the file", kedaDir, accountFile, err)
	}
	const key = "ACZSWBJ4SYILK7QVDELO64VX3EFWB6CXCPMEBN3D2W4FEUKCJAVD4EYA" // an account public key's shape
	if err := os.WriteFile(envFile, []byte(accountVar+"="+key+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := kustomizeBuild(t, tmp, kedaDir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", kedaDir, err)
	}
	objs, err := decodeTyped("kustomize build deploy/"+kedaDir, out)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, o := range objs {
		if s, ok := o.obj.(*scaledObject); ok {
			found = true
			if len(s.Spec.Triggers) != 1 || s.Spec.Triggers[0].Metadata["account"] != key {
				t.Errorf("kustomize build %s: ScaledObject triggers %+v, want account %s", kedaDir, s.Spec.Triggers, key)
			}
		}
		if o.kind == "ConfigMap" && strings.Contains(o.name, "account") {
			t.Errorf("kustomize build %s: the account's ConfigMap %s is in the output", kedaDir, o.name)
		}
	}
	if !found {
		t.Errorf("kustomize build %s: no ScaledObject", kedaDir)
	}
}
