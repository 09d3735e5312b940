/* A fake libcuda.so.1 for the tests of cuda, devicecopy, ckpt and cmd/ckpt
 * (built and bound by package internal/fakecuda): same symbols and C ABI as the
 * CUDA driver API, simple host-memory semantics (every call is synchronous;
 * device pointers are host pointers). Built by the tests with the system C
 * compiler. fake_configure sets the number of devices (default 2) and the
 * CUresult cuInit returns (default 0), and clears the injected faults and
 * modes below.
 *
 * Faults and modes, each set by a fake_* function (tests of the ckpt
 * command call them too, through their own dlopen of the same library):
 *   - fake_fail_nth(kind, n, code): the n-th call from now of cuMemAlloc
 *     (kind 0) or cuMemHostAlloc (kind 1) fails with code;
 *   - fake_fail_ctx(dev, code): cuDevicePrimaryCtxRetain fails on dev;
 *   - fake_fail_attr(dev, code): the attribute queries fail on dev;
 *   - fake_jit(code): JIT-compiling the real checksum PTX fails with code
 *     (the JIT refusals 218, 221, 222, 223). Loading the fat binary
 *     (kernels/xxh64c.fatbin) JITs only where it has no cubin for the
 *     device (see fake_cc), as the driver does;
 *   - fake_cc(dev, major, minor): dev's compute capability (default 9.dev);
 *     fake_jit_loads() and fake_cubin_loads() count how modules were loaded;
 *   - fake_mig(dev, on): dev is a MIG instance: cuDeviceGetUuid_v2 returns
 *     the instance's UUID, the legacy cuDeviceGetUuid its parent GPU's;
 *   - fake_set_free(dev, bytes): dev has this much memory free (default:
 *     plenty); allocations past it fail, a loaded module takes MODULE_COST;
 *   - fake_async(on): copies, memsets and kernels are queued on their
 *     stream and land only when something waits for them (a stream, event
 *     or context synchronisation, or a synchronous copy on the legacy
 *     stream for work queued there), as on a GPU. cuMemsetD8 runs on the
 *     legacy NULL stream, which does not order with non-blocking streams.
 *
 * It loads the real checksum PTX (kernels/xxh64c.ptx), alone or inside the
 * fat binary the driver selects from (a cubin for sm_XY serves compute
 * capability X.Z for Z >= Y; else the PTX, JIT-compiled), as a module and "runs"
 * its kernel xxh64c_chunks in cuLaunchKernel by calling, for every thread of
 * the grid, the kernel's own core compiled for the host from the same
 * source, kernels/xxh64c.cu: the digests it writes are computed over fake
 * device memory exactly as the GPU computes them.
 */
#define _GNU_SOURCE /* memmem */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <pthread.h>

#include "../../../kernels/xxh64c.cu"

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
static int fail_nth[2], fail_nth_code[2];  /* countdown per kind; 0: off */
static int fail_ctx_code[MAXDEV], fail_attr_code[MAXDEV], mig[MAXDEV];
static int jit_result;
static int cc_major[MAXDEV], cc_minor[MAXDEV], cc_set[MAXDEV];
static int jit_loads, cubin_loads;
static uint64_t free_cap[MAXDEV]; /* 0: no cap */
#define MODULE_COST (1ULL << 20)

/* The asynchronous model: a queue of pending operations. */
static int async_mode;
enum { OP_COPY, OP_SET, OP_KERNEL };
typedef struct {
	int kind;
	uintptr_t stream;
	long seq;
	void *dst;
	const void *src;
	size_t n;
	unsigned char v;
	uint64_t size;
	unsigned long long threads;
} op_t;
#define MAXOPS 65536
static op_t ops[MAXOPS];
static int nops;
static long seqno;

static void run_op(op_t *o) {
	switch (o->kind) {
	case OP_COPY: memcpy(o->dst, o->src, o->n); break;
	case OP_SET: memset(o->dst, o->v, o->n); break;
	case OP_KERNEL:
		for (unsigned long long i = 0; i < o->threads; i++)
			xxh64c_chunk((const xxh_u8 *)o->src, o->size, i, (xxh_u64 *)o->dst);
		break;
	}
}
/* flush runs, in queue order, the pending operations of stream (all
 * streams when all is set) queued at or before seq. */
