#!/usr/bin/env python3
"""Check the GPU collector against nvidia-smi on a host with a real GPU.

Runs the prober (cgo build, reading NVML through go-nvml) with GPUs on,
loads the GPU with a PyTorch matrix-product loop when PyTorch is there,
and takes paired samples: one /metrics scrape and one nvidia-smi query
back to back. Each llm_gpu_* reading is compared with nvidia-smi's value
for the same field within a stated tolerance; energy is checked against
power (its rate must match the mean power drawn), and the load's own pid
must appear among the per-process series. The static nonvml build is run
too: no GPU series with `enabled: auto`, a clear refusal with `true`.

Usage: gpu_check.py BINARY NONVML_BINARY OUT_DIR
Writes OUT_DIR/report.md (the table), the raw samples and the logs; exits
1 when any check fails. Opt-in (`make gpu-check`): CI has no GPU.
"""

import csv
import io
import math
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

SMI_FIELDS = [
    "index", "uuid", "name", "driver_version", "compute_cap",
    "memory.total", "memory.used", "power.draw", "enforced.power.limit",
    "temperature.gpu", "clocks.sm", "utilization.gpu", "utilization.memory",
    "pcie.link.gen.current", "pcie.link.width.current",
    "ecc.errors.corrected.volatile.total", "ecc.errors.uncorrected.volatile.total",
    "ecc.errors.corrected.aggregate.total", "ecc.errors.uncorrected.aggregate.total",
    "mig.mode.current", "clocks_event_reasons.active",
]

SERIES = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')

# NVML's clock event reason bits (nvml.h), as the collector names them.
REASON_BITS = {
    "gpu_idle": 0x1, "applications_clocks_setting": 0x2, "sw_power_cap": 0x4,
    "hw_slowdown": 0x8, "sync_boost": 0x10, "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40, "hw_power_brake_slowdown": 0x80,
    "display_clock_setting": 0x100,
}

LOAD = r"""
import os, sys, time, torch
seconds = float(sys.argv[1])
x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
hold = torch.empty(int(float(sys.argv[2]) * 2**30), dtype=torch.uint8, device="cuda")
print("load pid", os.getpid(), "ready", flush=True)
end = time.time() + seconds
while time.time() < end:
    for _ in range(20):
        y = x @ x
    torch.cuda.synchronize()
"""


def write_config(path, sim_port, every, gpus):
    """A prober config: one probe of the simulator every `every`, GPUs as `gpus`."""
    with open(path, "w") as f:
        f.write(f"""targets:
  - name: sim
    protocol: openai_chat
    url: http://127.0.0.1:{sim_port}
    model: sim-llm
    probes:
      - name: steady
        workload: w
        schedule: {{every: {every}}}
workloads:
  w:
    prompts: {{inline: ["Say hello."]}}
    max_tokens: 16
gpus: {{enabled: {gpus}}}
""")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def wait_ready(url, proc, seconds=30):
    end = time.time() + seconds
    while time.time() < end:
        if proc.poll() is not None:
            return False
        try:
            get(url, timeout=1)
            return True
        except OSError:
            time.sleep(0.2)
    return False


def parse_metrics(text):
    out = []
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        m = SERIES.match(line)
        if not m:
            continue
        labels = dict(LABEL.findall(m.group(3) or ""))
        out.append((m.group(1), labels, float(m.group(4))))
    return out


def smi_query():
    r = subprocess.run(["nvidia-smi", "--query-gpu=" + ",".join(SMI_FIELDS),
                        "--format=csv,noheader,nounits"], capture_output=True, text=True)
    rows = {}
    for row in csv.reader(io.StringIO(r.stdout)):
        if len(row) != len(SMI_FIELDS):
            continue
        rec = {k: v.strip() for k, v in zip(SMI_FIELDS, row)}
        rows[rec["index"]] = rec
    return rows, r.stdout + r.stderr


