/* A fake libcuda.so.1 for devicecopy's tests: same symbols and C ABI as the
 * CUDA driver API, simple host-memory semantics (every call is synchronous;
 * device pointers are host pointers). Built by the tests with the system C
 * compiler. fake_configure sets the number of devices (default 2) and the
 * CUresult cuInit returns (default 0), and clears the injected faults.
 *
 * It loads the real checksum PTX (kernels/xxh64c.ptx) as a module and "runs"
 * its kernel xxh64c_chunks in cuLaunchKernel by calling, for every thread of
 * the grid, the kernel's own core compiled for the host from the same
 * source, kernels/xxh64c.cu: the digests it writes are computed over fake
 * device memory exactly as the GPU computes them.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "../../kernels/xxh64c.cu"

typedef int CUresult;
typedef int CUdevice;
typedef uint64_t CUdeviceptr;

#define MAXDEV 8
#define TOTAL (80ULL << 30)

static int refs[MAXDEV];
static int initialised;
static uint64_t used[MAXDEV];
static __thread uintptr_t current;

static int devices = 2, init_result;

/* Live allocations, for leak checks. */
#define MAXALLOC 4096
static struct { void *p; size_t n; int dev; } allocs[MAXALLOC];
static int host_allocs, streams, events, modules, launches;
static int fail_alloc_dev = -1;

int fake_device_allocs(int dev) {
	int k = 0;
	for (int i = 0; i < MAXALLOC; i++) k += allocs[i].p && allocs[i].dev == dev;
	return k;
}
uint64_t fake_device_used(int dev) { return used[dev]; }
int fake_host_allocs(void) { return host_allocs; }
int fake_streams(void) { return streams; }
int fake_events(void) { return events; }
int fake_modules(void) { return modules; }
int fake_launches(void) { return launches; }
/* cuMemAlloc on device dev fails with CUDA_ERROR_OUT_OF_MEMORY; -1: none. */
void fake_fail_alloc(int dev) { fail_alloc_dev = dev; }

static int ndev(void) { return devices; }
void fake_configure(int n, int init) {
	devices = n < 0 ? 0 : n > MAXDEV ? MAXDEV : n;
	init_result = init;
	initialised = 0;
	fail_alloc_dev = -1;
}

int fake_ctx_refs(int dev) { return refs[dev]; }
uintptr_t fake_current(void) { return current; }

