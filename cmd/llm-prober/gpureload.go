package main

import (
	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/config"
)

// checkGPUs fails a reload to gpus.enabled: true when NVML cannot be
// loaded, keeping the running configuration, GPU settings included, so
// that llm_prober_config_last_reload_successful is 0 for a reload that
// could not be applied in full. At the first load it lets the config
// through: serve then refuses to start, saying why (gpus.Err).
func (d *daemon) checkGPUs(c *config.Config) error {
	running := d.config.Get()
	want := c.GPUs.Settings()
	if running == nil || want.Mode != collector.GPUOn {
		return nil
	}
	err := d.gpus.Apply(want)
	if err != nil {
		// Back to the running settings: Apply has let go of the library
		// those had loaded.
		if rerr := d.gpus.Apply(running.GPUs.Settings()); rerr != nil {
			d.opts.logger.Error("GPU metrics unavailable", "err", rerr)
		}
	}
	return err
}