def smi_apps():
    r = subprocess.run(["nvidia-smi", "--query-compute-apps=gpu_uuid,pid,process_name,used_memory",
                        "--format=csv,noheader,nounits"], capture_output=True, text=True)
    apps = []
    for row in csv.reader(io.StringIO(r.stdout)):
        if len(row) == 4:
            apps.append([c.strip() for c in row])
    return apps, r.stdout + r.stderr


def num(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return math.nan


class Report:
    def __init__(self):
        self.rows = []
        self.failed = 0

    def check(self, what, ours, theirs, ok, note=""):
        self.rows.append((what, ours, theirs, "ok" if ok else "FAIL", note))
        if not ok:
            self.failed += 1

    def info(self, what, ours, theirs, note=""):
        self.rows.append((what, ours, theirs, "info", note))

    def markdown(self):
        lines = ["| check | prober | nvidia-smi / truth | result | note |", "|---|---|---|---|---|"]
        for r in self.rows:
            lines.append("| " + " | ".join(str(c) for c in r) + " |")
        return "\n".join(lines)


def by_gpu(series, name):
    return {s[1].get("gpu"): s for s in series if s[0] == name}


def close(a, b, rel, absolute):
    return not math.isnan(a) and not math.isnan(b) and abs(a - b) <= max(absolute, rel * abs(b))


def compare_sample(rep, tag, series, smi, strict_dynamic):
    """One paired sample: our series against nvidia-smi's rows."""
    for idx, row in sorted(smi.items()):
        g = lambda n: by_gpu(series, n).get(idx)
        info = g("llm_gpu_info")
        if info is None:
            rep.check(f"{tag} gpu {idx} present", "absent", row["uuid"], False)
            continue
        lab = info[1]
        if tag == "idle-0":
            rep.check(f"gpu {idx} uuid", lab.get("uuid"), row["uuid"], lab.get("uuid") == row["uuid"])
            rep.check(f"gpu {idx} name", lab.get("name"), row["name"], lab.get("name") == row["name"])
            rep.check(f"gpu {idx} driver_version", lab.get("driver_version"), row["driver_version"],
                      lab.get("driver_version") == row["driver_version"])
            rep.check(f"gpu {idx} compute_capability", lab.get("compute_capability"), row["compute_cap"],
                      lab.get("compute_capability") == row["compute_cap"])
            rep.info(f"gpu {idx} mig_mode / cuda_driver_version",
                     f"{lab.get('mig_mode')} / {lab.get('cuda_driver_version')}", row["mig.mode.current"])
            total = g("llm_gpu_memory_total_bytes")
            t_smi = num(row["memory.total"]) * 2**20
            rep.check(f"gpu {idx} memory total", f"{total[2] / 2**20:.0f} MiB" if total else "absent",
                      f"{t_smi / 2**20:.0f} MiB", bool(total) and close(total[2], t_smi, 0.0, 2**20))
            lim = g("llm_gpu_power_limit_watts")
            rep.check(f"gpu {idx} power limit", f"{lim[2]:.1f} W" if lim else "absent",
                      row["enforced.power.limit"] + " W", bool(lim) and close(lim[2], num(row["enforced.power.limit"]), 0.0, 1.0))
            for name, field in (("llm_gpu_pcie_link_generation", "pcie.link.gen.current"),
                                ("llm_gpu_pcie_link_width", "pcie.link.width.current")):
                s = g(name)
                want = num(row[field])
                if math.isnan(want):
                    rep.info(f"gpu {idx} {name}", s[2] if s else "absent", row[field], "nvidia-smi has no value")
                else:
                    rep.check(f"gpu {idx} {name}", s[2] if s else "absent", row[field], bool(s) and s[2] == want,
                              "link may retrain between the two reads")
            ecc = {(s[1].get("error"), s[1].get("period")): s[2]
                   for s in series if s[0] == "llm_gpu_ecc_errors_total" and s[1].get("gpu") == idx}
            for et, ct, field in (("corrected", "volatile", "ecc.errors.corrected.volatile.total"),
                                  ("uncorrected", "volatile", "ecc.errors.uncorrected.volatile.total"),
                                  ("corrected", "aggregate", "ecc.errors.corrected.aggregate.total"),
                                  ("uncorrected", "aggregate", "ecc.errors.uncorrected.aggregate.total")):
                want = num(row[field])
                ours = ecc.get((et, ct))
                if math.isnan(want):
                    rep.info(f"gpu {idx} ecc {et} {ct}", ours if ours is not None else "absent", row[field],
                             "ECC off or not supported: the series must be absent")
                else:
                    rep.check(f"gpu {idx} ecc {et} {ct}", ours if ours is not None else "absent", row[field],
                              ours == want)
        used = g("llm_gpu_memory_used_bytes")
        u_smi = num(row["memory.used"]) * 2**20
        rep.check(f"{tag} gpu {idx} memory used", f"{used[2] / 2**20:.0f} MiB" if used else "absent",
                  f"{u_smi / 2**20:.0f} MiB", bool(used) and close(used[2], u_smi, 0.02, 64 * 2**20))
        temp = g("llm_gpu_temperature_celsius")
        rep.check(f"{tag} gpu {idx} temperature", temp[2] if temp else "absent", row["temperature.gpu"],
                  bool(temp) and close(temp[2], num(row["temperature.gpu"]), 0.0, 3.0))
        power = g("llm_gpu_power_watts")
        p_smi = num(row["power.draw"])
        rep.check(f"{tag} gpu {idx} power", f"{power[2]:.1f} W" if power else "absent", f"{p_smi:.1f} W",
                  bool(power) and close(power[2], p_smi, 0.15 if strict_dynamic else 0.5, 15.0),
                  "both are NVML averages read a few ms apart")
        clock = g("llm_gpu_sm_clock_hertz")
        c_smi = num(row["clocks.sm"]) * 1e6
        rep.check(f"{tag} gpu {idx} SM clock", f"{clock[2] / 1e6:.0f} MHz" if clock else "absent",
                  f"{c_smi / 1e6:.0f} MHz", bool(clock) and close(clock[2], c_smi, 0.10 if strict_dynamic else 1.0, 0))
        for name, field, tol in (("llm_gpu_utilization_ratio", "utilization.gpu", 0.15),
                                 ("llm_gpu_memory_bandwidth_utilization_ratio", "utilization.memory", 0.25)):
            s = g(name)
            want = num(row[field]) / 100
            rep.check(f"{tag} gpu {idx} {name}", f"{s[2]:.2f}" if s else "absent", f"{want:.2f}",
                      bool(s) and close(s[2], want, 0, tol if strict_dynamic else 1.0),
                      "sampled over NVML's own window")
        active = {s[1].get("reason") for s in series
                  if s[0] == "llm_gpu_clock_throttle_reason" and s[1].get("gpu") == idx and s[2] == 1}
        mask = int(row["clocks_event_reasons.active"], 16) if row["clocks_event_reasons.active"].startswith("0x") else None
        if mask is not None:
            smi_active = {r for r, b in REASON_BITS.items() if mask & b}
            rep.info(f"{tag} gpu {idx} clock event reasons", ",".join(sorted(active)) or "none",
                     ",".join(sorted(smi_active)) or "none", "may change between the two reads")


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    binary, nonvml, out = sys.argv[1:]
    os.makedirs(out, exist_ok=True)
    if not shutil.which("nvidia-smi"):
        print("gpu-check: nvidia-smi not found; this check needs a host with an NVIDIA GPU and driver", file=sys.stderr)
        return 2
    rep = Report()
    with open(os.path.join(out, "nvidia-smi-q.txt"), "w") as f:
        f.write(subprocess.run(["nvidia-smi", "-q"], capture_output=True, text=True).stdout)

    sim_port, port = free_port(), free_port()
    cfg = os.path.join(out, "gpu-check.yml")
    # A stand-in library, for trying this script on a host without a GPU.
    library = os.environ.get("GPU_CHECK_NVML_LIBRARY", "")
    library = f", library: {library}" if library else ""
    write_config(cfg, sim_port, "1s", "true" + library)
    logs = open(os.path.join(out, "prober.log"), "w")
    sim = subprocess.Popen([binary, "simulate", "--listen", f"127.0.0.1:{sim_port}"], stdout=logs, stderr=logs)
    prober = subprocess.Popen([binary, "--config.file=" + cfg, f"--web.listen-address=127.0.0.1:{port}",
                               "--log.level=debug"], stdout=logs, stderr=logs)
    load = None
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        if not wait_ready(url, prober):
            rep.check("prober starts with gpus.enabled: true", "exited" if prober.poll() is not None else "no answer",
                      "serving", False)
            return finish(rep, out)
        time.sleep(2)
        samples = []

        def sample(tag):
            t0 = time.monotonic()
            text = get(url)
            t1 = time.monotonic()
            smi, raw = smi_query()
            apps, raw_apps = smi_apps()
            with open(os.path.join(out, f"sample-{tag}.txt"), "w") as f:
                f.write("\n".join(l for l in text.splitlines() if "llm_gpu_" in l or "collector" in l))
                f.write("\n# nvidia-smi\n" + raw + raw_apps)
            series = parse_metrics(text)
            samples.append((tag, time.monotonic(), series, smi, apps, t1 - t0))
            return series, smi, apps

        for i in range(3):
            series, smi, _ = sample(f"idle-{i}")
            compare_sample(rep, f"idle-{i}", series, smi, strict_dynamic=False)
            time.sleep(1)

        load_pid = None
        try:
            import torch  # noqa: F401  (only to know the load can run)
            load = subprocess.Popen([sys.executable, "-c", LOAD, "45", "8"], stdout=subprocess.PIPE,
                                    stderr=logs, text=True)
            line = load.stdout.readline()
            m = re.search(r"load pid (\d+)", line)
            load_pid = m.group(1) if m else None
            time.sleep(8)  # let utilisation, power and clocks settle
        except ImportError:
            rep.info("GPU load", "skipped", "no PyTorch here", "only idle readings compared")

        if load is not None:
            for i in range(6):
                series, smi, apps = sample(f"load-{i}")
                compare_sample(rep, f"load-{i}", series, smi, strict_dynamic=True)
                time.sleep(2)
            procs = [s for s in series if s[0] == "llm_gpu_process_memory_used_bytes"]
            ours = {s[1].get("pid"): s for s in procs}
            smi_pids = {a[1]: a for a in apps}
            rep.info("processes (prober: pid=process MiB)",
                     "; ".join(f"{p}={s[1].get('process')} {s[2] / 2**20:.0f}" for p, s in ours.items()) or "none",
                     "; ".join(f"{a[1]}={a[2]} {a[3]}" for a in apps) or "none")
            if smi_pids:
                for pid, a in smi_pids.items():
                    s = ours.get(pid)
                    rep.check(f"process {pid} memory", f"{s[2] / 2**20:.0f} MiB" if s else "absent",
                              f"{a[3]} MiB", bool(s) and close(s[2], num(a[3]) * 2**20, 0.02, 2**20))
            else:
                rep.info(f"load pid {load_pid} in process list", "present" if load_pid in ours else "absent",
                         "nvidia-smi lists no compute apps (a sandbox hides other pids from NVML)")

        # Energy against power: the counter's rate over the samples must
        # match the mean of the power readings taken at the same moments.
        for idx in sorted(samples[0][3]):
            pts = [(t, by_gpu(s, "llm_gpu_energy_joules_total").get(idx), by_gpu(s, "llm_gpu_power_watts").get(idx))
                   for tag, t, s, _, _, _ in samples if tag.startswith("load" if load else "idle")]
            pts = [(t, e[2], p[2]) for t, e, p in pts if e and p]
            if len(pts) >= 2:
                rate = (pts[-1][1] - pts[0][1]) / (pts[-1][0] - pts[0][0])
                mean_p = statistics.mean(p for _, _, p in pts)
                rep.check(f"gpu {idx} energy rate vs mean power", f"{rate:.1f} W", f"{mean_p:.1f} W",
                          close(rate, mean_p, 0.2, 10.0), "over the load samples")
                rep.check(f"gpu {idx} energy counter never falls", "", "",
                          all(b[1] >= a[1] for a, b in zip(pts, pts[1:])))

        final = samples[-1][2]
        rejected = [s for s in final if s[0] == "llm_gpu_rejected_readings_total" and s[2] > 0]
        rep.check("rejected readings (garbage from the driver)", sum(s[2] for s in rejected),
                  "0", not rejected, ", ".join(s[1].get("reading", "") for s in rejected))
        succ = [s for s in final if s[0] == "llm_prober_collector_success" and s[1].get("collector") == "gpu"]
        rep.check("llm_prober_collector_success{collector=gpu}", succ[0][2] if succ else "absent", "1",
                  bool(succ) and succ[0][2] == 1)
        dur = [s for s in final if s[0] == "llm_prober_collector_duration_seconds" and s[1].get("collector") == "gpu"]
        rep.info("GPU collection duration (last scrape)", f"{dur[0][2] * 1e3:.2f} ms" if dur else "absent", "")
        scrape = sorted(s[5] for s in samples)
        rep.info("whole /metrics scrape, median of samples", f"{statistics.median(scrape) * 1e3:.1f} ms",
                 f"min {scrape[0] * 1e3:.1f} ms, max {scrape[-1] * 1e3:.1f} ms")
        names = sorted({s[0] for s in final if s[0].startswith("llm_gpu_")})
        rep.info("llm_gpu_* families exported", len(names), "", " ".join(n[len("llm_gpu_"):] for n in names))
        xid = [s for s in final if s[0] == "llm_gpu_xid_errors_total"]
        rep.info("XID series", len(xid), "", "no XID is provoked here: the counter appears when one happens")
        ok_probe = [s for s in final if s[0] == "llm_probe_requests_total" and s[1].get("outcome") == "success"]
        rep.check("probes ran beside GPU collection", ok_probe[0][2] if ok_probe else 0, "> 0",
                  bool(ok_probe) and ok_probe[0][2] > 0)
    finally:
        for p in (load, prober, sim):
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
        logs.close()
    log = open(os.path.join(out, "prober.log")).read()
    rep.check("prober log has no panic or symbol error", "", "",
              "panic" not in log and "symbol lookup error" not in log)
    m = re.search(r'NVML loaded.*', log)
    rep.info("load line", (m.group(0)[:160] if m else "absent").replace("|", "/"), "")

    nonvml_checks(rep, nonvml, out, sim_port)
    return finish(rep, out)


def nonvml_checks(rep, nonvml, out, sim_port):
    """The static build: no GPU series with auto, a refusal with true."""
    for mode in ("auto", "true"):
        cfg = os.path.join(out, f"nonvml-{mode}.yml")
        write_config(cfg, sim_port, "1m", mode)
        port = free_port()
        p = subprocess.Popen([nonvml, "--config.file=" + cfg, f"--web.listen-address=127.0.0.1:{port}"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if mode == "auto":
            up = wait_ready(f"http://127.0.0.1:{port}/metrics", p)
            body = get(f"http://127.0.0.1:{port}/metrics") if up else ""
            rep.check("nonvml build, enabled: auto", "serving, no llm_gpu_*" if up and "llm_gpu_" not in body
                      else "wrong", "serving, no llm_gpu_*", up and "llm_gpu_" not in body)
            p.send_signal(signal.SIGTERM)
            p.wait(10)
        else:
            try:
                text, _ = p.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                text = "still running"
            rep.check("nonvml build, enabled: true", f"exit {p.returncode}", "exit 1 with the reason",
                      p.returncode == 1, text.strip().splitlines()[-1][:150].replace("|", "/") if text.strip() else "")


def finish(rep, out):
    text = rep.markdown()
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(text + "\n")
    print(text)
    print(f"\ngpu-check: {rep.failed} failed", file=sys.stderr)
    return 1 if rep.failed else 0


if __name__ == "__main__":
    sys.exit(main())
