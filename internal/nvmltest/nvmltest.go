// Package nvmltest builds a stub libnvidia-ml.so.1 from C for tests, so
// go-nvml's real cgo calls are exercised against the real ABI without a GPU.
package nvmltest

import (
	_ "embed"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

//go:embed testdata/stub.c
var stubSource string

// ConfigEnv names the stub's values file. The stub reads it at run time
// because go-nvml binds each C symbol to the first library loaded in the
// process: every stub a test process builds must answer from the same file.
const ConfigEnv = "LLM_PROBER_NVML_STUB_CONFIG"

// Stub is one compiled stub library and the file it reads its values from.
type Stub struct {
	// Path is the absolute path of the .so, for nvml.WithLibraryPath.
	Path   string
	config string
}

// Build compiles the stub into t.TempDir() and points ConfigEnv at its
// values file for the rest of the test (so the test cannot be parallel).
// Each named symbol in omit is left out, to exercise optional-symbol checks;
// which functions a process actually calls stays global (see ConfigEnv), so
// a test proving that a missing symbol is never called runs the stub in a
// fresh process. It skips the test when this build has no NVML (no cgo, or
// -tags nonvml) or no C compiler is installed, since nothing else can stand
// in for the library.
func Build(t testing.TB, omit ...string) *Stub {
	t.Helper()
	if !CanLoad {
		t.Skip("this build has no NVML (built without cgo or with -tags nonvml), so there is nothing to load a stub into")
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		t.Skipf("no C compiler (%s) found: the NVML tests build a stub libnvidia-ml.so.1 with it", cc)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "stub.c")
	if err := os.WriteFile(src, []byte(stubSource), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &Stub{Path: filepath.Join(dir, "libnvidia-ml.so.1"), config: filepath.Join(dir, "stub.conf")}
	args := []string{"-shared", "-fPIC", "-O1", "-Wall",
		"-Wl,-soname,libnvidia-ml.so.1", "-o", s.Path}
	for _, sym := range omit {
		args = append(args, "-DOMIT_"+sym)
	}
	args = append(args, src, "-lpthread")
	if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("building the NVML stub: %v\n%s", err, out)
	}
	t.Setenv(ConfigEnv, s.config)
	s.Set(t, nil)
	return s
}

// Set replaces the stub's values (keys are documented in testdata/stub.c).
// The file is renamed into place, so a concurrent reader never sees half of
// it. The stub re-reads it in nvmlInit_v2 and nvmlDeviceGetCount_v2.
func (s *Stub) Set(t testing.TB, kv map[string]string) {
	t.Helper()
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(kv)) {
		fmt.Fprintf(&b, "%s=%s\n", k, kv[k])
	}
	tmp := s.config + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, s.config); err != nil {
		t.Fatal(err)
	}
}

// Device returns typical values for device i of an H100-like GPU, as a
// starting point tests adjust.
func Device(i int) map[string]string {
	p := fmt.Sprintf("dev%d.", i)
	return map[string]string{
		p + "name":         "NVIDIA H100 80GB HBM3",
		p + "uuid":         fmt.Sprintf("GPU-aaaaaaaa-bbbb-cccc-dddd-%012d", i),
		p + "util.gpu":     "87",
		p + "util.mem":     "42",
		p + "mem.total":    "85520809984",
		p + "mem.used":     "60000000000",
		p + "mem.reserved": "520809984",
		p + "mem.free":     "25000000000",
		p + "power":        "312500",
		p + "power_limit":  "700000",
		p + "energy":       "123456789",
		p + "temp":         "64",
		p + "clock.sm":     "1980",
		p + "reasons":      "0",
		p + "cc.major":     "9",
		p + "cc.minor":     "0",
		p + "pcie.gen":     "5",
		p + "pcie.width":   "16",
		p + "pcie.replay":  "0",
	}
}

// Devices merges Device(0..n-1) with count=n and the extra keys.
func Devices(n int, extra map[string]string) map[string]string {
	kv := map[string]string{"count": fmt.Sprint(n)}
	for i := range n {
		maps.Copy(kv, Device(i))
	}
	maps.Copy(kv, extra)
	return kv
}