CUresult cuDriverGetVersion(int *v) { *v = 13000; return 0; }
CUresult cuInit(unsigned flags) {
	int r = init_result;
	if (flags != 0) return 1;
	if (r == 0 && ndev() == 0) r = 100;
	if (r == 0) initialised = 1;
	return r;
}
CUresult cuDeviceGetCount(int *n) { if (!initialised) return 3; *n = ndev(); return 0; }
CUresult cuDeviceGet(CUdevice *d, int ordinal) {
	if (!initialised) return 3;
	if (ordinal < 0 || ordinal >= ndev()) return 101;
	*d = ordinal;
	return 0;
}
CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
	if (d < 0 || d >= ndev()) return 101;
	snprintf(name, len, "Fake GPU %d", d);
	return 0;
}
CUresult cuDeviceTotalMem_v2(size_t *b, CUdevice d) { if (d < 0 || d >= ndev()) return 101; *b = TOTAL; return 0; }
CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d) {
	if (d < 0 || d >= ndev()) return 101;
	switch (attr) {
	case 75: *v = 9; break;          /* CC major */
	case 76: *v = d;  break;         /* CC minor: 9.d */
	case 50: *v = d == 1 ? 0x10 : 0; break; /* PCI domain */
	case 33: *v = 0x65 + d; break;   /* PCI bus */
	case 34: *v = 0x1f; break;       /* PCI device */
	default: return 1;
	}
	return 0;
}
CUresult cuDeviceGetUuid_v2(unsigned char u[16], CUdevice d) {
	if (d < 0 || d >= ndev()) return 101;
	for (int i = 0; i < 16; i++) u[i] = (unsigned char)(d * 16 + i);
	return 0;
}
CUresult cuDevicePrimaryCtxRetain(uintptr_t *c, CUdevice d) {
	if (d < 0 || d >= ndev()) return 101;
	refs[d]++;
	*c = 0x1000 + d;
	return 0;
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
	if (d < 0 || d >= ndev()) return 101;
	if (refs[d] == 0) return 201;
	refs[d]--;
	return 0;
}
CUresult cuCtxGetCurrent(uintptr_t *c) { *c = current; return 0; }
CUresult cuCtxSetCurrent(uintptr_t c) { current = c; return 0; }
static int curdev(void) { return current ? (int)(current - 0x1000) : -1; }
CUresult cuCtxSynchronize(void) { return current ? 0 : 201; }
CUresult cuMemGetInfo_v2(size_t *f, size_t *t) {
	if (!current) return 201;
	*f = TOTAL - (1ULL << 30) * (curdev() + 1) - used[curdev()];
	*t = TOTAL;
	return 0;
}
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
	if (!current) return 201;
	if (n == 0) return 1;
	if (n > (1ULL << 30) || curdev() == fail_alloc_dev) return 2;
	int slot = 0;
	while (slot < MAXALLOC && allocs[slot].p) slot++;
	if (slot == MAXALLOC) return 2;
	/* Device allocations are 256-byte aligned, as cuMemAlloc's are. */
	void *m = aligned_alloc(256, (n + 255) / 256 * 256);
	if (!m) return 2;
	allocs[slot].p = m, allocs[slot].n = n, allocs[slot].dev = curdev();
	used[curdev()] += n;
	*p = (CUdeviceptr)(uintptr_t)m;
	return 0;
}
CUresult cuMemFree_v2(CUdeviceptr p) {
	if (!current) return 201;
	for (int i = 0; i < MAXALLOC; i++) {
		if (allocs[i].p == (void *)(uintptr_t)p) {
			used[allocs[i].dev] -= allocs[i].n;
			free(allocs[i].p);
			allocs[i].p = NULL;
			return 0;
		}
	}
	return 1; /* not an allocation: a double free */
}
CUresult cuMemHostAlloc(void **p, size_t n, unsigned flags) {
	if (!current) return 201;
	*p = calloc(1, n);
	if (!*p) return 2;
	host_allocs++;
	return 0;
}
CUresult cuMemFreeHost(void *p) { if (!p || host_allocs == 0) return 1; free(p); host_allocs--; return 0; }
CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned flags) { return current && p && n ? 0 : 201; }
CUresult cuMemHostUnregister(void *p) { return current && p ? 0 : 201; }
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, uintptr_t st) {
	if (!current) return 201;
	memcpy((void *)(uintptr_t)d, s, n);
	return 0;
}
CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) {
	if (!current) return 201;
	memcpy(d, (const void *)(uintptr_t)s, n);
	return 0;
}
CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) {
	if (!current) return 201;
	memset((void *)(uintptr_t)d, v, n);
	return 0;
}
CUresult cuStreamCreate(uintptr_t *s, unsigned flags) { if (!current) return 201; *s = 0x2000 + flags; streams++; return 0; }
CUresult cuStreamDestroy_v2(uintptr_t s) { if (!s || streams == 0) return 400; streams--; return 0; }
CUresult cuStreamSynchronize(uintptr_t s) { return current ? 0 : 201; }
CUresult cuEventCreate(uintptr_t *e, unsigned flags) { if (!current) return 201; *e = 0x3000; events++; return 0; }
CUresult cuEventDestroy_v2(uintptr_t e) { if (!e || events == 0) return 400; events--; return 0; }
CUresult cuEventRecord(uintptr_t e, uintptr_t s) { return e ? 0 : 400; }
CUresult cuEventSynchronize(uintptr_t e) { return e ? 0 : 400; }
CUresult cuEventElapsedTime(float *ms, uintptr_t a, uintptr_t b) { *ms = 1.5f; return a && b ? 0 : 400; }
CUresult cuModuleLoadData(uintptr_t *m, const void *image) {
	if (!current) return 201;
	if (strncmp((const char *)image, "// fake ptx", 11) == 0) {
		*m = 0x4000;
	} else if (strstr((const char *)image, ".visible .entry xxh64c_chunks(") != NULL) {
		*m = 0x4001; /* the real checksum PTX */
	} else {
		return 218;
	}
	modules++;
	return 0;
}
CUresult cuModuleGetFunction(uintptr_t *f, uintptr_t m, const char *name) {
	if (m == 0x4000 && strcmp(name, "add") == 0) *f = 0x5000;
	else if (m == 0x4001 && strcmp(name, "xxh64c_chunks") == 0) *f = 0x5001;
	else if (m == 0x4000 || m == 0x4001) return 500;
	else return 400;
	return 0;
}
CUresult cuModuleUnload(uintptr_t m) {
	if ((m != 0x4000 && m != 0x4001) || modules == 0) return 400;
	modules--;
	return 0;
}
/* The fake kernel "add" takes (unsigned char *p, unsigned n, unsigned char v)
 * and adds v to n bytes. It also checks every launch argument arrived. */
CUresult cuLaunchKernel(uintptr_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, uintptr_t stream, void **params, void **extra) {
	if (!current) return 201;
	if (f == 0x5001) {
		/* xxh64c_chunks(const u8 *data, u64 size, u64 *out): every thread. */
		if (extra != NULL || params == NULL || gy != 1 || gz != 1 || by != 1 || bz != 1 || bx == 0 || bx > 1024) return 1;
		const xxh_u8 *data = (const xxh_u8 *)(uintptr_t)*(CUdeviceptr *)params[0];
		xxh_u64 size = *(xxh_u64 *)params[1];
		xxh_u64 *out = (xxh_u64 *)(uintptr_t)*(CUdeviceptr *)params[2];
		if ((uintptr_t)data % 8 != 0 || (uintptr_t)out % 8 != 0) return 716; /* misaligned address */
		for (xxh_u64 i = 0; i < (xxh_u64)gx * bx; i++) xxh64c_chunk(data, size, i, out);
		launches++;
		return 0;
	}
	if (f != 0x5000 || extra != NULL || params == NULL) return 1;
	if (gx != 2 || gy != 3 || gz != 4 || bx != 32 || by != 1 || bz != 1 || shared != 128 || stream != 0x2001) return 1; /* NewStream(StreamNonBlocking) */
	unsigned char *p = (unsigned char *)(uintptr_t)*(CUdeviceptr *)params[0];
	unsigned n = *(unsigned *)params[1];
	unsigned char v = *(unsigned char *)params[2];
	for (unsigned i = 0; i < n; i++) p[i] += v;
	return 0;
}
CUresult cuGetErrorName(CUresult r, const char **s) {
	switch (r) {
	case 2: *s = "CUDA_ERROR_OUT_OF_MEMORY"; return 0;
	case 100: *s = "CUDA_ERROR_NO_DEVICE"; return 0;
	case 101: *s = "CUDA_ERROR_INVALID_DEVICE"; return 0;
	case 4242: *s = "CUDA_ERROR_FROM_THE_FUTURE"; return 0;
	}
	return 1;
}
CUresult cuGetErrorString(CUresult r, const char **s) {
	if (r == 4242) { *s = "a future error"; return 0; }
	return 1;
}
