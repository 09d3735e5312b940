package atomicfile

import (
	"os"
	"strings"
)

// freerunNow is the page cache this process's outputs may take
// without the kernel throttling them (freerunBudget of the background and
// dirty thresholds of /proc/sys/vm, /proc/meminfo and the process's cgroup
// memory limit, v2 or v1).
func freerunNow() int64 {
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil || len(b) > 1<<16 {
			return ""
		}
		return string(b)
	}
	var cgMax, cgCur string
	for _, line := range strings.Split(read("/proc/self/cgroup"), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 || strings.Contains(f[2], "..") {
			continue
		}
		dir := strings.TrimSuffix(f[2], "/")
		switch {
		case f[0] == "0" && f[1] == "" && cgMax == "": // v2
			cgMax, cgCur = read("/sys/fs/cgroup"+dir+"/memory.max"), read("/sys/fs/cgroup"+dir+"/memory.current")
		case f[1] == "memory": // v1
			cgMax, cgCur = read("/sys/fs/cgroup/memory"+dir+"/memory.limit_in_bytes"), read("/sys/fs/cgroup/memory"+dir+"/memory.usage_in_bytes")
		}
	}
	meminfo := read("/proc/meminfo")
	bg := threshold(read("/proc/sys/vm/dirty_background_bytes"), read("/proc/sys/vm/dirty_background_ratio"), meminfo, cgMax, cgCur)
	dirty := threshold(read("/proc/sys/vm/dirty_bytes"), read("/proc/sys/vm/dirty_ratio"), meminfo, cgMax, cgCur)
	return freerunBudget(bg, dirty, meminfo)
}
