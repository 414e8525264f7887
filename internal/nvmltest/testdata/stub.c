/*
 * A stand-in libnvidia-ml.so.1 for tests: the NVML entry points the prober
 * calls through go-nvml, with the ABI of the real library (versioned names,
 * struct layouts, return codes) and values read from a key=value file.
 *
 * The file is named by the environment variable LLM_PROBER_NVML_STUB_CONFIG,
 * read at run time rather than fixed at compile time: go-nvml dlopens with
 * RTLD_GLOBAL and the cgo calls bind to the first library that defines each
 * symbol, for the life of the process, so every stub a test process loads
 * must answer from the same, current file. It is re-read by nvmlInit_v2 and
 * nvmlDeviceGetCount_v2. A collector calls GetCount once per scrape, so a
 * test can change values between scrapes while every getter in one scrape
 * sees one consistent snapshot.
 *
 * Keys: init (return code), count, count.ret, driver, driver.ret, cuda
 * (CUDA driver version, e.g. 12040), cuda.ret, xid (events: a comma list of
 * dev:code, delivered once each in order by nvmlEventSetWait_v2; a new
 * event set starts again from the first), pidname.<pid> (process name), and
 * per device devN.{name,uuid,util.gpu,util.mem,mem.total,mem.free,mem.used,
 * mem.reserved,power,power_limit,energy,temp,clock.sm,reasons,slow_ms,
 * ecc.<type>.<counter> (type 0 corrected, 1 uncorrected; counter 0
 * volatile, 1 aggregate), remap.{corr,unc,pending,failure},
 * retired.pending, pcie.{gen,width,replay}, procs (count), procs.claim
 * (the count reported back on success: more than the caller's buffer holds
 * is the garbage a buggy driver returns), procK.{pid,mem}, mig.current,
 * mig.pending, mig.max, cc.major, cc.minor, events (supported event mask),
 * migK.{uuid,name,gi,mem.total,mem.used,mem.free} (K < mig.max; a slot
 * without migK.uuid is empty)}; any getter's return code is
 * devN.<getter>.ret (getters: handle, name, uuid, util, mem, mem_v2, power,
 * power_limit, energy, temp, temp_v, clock, reasons, ecc, remap, retired,
 * pcie_gen, pcie_width, pcie_replay, procs, mig, mig_handle, cc, events,
 * register).
 *
 * Optional symbols are left out by compiling with -DOMIT_<symbol>.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;

typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct {
	unsigned int version;
	unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
typedef struct { unsigned int version, sensorType; int temperature; } nvmlTemperature_t;

#define MAX_KV 1024
#define MAX_DEV 64
#define MAX_MIG 8

/* A GPU handle has mig = -1; a MIG device handle names its parent. */
struct nvmlDevice_st { int index; int mig; };

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int refs;
static int nkv;
static char keys[MAX_KV][64];
static char vals[MAX_KV][128];
static struct nvmlDevice_st devs[MAX_DEV];
static struct nvmlDevice_st migs[MAX_DEV][MAX_MIG];

static void reload_locked(void) {
	const char *path = getenv("LLM_PROBER_NVML_STUB_CONFIG");
	FILE *f = path ? fopen(path, "r") : NULL;
	char line[256];
	nkv = 0;
	if (!f) return;
	while (nkv < MAX_KV && fgets(line, sizeof line, f)) {
		char *eq = strchr(line, '=');
		size_t n;
		if (!eq) continue;
		*eq = 0;
		n = strcspn(eq + 1, "\r\n");
		eq[1 + n] = 0;
		snprintf(keys[nkv], sizeof keys[nkv], "%.63s", line);
		snprintf(vals[nkv], sizeof vals[nkv], "%.127s", eq + 1);
		nkv++;
	}
	fclose(f);
}

/* lookup copies the value of key into out; returns 0 when absent. */
static int lookup(const char *key, char *out, size_t len) {
	int i, found = 0;
	pthread_mutex_lock(&mu);
	for (i = nkv - 1; i >= 0; i--) {
		if (strcmp(keys[i], key) == 0) {
			snprintf(out, len, "%s", vals[i]);
			found = 1;
			break;
		}
	}
	pthread_mutex_unlock(&mu);
	return found;
}

