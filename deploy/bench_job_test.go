package deploy

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"
	"gopkg.in/yaml.v3"

	"github.com/llm-prober/llm-prober/bench"
	"github.com/llm-prober/llm-prober/config"
)

// jobSpec is every field bench-job.yaml's Job may use; decoding it with
// KnownFields catches a misspelt or misplaced key, which kubectl apply
// would drop without a word.
type jobSpec struct {
	CompletionMode          string `yaml:"completionMode"`
	Completions             int    `yaml:"completions"`
	Parallelism             int    `yaml:"parallelism"`
	BackoffLimit            *int   `yaml:"backoffLimit"`
	TTLSecondsAfterFinished int    `yaml:"ttlSecondsAfterFinished"`
	Template                struct {
		Metadata struct {
			Labels map[string]string `yaml:"labels"`
		} `yaml:"metadata"`
		Spec struct {
			RestartPolicy                string `yaml:"restartPolicy"`
			AutomountServiceAccountToken *bool  `yaml:"automountServiceAccountToken"`
			SecurityContext              struct {
				RunAsNonRoot   bool `yaml:"runAsNonRoot"`
				RunAsUser      int  `yaml:"runAsUser"`
				RunAsGroup     int  `yaml:"runAsGroup"`
				FSGroup        int  `yaml:"fsGroup"`
				SeccompProfile struct {
					Type string `yaml:"type"`
				} `yaml:"seccompProfile"`
			} `yaml:"securityContext"`
			Containers []struct {
				Name      string   `yaml:"name"`
				Image     string   `yaml:"image"`
				Args      []string `yaml:"args"`
				Resources struct {
					Requests map[string]string `yaml:"requests"`
					Limits   map[string]string `yaml:"limits"`
				} `yaml:"resources"`
				SecurityContext struct {
					RunAsNonRoot             bool `yaml:"runAsNonRoot"`
					RunAsUser                int  `yaml:"runAsUser"`
					ReadOnlyRootFilesystem   bool `yaml:"readOnlyRootFilesystem"`
					AllowPrivilegeEscalation bool `yaml:"allowPrivilegeEscalation"`
					Capabilities             struct {
						Drop []string `yaml:"drop"`
					} `yaml:"capabilities"`
				} `yaml:"securityContext"`
				VolumeMounts []struct {
					Name      string `yaml:"name"`
					MountPath string `yaml:"mountPath"`
					ReadOnly  bool   `yaml:"readOnly"`
				} `yaml:"volumeMounts"`
			} `yaml:"containers"`
			Volumes []struct {
				Name      string `yaml:"name"`
				ConfigMap *struct {
					Name string `yaml:"name"`
				} `yaml:"configMap"`
				PersistentVolumeClaim *struct {
					ClaimName string `yaml:"claimName"`
				} `yaml:"persistentVolumeClaim"`
			} `yaml:"volumes"`
		} `yaml:"spec"`
	} `yaml:"template"`
}

type pvcSpec struct {
	AccessModes []string `yaml:"accessModes"`
	Resources   struct {
		Requests map[string]string `yaml:"requests"`
	} `yaml:"resources"`
}

func decodeStrict[T any](t *testing.T, o object) T {
	t.Helper()
	b, err := yaml.Marshal(&o.Spec)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var v T
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s %s: spec: %v", o.Kind, o.Metadata.Name, err)
	}
	return v
}