/* The driver is thread-safe: one lock guards the queue and the events. */
static pthread_mutex_t qmu = PTHREAD_MUTEX_INITIALIZER;
static void flush(int all, uintptr_t stream, long seq) {
	pthread_mutex_lock(&qmu);
	int k = 0;
	for (int i = 0; i < nops; i++) {
		if ((all || ops[i].stream == stream) && ops[i].seq <= seq) run_op(&ops[i]);
		else ops[k++] = ops[i];
	}
	nops = k;
	pthread_mutex_unlock(&qmu);
}
static void flush_all(void) { flush(1, 0, __LONG_MAX__); }
static void enqueue(op_t o) {
	pthread_mutex_lock(&qmu);
	if (nops == MAXOPS) {
		for (int i = 0; i < nops; i++) run_op(&ops[i]);
		nops = 0;
	}
	o.seq = ++seqno;
	ops[nops++] = o;
	pthread_mutex_unlock(&qmu);
}

/* Events: handle 0x100000 + id; what each recorded. */
#define MAXEV 65536
static struct { uintptr_t stream; long seq; } evrec[MAXEV];
static unsigned next_event, next_stream;

static int countdown(int kind) {
	if (fail_nth[kind] > 0 && --fail_nth[kind] == 0) return fail_nth_code[kind];
	return 0;
}

void fake_fail_nth(int kind, int n, int code) { fail_nth[kind] = n; fail_nth_code[kind] = code; }
void fake_fail_ctx(int dev, int code) { fail_ctx_code[dev] = code; }
void fake_fail_attr(int dev, int code) { fail_attr_code[dev] = code; }
void fake_jit(int code) { jit_result = code; }
void fake_cc(int dev, int major, int minor) { cc_major[dev] = major; cc_minor[dev] = minor; cc_set[dev] = 1; }
int fake_jit_loads(void) { return jit_loads; }
int fake_cubin_loads(void) { return cubin_loads; }
void fake_mig(int dev, int on) { mig[dev] = on; }
void fake_set_free(int dev, uint64_t bytes) { free_cap[dev] = bytes; }
void fake_async(int on) { flush_all(); async_mode = on; }
int fake_pending(void) { return nops; }

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
	flush_all();
	async_mode = 0;
	jit_result = 0;
	memset(fail_nth, 0, sizeof fail_nth);
	memset(fail_ctx_code, 0, sizeof fail_ctx_code);
	memset(fail_attr_code, 0, sizeof fail_attr_code);
	memset(mig, 0, sizeof mig);
	memset(free_cap, 0, sizeof free_cap);
	memset(cc_set, 0, sizeof cc_set);
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
	if (fail_attr_code[d]) return fail_attr_code[d];
	snprintf(name, len, "Fake GPU %d", d);
	return 0;
}
CUresult cuDeviceTotalMem_v2(size_t *b, CUdevice d) {
	if (d < 0 || d >= ndev()) return 101;
	if (fail_attr_code[d]) return fail_attr_code[d];
	*b = TOTAL;
	return 0;
}
CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d) {
	if (d < 0 || d >= ndev()) return 101;
	if (fail_attr_code[d]) return fail_attr_code[d];
	switch (attr) {
	case 75: *v = cc_set[d] ? cc_major[d] : 9; break; /* CC major */
	case 76: *v = cc_set[d] ? cc_minor[d] : d; break; /* CC minor: 9.d */
	case 50: *v = d == 1 ? 0x10 : 0; break; /* PCI domain */
	case 33: *v = 0x65 + d; break;   /* PCI bus */
	case 34: *v = 0x1f; break;       /* PCI device */
	default: return 1;
	}
	return 0;
}
CUresult cuDeviceGetUuid_v2(unsigned char u[16], CUdevice d) {
	if (d < 0 || d >= ndev()) return 101;
	if (fail_attr_code[d]) return fail_attr_code[d];
	for (int i = 0; i < 16; i++) u[i] = (unsigned char)(d * 16 + i + (mig[d] ? 0x80 : 0));
	return 0;
}
/* The legacy entry point: for a MIG instance, its parent GPU's UUID. */
CUresult cuDeviceGetUuid(unsigned char u[16], CUdevice d) {
	if (d < 0 || d >= ndev()) return 101;
	if (fail_attr_code[d]) return fail_attr_code[d];
	for (int i = 0; i < 16; i++) u[i] = (unsigned char)(d * 16 + i);
	return 0;
}
CUresult cuDevicePrimaryCtxRetain(uintptr_t *c, CUdevice d) {
	if (d < 0 || d >= ndev()) return 101;
	if (fail_ctx_code[d]) return fail_ctx_code[d];
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
CUresult cuCtxSynchronize(void) { if (!current) return 201; flush_all(); return 0; }
static uint64_t free_of(int dev) {
	if (free_cap[dev]) return used[dev] > free_cap[dev] ? 0 : free_cap[dev] - used[dev];
	return TOTAL - (1ULL << 30) * (dev + 1) - used[dev];
}
CUresult cuMemGetInfo_v2(size_t *f, size_t *t) {
	if (!current) return 201;
	*f = free_of(curdev());
	*t = TOTAL;
	return 0;
}
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
	if (!current) return 201;
	if (n == 0) return 1;
	if (n > (1ULL << 30) || curdev() == fail_alloc_dev) return 2;
	if (free_cap[curdev()] && n > free_of(curdev())) return 2;
	int code = countdown(0);
	if (code) return code;
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
	flush_all();
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
	int code = countdown(1);
	if (code) return code;
	*p = calloc(1, n);
	if (!*p) return 2;
	host_allocs++;
	return 0;
}
CUresult cuMemFreeHost(void *p) {
	if (!p || host_allocs == 0) return 1;
	flush_all();
	free(p);
	host_allocs--;
	return 0;
}
CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned flags) { return current && p && n ? 0 : 201; }
CUresult cuMemHostUnregister(void *p) { return current && p ? 0 : 201; }
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, uintptr_t st) {
	if (!current) return 201;
	if (async_mode) {
		enqueue((op_t){.kind = OP_COPY, .stream = st, .dst = (void *)(uintptr_t)d, .src = s, .n = n});
		return 0;
	}
	memcpy((void *)(uintptr_t)d, s, n);
	return 0;
}
/* Synchronous, on the legacy stream: waits for the work queued there, not
 * for non-blocking streams. */
CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) {
	if (!current) return 201;
	flush(0, 0, __LONG_MAX__);
	memcpy(d, (const void *)(uintptr_t)s, n);
	return 0;
}
CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) {
	if (!current) return 201;
	if (async_mode) {
		enqueue((op_t){.kind = OP_SET, .stream = 0, .dst = (void *)(uintptr_t)d, .n = n, .v = v});
		return 0;
	}
	memset((void *)(uintptr_t)d, v, n);
	return 0;
}
/* Stream handles: 0x20000 + 16*id + flags, distinct per stream. */
CUresult cuStreamCreate(uintptr_t *s, unsigned flags) {
	if (!current) return 201;
	*s = 0x20000 + 16 * (uintptr_t)(++next_stream) + (flags & 0xf);
	streams++;
	return 0;
}
CUresult cuStreamDestroy_v2(uintptr_t s) {
	if (!s || streams == 0) return 400;
	flush(0, s, __LONG_MAX__); /* its work still completes */
	streams--;
	return 0;
}
CUresult cuStreamSynchronize(uintptr_t s) { if (!current) return 201; flush(0, s, __LONG_MAX__); return 0; }
CUresult cuEventCreate(uintptr_t *e, unsigned flags) {
	if (!current) return 201;
	pthread_mutex_lock(&qmu);
	unsigned id = next_event++ % MAXEV;
	evrec[id].stream = 0, evrec[id].seq = 0;
	pthread_mutex_unlock(&qmu);
	*e = 0x100000 + id;
	events++;
	return 0;
}
static int event_id(uintptr_t e) { return e >= 0x100000 && e < 0x100000 + MAXEV ? (int)(e - 0x100000) : -1; }
CUresult cuEventDestroy_v2(uintptr_t e) { if (event_id(e) < 0 || events == 0) return 400; events--; return 0; }
CUresult cuEventRecord(uintptr_t e, uintptr_t s) {
	int id = event_id(e);
	if (id < 0) return 400;
	pthread_mutex_lock(&qmu);
	evrec[id].stream = s, evrec[id].seq = seqno;
	pthread_mutex_unlock(&qmu);
	return 0;
}
CUresult cuEventSynchronize(uintptr_t e) {
	int id = event_id(e);
	if (id < 0) return 400;
	pthread_mutex_lock(&qmu);
	uintptr_t s = evrec[id].stream;
	long seq = evrec[id].seq;
	pthread_mutex_unlock(&qmu);
	flush(0, s, seq);
	return 0;
}
#ifndef FAKE_NO_ELAPSED
CUresult cuEventElapsedTime_v2(float *ms, uintptr_t a, uintptr_t b) { *ms = 2.5f; return a && b ? 0 : 400; }
#ifndef FAKE_ONLY_V2_ELAPSED
CUresult cuEventElapsedTime(float *ms, uintptr_t a, uintptr_t b) { *ms = 1.5f; return a && b ? 0 : 400; }
#endif
#endif
/* The checksum module: JIT-compiled from its PTX (jit) or loaded from a cubin. */
static CUresult load_checksum(uintptr_t *m, int jit) {
	if (jit && jit_result) return jit_result;
	if (free_cap[curdev()] && free_of(curdev()) < MODULE_COST) return 2;
	*m = 0x4001;
	used[curdev()] += MODULE_COST;
	if (jit) jit_loads++;
	else cubin_loads++;
	return 0;
}