static unsigned long long num(const char *key, unsigned long long def) {
	char v[128];
	if (!lookup(key, v, sizeof v)) return def;
	return strtoull(v, NULL, 0);
}

static unsigned long long dnum(int dev, const char *key, unsigned long long def) {
	char k[64];
	snprintf(k, sizeof k, "dev%d.%s", dev, key);
	return num(k, def);
}

/* dret is the configured return code of getter for dev (0 by default). */
static nvmlReturn_t dret(int dev, const char *getter) {
	char k[64];
	snprintf(k, sizeof k, "dev%d.%s.ret", dev, getter);
	return (nvmlReturn_t)num(k, 0);
}

static int initialised(void) {
	int r;
	pthread_mutex_lock(&mu);
	r = refs > 0;
	pthread_mutex_unlock(&mu);
	return r;
}

/* check validates the library state, the handle and the out pointer; GPU
 * getters take GPU handles only. */
static nvmlReturn_t check(nvmlDevice_t d, const void *out, int *idx) {
	if (!initialised()) return 1;
	if (d < devs || d >= devs + MAX_DEV || !out) return 2;
	if (d->index >= (int)num("count", 1)) return 2;
	*idx = d->index;
	return 0;
}

/* check_any also accepts a MIG device handle, setting *mig (else -1). */
static nvmlReturn_t check_any(nvmlDevice_t d, const void *out, int *idx, int *mig) {
	if (d >= &migs[0][0] && d < &migs[0][0] + MAX_DEV * MAX_MIG) {
		if (!initialised()) return 1;
		if (!out || d->index >= (int)num("count", 1)) return 2;
		*idx = d->index;
		*mig = d->mig;
		return 0;
	}
	*mig = -1;
	return check(d, out, idx);
}

static unsigned long long mnum(int dev, int mig, const char *key, unsigned long long def) {
	char k[64];
	snprintf(k, sizeof k, "mig%d.%s", mig, key);
	return dnum(dev, k, def);
}

static nvmlReturn_t copy_str(const char *s, char *buf, unsigned int len) {
	if (strlen(s) + 1 > len) return 7;
	memcpy(buf, s, strlen(s) + 1);
	return 0;
}

#ifndef OMIT_nvmlInit_v2
nvmlReturn_t nvmlInit_v2(void) {
	nvmlReturn_t r;
	pthread_mutex_lock(&mu);
	reload_locked();
	pthread_mutex_unlock(&mu);
	r = (nvmlReturn_t)num("init", 0);
	if (r != 0) return r;
	pthread_mutex_lock(&mu);
	refs++;
	pthread_mutex_unlock(&mu);
	return 0;
}
#endif

nvmlReturn_t nvmlShutdown(void) {
	nvmlReturn_t r = 0;
	pthread_mutex_lock(&mu);
	if (refs == 0) r = 1; else refs--;
	pthread_mutex_unlock(&mu);
	return r;
}