// TestBenchJob: the Indexed Job runs `llm-prober bench` with arguments
// the real flag parser accepts, against a target of its ConfigMap, each
// pod writing its own result file to a ReadWriteMany volume; and the
// merge command in the header names exactly the files the pods write.
func TestBenchJob(t *testing.T) {
	const path = "kubernetes/bench-job.yaml"
	objs := readManifests(t, path)
	job := decodeStrict[jobSpec](t, find(objs, "Job")[0])
	if job.CompletionMode != "Indexed" || job.Completions < 2 || job.Parallelism != job.Completions {
		t.Errorf("Job: completionMode %q, completions %d, parallelism %d; want Indexed with every pod at once", job.CompletionMode, job.Completions, job.Parallelism)
	}
	if job.BackoffLimit == nil || *job.BackoffLimit != 0 || job.Template.Spec.RestartPolicy != "Never" {
		t.Error("Job: want backoffLimit 0 and restartPolicy Never: a retried pod would load the target again alone")
	}
	pod := job.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if want := proberImage + ":" + proberVersion(t); c.Image != want {
		t.Errorf("image %s, want %s", c.Image, want)
	}
	sc := c.SecurityContext
	if !sc.RunAsNonRoot || sc.RunAsUser == 0 || !sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation || !slices.Equal(sc.Capabilities.Drop, []string{"ALL"}) {
		t.Error("container securityContext: want non-root, read-only root filesystem, no escalation, every capability dropped")
	}
	if len(c.Args) == 0 || c.Args[0] != "bench" {
		t.Fatalf("args %v: want the bench command", c.Args)
	}
	// The real flag parser, with the index Kubernetes substitutes.
	app := kingpin.New("llm-prober", "")
	flags := bench.AddCommand(app)
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		args[i] = strings.ReplaceAll(a, "$(JOB_COMPLETION_INDEX)", "0")
	}
	if _, err := app.Parse(args); err != nil {
		t.Fatalf("bench args %v: %v", c.Args, err)
	}
	if _, err := flags.Settings(); err != nil {
		t.Fatalf("bench args %v: %v", c.Args, err)
	}
	if *flags.Output != "/results/result-0.json" {
		t.Errorf("--output %q: want /results/result-$(JOB_COMPLETION_INDEX).json, one file per pod", *flags.Output)
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m.Name
	}
	var claim, cmName string
	for _, v := range pod.Volumes {
		switch {
		case v.Name == mounts["/results"] && v.PersistentVolumeClaim != nil:
			claim = v.PersistentVolumeClaim.ClaimName
		case v.Name == mounts["/etc/llm-prober"] && v.ConfigMap != nil:
			cmName = v.ConfigMap.Name
		}
	}
	var pvcOK bool
	for _, o := range find(objs, "PersistentVolumeClaim") {
		if o.Metadata.Name == claim {
			pvcOK = slices.Contains(decodeStrict[pvcSpec](t, o).AccessModes, "ReadWriteMany")
		}
	}
	if !pvcOK {
		t.Errorf("/results: want the ReadWriteMany claim of this file mounted, got claim %q", claim)
	}
	var cfg *config.Config
	for _, o := range find(objs, "ConfigMap") {
		if o.Metadata.Name == cmName && *flags.ConfigFile == "/etc/llm-prober/llm-prober.yml" {
			var err error
			cfg, err = config.Parse([]byte(o.Data["llm-prober.yml"]), "ConfigMap "+cmName, t.TempDir(), func(string) string { return "" })
			if err != nil {
				t.Fatalf("ConfigMap %s: %v", cmName, err)
			}
		}
	}
	if cfg == nil {
		t.Fatalf("no ConfigMap mounted at /etc/llm-prober with llm-prober.yml matching --config.file %s", *flags.ConfigFile)
	}
	if !slices.ContainsFunc(cfg.Targets, func(tg *config.Target) bool { return tg.Name == *flags.Target }) {
		t.Errorf("--target %s is not in the ConfigMap", *flags.Target)
	}
	// The documented merge names every pod's file, and only those.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range job.Completions + 1 {
		name := fmt.Sprintf(`"/results/result-%d.json"`, i)
		if has := strings.Contains(string(b), name); has != (i < job.Completions) {
			t.Errorf("the merge command in the header: %s present %v, want %v (completions %d)", name, has, i < job.Completions, job.Completions)
		}
	}
}