/* A fat binary as fatbinary writes it: a 16-byte header (magic 0xBA55ED50,
 * u16 version, u16 header size, u64 size of the rest), then images: u16
 * kind (1 PTX, 2 cubin), u16 version, u32 header size, u64 payload size,
 * ..., u32 arch (major*10+minor) at offset 28, payload. The driver picks a
 * cubin of the device's major version and the highest minor not above
 * the device's; failing that, PTX for an arch not above the device's,
 * which it JIT-compiles; failing that, CUDA_ERROR_NO_BINARY_FOR_GPU. */
static CUresult load_fatbin(uintptr_t *m, const unsigned char *b) {
	uint16_t hs;
	uint64_t size;
	memcpy(&hs, b + 6, 2);
	memcpy(&size, b + 8, 8);
	if (hs != 16 || size > (64u << 20)) return 200;
	int d = curdev();
	int major = cc_set[d] ? cc_major[d] : 9, minor = cc_set[d] ? cc_minor[d] : d;
	int dev = major * 10 + minor;
	const unsigned char *cubin = NULL, *ptx = NULL;
	size_t cubin_n = 0, ptx_n = 0;
	int cubin_arch = -1;
	for (uint64_t off = hs; off < hs + size;) {
		uint16_t kind;
		uint32_t ehs, arch;
		uint64_t n;
		memcpy(&kind, b + off, 2);
		memcpy(&ehs, b + off + 4, 4);
		memcpy(&n, b + off + 8, 8);
		memcpy(&arch, b + off + 28, 4);
		if (ehs < 48 || n > size) return 200;
		const unsigned char *p = b + off + ehs;
		if (kind == 2 && (int)arch / 10 == major && (int)arch <= dev && (int)arch > cubin_arch) {
			cubin = p, cubin_n = n, cubin_arch = arch;
		} else if (kind == 1 && (int)arch <= dev) {
			ptx = p, ptx_n = n;
		}
		off += ehs + n;
	}
	static const char entry_cubin[] = ".text.xxh64c_chunks";
	static const char entry_ptx[] = ".visible .entry xxh64c_chunks(";
	if (cubin != NULL) {
		if (cubin_n < 4 || memcmp(cubin, "\x7f" "ELF", 4) != 0) return 200;
		if (memmem(cubin, cubin_n, entry_cubin, sizeof entry_cubin - 1) == NULL) return 200;
		return load_checksum(m, 0);
	}
	if (ptx != NULL) {
		if (memmem(ptx, ptx_n, entry_ptx, sizeof entry_ptx - 1) == NULL) return 218;
		return load_checksum(m, 1);
	}
	return 209;
}

CUresult cuModuleLoadData(uintptr_t *m, const void *image) {
	if (!current) return 201;
	const unsigned char *u = image;
	CUresult r = 0;
	if (u[0] == 0x50 && u[1] == 0xed && u[2] == 0x55 && u[3] == 0xba) { /* stops at a NUL */
		r = load_fatbin(m, image);
	} else if (strncmp((const char *)image, "// fake ptx", 11) == 0) {
		*m = 0x4000;
	} else if (strstr((const char *)image, ".visible .entry xxh64c_chunks(") != NULL) {
		r = load_checksum(m, 1); /* the real checksum PTX */
	} else {
		return 218;
	}
	if (r == 0) modules++;
	return r;
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
	flush_all();
	if (m == 0x4001) used[curdev()] -= MODULE_COST;
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
		__atomic_add_fetch(&launches, 1, __ATOMIC_SEQ_CST);
		if (async_mode) {
			enqueue((op_t){.kind = OP_KERNEL, .stream = stream, .dst = out, .src = data, .size = size,
			               .threads = (unsigned long long)gx * bx});
			return 0;
		}
		for (xxh_u64 i = 0; i < (xxh_u64)gx * bx; i++) xxh64c_chunk(data, size, i, out);
		return 0;
	}
	if (f != 0x5000 || extra != NULL || params == NULL) return 1;
	if (gx != 2 || gy != 3 || gz != 4 || bx != 32 || by != 1 || bz != 1 || shared != 128 || (stream & 0xf) != 1) return 1; /* NewStream(StreamNonBlocking) */
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