const char *nvmlErrorString(nvmlReturn_t r) {
	switch (r) {
	case 0: return "Success";
	case 1: return "Uninitialized";
	case 2: return "Invalid Argument";
	case 3: return "Not Supported";
	case 9: return "Driver Not Loaded";
	case 13: return "Function Not Found";
	case 15: return "GPU is lost";
	default: return "Unknown Error";
	}
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
	char v[128];
	nvmlReturn_t r;
	if (!initialised()) return 1;
	if (!version) return 2;
	if ((r = (nvmlReturn_t)num("driver.ret", 0)) != 0) return r;
	if (!lookup("driver", v, sizeof v)) snprintf(v, sizeof v, "550.54.15");
	return copy_str(v, version, length);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
	nvmlReturn_t r;
	if (!initialised()) return 1;
	if (!count) return 2;
	pthread_mutex_lock(&mu);
	reload_locked();
	pthread_mutex_unlock(&mu);
	if ((r = (nvmlReturn_t)num("count.ret", 0)) != 0) return r;
	*count = (unsigned int)num("count", 1);
	return 0;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
	nvmlReturn_t r;
	if (!initialised()) return 1;
	if (!device || index >= num("count", 1) || index >= MAX_DEV) return 2;
	if ((r = dret((int)index, "handle")) != 0) return r;
	devs[index].index = (int)index;
	devs[index].mig = -1;
	*device = &devs[index];
	return 0;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int length) {
	int i, m; nvmlReturn_t r; char k[64], v[128]; unsigned long long ms;
	if ((r = check_any(d, name, &i, &m)) != 0) return r;
	if (m >= 0) {
		snprintf(k, sizeof k, "dev%d.mig%d.name", i, m);
		if (!lookup(k, v, sizeof v)) snprintf(v, sizeof v, "MIG 1g.10gb");
		return copy_str(v, name, length);
	}
	if ((ms = dnum(i, "slow_ms", 0)) > 0) {
		struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
		nanosleep(&ts, NULL);
	}
	if ((r = dret(i, "name")) != 0) return r;
	snprintf(k, sizeof k, "dev%d.name", i);
	if (!lookup(k, v, sizeof v)) snprintf(v, sizeof v, "NVIDIA Stub GPU");
	return copy_str(v, name, length);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int length) {
	int i, m; nvmlReturn_t r; char k[64], v[128];
	if ((r = check_any(d, uuid, &i, &m)) != 0) return r;
	if (m >= 0) {
		snprintf(k, sizeof k, "dev%d.mig%d.uuid", i, m);
		if (!lookup(k, v, sizeof v)) return 6;
		return copy_str(v, uuid, length);
	}
	if ((r = dret(i, "uuid")) != 0) return r;
	snprintf(k, sizeof k, "dev%d.uuid", i);
	if (!lookup(k, v, sizeof v)) snprintf(v, sizeof v, "GPU-00000000-0000-0000-0000-%012d", i);
	return copy_str(v, uuid, length);
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u) {
	int i; nvmlReturn_t r;
	if ((r = check(d, u, &i)) != 0) return r;
	if ((r = dret(i, "util")) != 0) return r;
	u->gpu = (unsigned int)dnum(i, "util.gpu", 0);
	u->memory = (unsigned int)dnum(i, "util.mem", 0);
	return 0;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m) {
	int i, g; nvmlReturn_t r;
	if ((r = check_any(d, m, &i, &g)) != 0) return r;
	if (g >= 0) {
		m->total = mnum(i, g, "mem.total", 0);
		m->free = mnum(i, g, "mem.free", 0);
		m->used = mnum(i, g, "mem.used", 0);
		return 0;
	}
	if ((r = dret(i, "mem")) != 0) return r;
	m->total = dnum(i, "mem.total", 0);
	m->free = dnum(i, "mem.free", 0);
	/* v1 counts reserved memory as used, as the real library does. */
	m->used = dnum(i, "mem.used", 0) + dnum(i, "mem.reserved", 0);
	return 0;
}

#ifndef OMIT_nvmlDeviceGetMemoryInfo_v2
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m) {
	int i, g; nvmlReturn_t r;
	if ((r = check_any(d, m, &i, &g)) != 0) return r;
	if (m->version != 0x02000028u) return 25;
	if (g >= 0) {
		m->total = mnum(i, g, "mem.total", 0);
		m->reserved = 0;
		m->free = mnum(i, g, "mem.free", 0);
		m->used = mnum(i, g, "mem.used", 0);
		return 0;
	}
	if ((r = dret(i, "mem_v2")) != 0) return r;
	m->total = dnum(i, "mem.total", 0);
	m->reserved = dnum(i, "mem.reserved", 0);
	m->free = dnum(i, "mem.free", 0);
	m->used = dnum(i, "mem.used", 0);
	return 0;
}
#endif

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *p) {
	int i; nvmlReturn_t r;
	if ((r = check(d, p, &i)) != 0) return r;
	if ((r = dret(i, "power")) != 0) return r;
	*p = (unsigned int)dnum(i, "power", 0);
	return 0;
}

#ifndef OMIT_nvmlDeviceGetEnforcedPowerLimit
nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned int *p) {
	int i; nvmlReturn_t r;
	if ((r = check(d, p, &i)) != 0) return r;
	if ((r = dret(i, "power_limit")) != 0) return r;
	*p = (unsigned int)dnum(i, "power_limit", 0);
	return 0;
}
#endif

#ifndef OMIT_nvmlDeviceGetTotalEnergyConsumption
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long *e) {
	int i; nvmlReturn_t r;
	if ((r = check(d, e, &i)) != 0) return r;
	if ((r = dret(i, "energy")) != 0) return r;
	*e = dnum(i, "energy", 0);
	return 0;
}
#endif

