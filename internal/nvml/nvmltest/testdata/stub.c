/*
 * A stand-in libnvidia-ml.so.1 for tests: the NVML entry points the prober
 * binds, with the ABI of the real library (versioned names, struct layouts,
 * return codes) and values read from a key=value file.
 *
 * The file (STUB_CONFIG, fixed at compile time) is re-read by nvmlInit_v2 and
 * nvmlDeviceGetCount_v2. A collector calls GetCount once per scrape, so a
 * test can change values between scrapes while every getter in one scrape
 * sees one consistent snapshot.
 *
 * Keys: init (return code), count, count.ret, driver, driver.ret, and per
 * device devN.{name,uuid,util.gpu,util.mem,mem.total,mem.free,mem.used,
 * mem.reserved,power,power_limit,energy,temp,clock.sm,reasons,slow_ms}; any
 * getter's return code is devN.<getter>.ret (getters: handle, name, uuid,
 * util, mem, mem_v2, power, power_limit, energy, temp, temp_v, clock,
 * reasons).
 *
 * Optional symbols are left out by compiling with -DOMIT_<symbol>.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef STUB_CONFIG
#error "compile with -DSTUB_CONFIG=\"/path/to/config\""
#endif

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

struct nvmlDevice_st { int index; };

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int refs;
static int nkv;
static char keys[MAX_KV][64];
static char vals[MAX_KV][128];
static struct nvmlDevice_st devs[MAX_DEV];

static void reload_locked(void) {
	FILE *f = fopen(STUB_CONFIG, "r");
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

/* check validates the library state, the handle and the out pointer. */
static nvmlReturn_t check(nvmlDevice_t d, const void *out, int *idx) {
	if (!initialised()) return 1;
	if (d < devs || d >= devs + MAX_DEV || !out) return 2;
	if (d->index >= (int)num("count", 1)) return 2;
	*idx = d->index;
	return 0;
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
	*device = &devs[index];
	return 0;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int length) {
	int i; nvmlReturn_t r; char k[64], v[128]; unsigned long long ms;
	if ((r = check(d, name, &i)) != 0) return r;
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
	int i; nvmlReturn_t r; char k[64], v[128];
	if ((r = check(d, uuid, &i)) != 0) return r;
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
	int i; nvmlReturn_t r;
	if ((r = check(d, m, &i)) != 0) return r;
	if ((r = dret(i, "mem")) != 0) return r;
	m->total = dnum(i, "mem.total", 0);
	m->free = dnum(i, "mem.free", 0);
	/* v1 counts reserved memory as used, as the real library does. */
	m->used = dnum(i, "mem.used", 0) + dnum(i, "mem.reserved", 0);
	return 0;
}

#ifndef OMIT_nvmlDeviceGetMemoryInfo_v2
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m) {
	int i; nvmlReturn_t r;
	if ((r = check(d, m, &i)) != 0) return r;
	if (m->version != 0x02000028u) return 25;
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
