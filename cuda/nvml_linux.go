package cuda

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/ebitengine/purego"
)

// nvmlLibraryName is the soname of NVIDIA's management library (NVML),
// which the driver installs beside libcuda.so.1.
const nvmlLibraryName = "libnvidia-ml.so.1"

var (
	nvmlOnce    sync.Once
	nvmlRelease string
	nvmlErr     string
)

// NVMLRelease asks NVML (libnvidia-ml.so.1) for the driver release
// ("535.261.03"), once per process. NVML answers only while an NVIDIA
// kernel module is loaded: otherwise, or without the library, it returns
// "" and why (such as "nvmlInit_v2: Driver Not Loaded (9)").
func NVMLRelease() (release, why string) {
	nvmlOnce.Do(func() { nvmlRelease, nvmlErr = queryNVML(nvmlLibraryName) })
	return nvmlRelease, nvmlErr
}

// queryNVML loads lib, initialises NVML, reads the driver version and
// shuts NVML down again. The library stays loaded (NVML may have started
// threads that outlive nvmlShutdown's caller).
func queryNVML(lib string) (string, string) {
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return "", err.Error()
	}
	var (
		initV2   func() int32
		shutdown func() int32
		version  func(buf *byte, n uint32) int32
		errStr   func(r int32) *byte
	)
	for _, f := range []struct {
		fptr any
		name string
	}{{&initV2, "nvmlInit_v2"}, {&shutdown, "nvmlShutdown"}, {&version, "nvmlSystemGetDriverVersion"}, {&errStr, "nvmlErrorString"}} {
		addr, err := purego.Dlsym(h, f.name)
		if err != nil {
			return "", lib + " has no symbol " + f.name
		}
		purego.RegisterFunc(f.fptr, addr)
	}
	describe := func(op string, r int32) string {
		return op + ": " + cString(errStr(r)) + " (" + strconv.Itoa(int(r)) + ")"
	}
	if r := initV2(); r != 0 {
		return "", describe("nvmlInit_v2", r)
	}
	defer shutdown()
	var buf [96]byte // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE is 80
	if r := version(&buf[0], uint32(len(buf))); r != 0 {
		return "", describe("nvmlSystemGetDriverVersion", r)
	}
	buf[len(buf)-1] = 0
	v := cString(&buf[0])
	if !isRelease(v) {
		return "", "nvmlSystemGetDriverVersion returned " + strconv.Quote(v)
	}
	return v, ""
}

// mappedFile returns the file mapped into this process at addr (from
// /proc/self/maps, as dladdr would tell), or "" when none is.
func mappedFile(addr uintptr) string {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		// "start-end perms offset dev inode path"
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || uint64(addr) < start || uint64(addr) >= end {
			continue
		}
		if p := strings.Join(fields[5:], " "); strings.HasPrefix(p, "/") {
			return p
		}
		return ""
	}
	return ""
}