#ifndef OMIT_nvmlDeviceGetTemperature
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *t) {
	int i; nvmlReturn_t r;
	if ((r = check(d, t, &i)) != 0) return r;
	if (sensor != 0) return 2;
	if ((r = dret(i, "temp")) != 0) return r;
	*t = (unsigned int)dnum(i, "temp", 0);
	return 0;
}
#endif

#ifndef OMIT_nvmlDeviceGetTemperatureV
nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t d, nvmlTemperature_t *t) {
	int i; nvmlReturn_t r;
	if ((r = check(d, t, &i)) != 0) return r;
	if (t->version != 0x0100000Cu) return 25;
	if (t->sensorType != 0) return 2;
	if ((r = dret(i, "temp_v")) != 0) return r;
	t->temperature = (int)dnum(i, "temp", 0);
	return 0;
}
#endif

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned int *mhz) {
	int i; nvmlReturn_t r; char k[32];
	static const char *names[] = { "graphics", "sm", "mem", "video" };
	if ((r = check(d, mhz, &i)) != 0) return r;
	if (type < 0 || type > 3) return 2;
	if ((r = dret(i, "clock")) != 0) return r;
	snprintf(k, sizeof k, "clock.%s", names[type]);
	*mhz = (unsigned int)dnum(i, k, 0);
	return 0;
}

#ifndef OMIT_nvmlDeviceGetCurrentClocksEventReasons
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d, unsigned long long *reasons) {
	int i; nvmlReturn_t r;
	if ((r = check(d, reasons, &i)) != 0) return r;
	if ((r = dret(i, "reasons")) != 0) return r;
	*reasons = dnum(i, "reasons", 0);
	return 0;
}
#endif

#ifndef OMIT_nvmlDeviceGetCurrentClocksThrottleReasons
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d, unsigned long long *reasons) {
	int i; nvmlReturn_t r;
	if ((r = check(d, reasons, &i)) != 0) return r;
	if ((r = dret(i, "reasons")) != 0) return r;
	*reasons = dnum(i, "reasons", 0);
	return 0;
}
#endif

/* A getter of one unsigned int from devN.<key>, return code devN.<ret>.ret. */
#define UINT_GETTER(sym, key, ret)                                          \
	nvmlReturn_t sym(nvmlDevice_t d, unsigned int *out) {               \
		int i; nvmlReturn_t r;                                      \
		if ((r = check(d, out, &i)) != 0) return r;                 \
		if ((r = dret(i, ret)) != 0) return r;                      \
		*out = (unsigned int)dnum(i, key, 0);                       \
		return 0;                                                   \
	}

#ifndef OMIT_nvmlDeviceGetTotalEccErrors
nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, int type, int counter, unsigned long long *count) {
	int i; nvmlReturn_t r; char k[32];
	if ((r = check(d, count, &i)) != 0) return r;
	if (type < 0 || type > 1 || counter < 0 || counter > 1) return 2;
	if ((r = dret(i, "ecc")) != 0) return r;
	snprintf(k, sizeof k, "ecc.%d.%d", type, counter);
	*count = dnum(i, k, 0);
	return 0;
}
#endif

#ifndef OMIT_nvmlDeviceGetRemappedRows
nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t d, unsigned int *corr, unsigned int *unc,
		unsigned int *pending, unsigned int *failure) {
	int i; nvmlReturn_t r;
	if ((r = check(d, corr, &i)) != 0) return r;
	if (!unc || !pending || !failure) return 2;
	if ((r = dret(i, "remap")) != 0) return r;
	*corr = (unsigned int)dnum(i, "remap.corr", 0);
	*unc = (unsigned int)dnum(i, "remap.unc", 0);
	*pending = (unsigned int)dnum(i, "remap.pending", 0);
	*failure = (unsigned int)dnum(i, "remap.failure", 0);
	return 0;
}
#endif

#ifndef OMIT_nvmlDeviceGetRetiredPagesPendingStatus
nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t d, int *pending) {
	int i; nvmlReturn_t r;
	if ((r = check(d, pending, &i)) != 0) return r;
	if ((r = dret(i, "retired")) != 0) return r;
	*pending = (int)dnum(i, "retired.pending", 0);
	return 0;
}
#endif

