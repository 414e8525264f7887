package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const smallTarget = `targets:
  - name: a
    protocol: openai_chat
    url: http://localhost:8000
    model: m
    probes: [{name: p, schedule: {every: 1s}}]
`

// A configuration file over MaxConfigFileBytes is refused before it is
// read whole: a 50 MB file once cost 376 MB of memory to parse.
func TestConfigFileSizeLimit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "big.yml")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	// Valid YAML: the target, then comments past the limit.
	if _, err := f.WriteString(smallTarget); err != nil {
		t.Fatal(err)
	}
	line := "# " + strings.Repeat("x", 1021) + "\n"
	for n := len(smallTarget); n <= MaxConfigFileBytes; n += len(line) {
		if _, err := f.WriteString(line); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = Load(path)
	if err == nil {
		t.Fatal("a config file over the limit was loaded")
	}
	for _, want := range []string{path, "larger than 8 MiB"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}

	// At the limit's side of it, the same target loads.
	ok := filepath.Join(dir, "ok.yml")
	if err := os.WriteFile(ok, []byte(smallTarget), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(ok); err != nil {
		t.Fatal(err)
	}
}

// Secret files hold a key or a password, not megabytes.
func TestSecretFileSizeLimit(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "key.txt"), []byte(strings.Repeat("k", maxSecretFileBytes+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pw.txt"), []byte(strings.Repeat("p", maxSecretFileBytes+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, extra, key string }{
		{"api_key_file", "    api_key_file: key.txt\n", "targets[0].api_key_file"},
		{"password_file", "    http_client_config:\n      basic_auth: {username: u, password_file: pw.txt}\n", "targets[0].http_client_config.basic_auth.password_file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(smallTarget, "    model: m\n", "    model: m\n"+tc.extra, 1)
			_, err := Parse([]byte(src), "c.yml", dir, func(string) string { return "" })
			if err == nil {
				t.Fatal("a secret file over the limit was accepted")
			}
			for _, want := range []string{tc.key, "larger than 64 KiB"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %q", err, want)
				}
			}
		})
	}
}

// A file that is not regular is read only up to the bound.
func TestReadBoundedDevice(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	if _, err := readConfigFile("/dev/zero"); err == nil || !strings.Contains(err.Error(), "larger than 8 MiB") {
		t.Fatalf("err = %v", err)
	}
}
