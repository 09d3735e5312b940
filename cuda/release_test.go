package cuda

import "testing"

func TestLibraryFileRelease(t *testing.T) {
	for path, want := range map[string]string{
		"/usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.535.261.03": "535.261.03",
		"/usr/lib/x86_64-linux-gnu/libcuda.so.580.65.06":                 "580.65.06",
		"libcuda.so.390.157":                       "390.157",
		"/usr/lib/x86_64-linux-gnu/libcuda.so.1":   "",
		"/usr/lib/x86_64-linux-gnu/libcuda.so.1.1": "",
		"/usr/lib/wsl/lib/libcuda.so.1":            "",
		"/tmp/libfakecuda.so":                      "",
		"/opt/libcuda.so.535.261.03/libother.so.1": "",
		"/usr/lib/libcuda.so.535.261.03.1":         "",
		"/usr/lib/libcuda.so.535.x":                "",
		"":                                         "",
	} {
		if got := LibraryFileRelease(path); got != want {
			t.Errorf("LibraryFileRelease(%q) = %q, want %q", path, got, want)
		}
	}
}