#ifndef OMIT_nvmlDeviceGetCurrPcieLinkGeneration
UINT_GETTER(nvmlDeviceGetCurrPcieLinkGeneration, "pcie.gen", "pcie_gen")
#endif
#ifndef OMIT_nvmlDeviceGetCurrPcieLinkWidth
UINT_GETTER(nvmlDeviceGetCurrPcieLinkWidth, "pcie.width", "pcie_width")
#endif
#ifndef OMIT_nvmlDeviceGetPcieReplayCounter
UINT_GETTER(nvmlDeviceGetPcieReplayCounter, "pcie.replay", "pcie_replay")
#endif
#ifndef OMIT_nvmlDeviceGetMaxMigDeviceCount
UINT_GETTER(nvmlDeviceGetMaxMigDeviceCount, "mig.max", "mig")
#endif

/* nvmlProcessInfo_t (v2 and v3 take the same 24-byte entries). */
typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

#ifndef OMIT_nvmlDeviceGetComputeRunningProcesses_v3
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *count, nvmlProcessInfo_t *infos) {
	int i, g; nvmlReturn_t r; unsigned int n, k, cap; char key[32];
	if ((r = check_any(d, count, &i, &g)) != 0) return r;
	if ((r = dret(i, "procs")) != 0) return r;
	n = (unsigned int)dnum(i, "procs", 0);
	cap = *count;
	if (cap < n) {
		*count = n;
		return 7;
	}
	if (n > 0 && !infos) return 2;
	for (k = 0; k < n; k++) {
		snprintf(key, sizeof key, "proc%u.pid", k);
		infos[k].pid = (unsigned int)dnum(i, key, 1000 + k);
		snprintf(key, sizeof key, "proc%u.mem", k);
		infos[k].usedGpuMemory = dnum(i, key, 0);
		infos[k].gpuInstanceId = 0xFFFFFFFFu;
		infos[k].computeInstanceId = 0xFFFFFFFFu;
	}
	/* Never written past cap; only the reported count can be garbage. */
	*count = (unsigned int)dnum(i, "procs.claim", n);
	return 0;
}
#endif

#ifndef OMIT_nvmlSystemGetProcessName
nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char *name, unsigned int length) {
	char k[64], v[128];
	if (!initialised()) return 1;
	if (!name) return 2;
	snprintf(k, sizeof k, "pidname.%u", pid);
	if (!lookup(k, v, sizeof v)) return 6;
	return copy_str(v, name, length);
}
#endif

#ifndef OMIT_nvmlDeviceGetMigMode
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int *current, unsigned int *pending) {
	int i; nvmlReturn_t r;
	if ((r = check(d, current, &i)) != 0) return r;
	if (!pending) return 2;
	if ((r = dret(i, "mig")) != 0) return r;
	*current = (unsigned int)dnum(i, "mig.current", 0);
	*pending = (unsigned int)dnum(i, "mig.pending", 0);
	return 0;
}
#endif

#ifndef OMIT_nvmlDeviceGetMigDeviceHandleByIndex
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t d, unsigned int index, nvmlDevice_t *mig) {
	int i; nvmlReturn_t r; char k[64], v[128];
	if ((r = check(d, mig, &i)) != 0) return r;
	if ((r = dret(i, "mig_handle")) != 0) return r;
	if (index >= MAX_MIG || index >= dnum(i, "mig.max", 0)) return 2;
	snprintf(k, sizeof k, "dev%d.mig%u.uuid", i, index);
	if (!lookup(k, v, sizeof v)) return 6;
	migs[i][index].index = i;
	migs[i][index].mig = (int)index;
	*mig = &migs[i][index];
	return 0;
}
#endif

#ifndef OMIT_nvmlDeviceGetGpuInstanceId
nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t d, unsigned int *id) {
	int i, m; nvmlReturn_t r;
	if ((r = check_any(d, id, &i, &m)) != 0) return r;
	if (m < 0) return 2;
	*id = (unsigned int)mnum(i, m, "gi", (unsigned long long)m);
	return 0;
}
#endif

