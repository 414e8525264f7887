package config

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// Bounds on the files the configuration reads, so that a wrong path (a
// log, a model file, /dev/zero) or a hostile file fails with a clear
// error instead of costing the daemon its memory: a 50 MB config once
// cost 376 MB to parse. The bounds are listed in docs/security.md; prompt
// files have their own (maxPromptFileBytes), as do discovery sources
// (discovery.MaxSourceBytes).

// MaxConfigFileBytes bounds the configuration file itself, as a discovery
// source is bounded (discovery.MaxSourceBytes): thousands of targets fit,
// and a real configuration is a few KiB. Parsing YAML costs about ten
// times the file in memory (8 MiB of dense YAML: ~90 MB), so the bound is
// the daemon's memory bound too. Long prompt lists belong in prompt_file,
// long target lists in file_sd discovery, both bounded on their own.
const MaxConfigFileBytes = 8 << 20

// maxSecretFileBytes bounds a file that holds one credential (api_key_file,
// password_file, credentials_file, client_secret_file,
// client_certificate_key_file): a key, a password or a PEM key fits many
// times over.
const maxSecretFileBytes = 64 << 10

// readConfigFile reads the configuration file, refusing one over
// MaxConfigFileBytes without reading it whole.
func readConfigFile(path string) ([]byte, error) {
	b, err := readBounded(path, MaxConfigFileBytes)
	if errors.Is(err, errTooLarge) {
		return nil, fmt.Errorf("config file %s is larger than %d MiB: is it the right file? Move long prompt lists into a prompt_file (JSONL) and long target lists into file_sd discovery", path, MaxConfigFileBytes>>20)
	}
	return b, err
}

// readSecretFile reads a file holding one credential, refusing one over
// maxSecretFileBytes; what names the file's key for the error.
func readSecretFile(path, what string) ([]byte, error) {
	b, err := readBounded(path, maxSecretFileBytes)
	if errors.Is(err, errTooLarge) {
		return nil, fmt.Errorf("%s %s is larger than %d KiB; it should hold only the secret: is it the right file?", what, path, maxSecretFileBytes>>10)
	}
	return b, err
}

var errTooLarge = errors.New("file too large")

// readBounded reads at most limit bytes of path; errTooLarge when there
// are more.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// A regular file's size is known: refuse it unread. Others (a pipe, a
	// device) are read up to the bound.
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > limit {
		return nil, errTooLarge
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, errTooLarge
	}
	return b, nil
}