#ifndef OMIT_nvmlDeviceGetCudaComputeCapability
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int *major, int *minor) {
	int i; nvmlReturn_t r;
	if ((r = check(d, major, &i)) != 0) return r;
	if (!minor) return 2;
	if ((r = dret(i, "cc")) != 0) return r;
	*major = (int)dnum(i, "cc.major", 9);
	*minor = (int)dnum(i, "cc.minor", 0);
	return 0;
}
#endif

static nvmlReturn_t cuda_version(int *v) {
	nvmlReturn_t r;
	if (!initialised()) return 1;
	if (!v) return 2;
	if ((r = (nvmlReturn_t)num("cuda.ret", 0)) != 0) return r;
	*v = (int)num("cuda", 12040);
	return 0;
}

#ifndef OMIT_nvmlSystemGetCudaDriverVersion
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) { return cuda_version(v); }
#endif
#ifndef OMIT_nvmlSystemGetCudaDriverVersion_v2
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) { return cuda_version(v); }
#endif

/* Events. One set at a time is enough for the prober; nvmlEventData_t is
 * 32 bytes: device, eventType, eventData, then GI and CI ids. */
typedef struct nvmlEventSet_st { int registered[MAX_DEV]; int delivered; } *nvmlEventSet_t;
typedef struct {
	nvmlDevice_t device;
	unsigned long long eventType, eventData;
	unsigned int gpuInstanceId, computeInstanceId;
} nvmlEventData_t;
static struct nvmlEventSet_st the_set;

#define XID_CRITICAL_ERROR 0x8ULL

#ifndef OMIT_nvmlDeviceGetSupportedEventTypes
nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t d, unsigned long long *types) {
	int i; nvmlReturn_t r;
	if ((r = check(d, types, &i)) != 0) return r;
	if ((r = dret(i, "events")) != 0) return r;
	*types = dnum(i, "events", XID_CRITICAL_ERROR);
	return 0;
}
#endif

#ifndef OMIT_nvmlEventSetCreate
nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
	if (!initialised()) return 1;
	if (!set) return 2;
	pthread_mutex_lock(&mu);
	memset(&the_set, 0, sizeof the_set);
	pthread_mutex_unlock(&mu);
	*set = &the_set;
	return 0;
}
#endif

#ifndef OMIT_nvmlDeviceRegisterEvents
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long types, nvmlEventSet_t set) {
	int i; nvmlReturn_t r;
	if ((r = check(d, set, &i)) != 0) return r;
	if (set != &the_set) return 2;
	if ((r = dret(i, "register")) != 0) return r;
	if (types & ~dnum(i, "events", XID_CRITICAL_ERROR)) return 3;
	pthread_mutex_lock(&mu);
	set->registered[i] = 1;
	pthread_mutex_unlock(&mu);
	return 0;
}
#endif

#ifndef OMIT_nvmlEventSetWait_v2
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms) {
	char list[128], *p, *save = NULL;
	int n = 0;
	if (!initialised()) return 1;
	if (set != &the_set || !data) return 2;
	if (lookup("xid", list, sizeof list)) {
		for (p = strtok_r(list, ",", &save); p; p = strtok_r(NULL, ",", &save), n++) {
			int dev = atoi(p), take;
			char *colon = strchr(p, ':');
			if (!colon || dev < 0 || dev >= MAX_DEV) continue;
			pthread_mutex_lock(&mu);
			take = n >= set->delivered;
			if (take) set->delivered = n + 1;
			take = take && set->registered[dev];
			pthread_mutex_unlock(&mu);
			if (!take) continue;
			devs[dev].index = dev;
			devs[dev].mig = -1;
			data->device = &devs[dev];
			data->eventType = XID_CRITICAL_ERROR;
			data->eventData = strtoull(colon + 1, NULL, 0);
			data->gpuInstanceId = data->computeInstanceId = 0xFFFFFFFFu;
			return 0;
		}
	}
	if (timeoutms > 0) {
		unsigned int ms = timeoutms < 50 ? timeoutms : 50;
		struct timespec ts = { 0, (long)ms * 1000000L };
		nanosleep(&ts, NULL);
	}
	return 10;
}
#endif

#ifndef OMIT_nvmlEventSetFree
nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
	if (!initialised()) return 1;
	if (set != &the_set) return 2;
	return 0;
}
#endif
