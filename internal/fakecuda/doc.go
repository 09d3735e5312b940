// Package fakecuda builds, for tests, a fake of NVIDIA's CUDA driver
// library: testdata/fakecuda.c, compiled with the system C compiler into a
// shared library with the symbols and C ABI of libcuda.so.1 over host
// memory, whose checksum kernel runs the real kernel source
// (kernels/xxh64c.cu) on the host. Its fake_* control functions inject the
// failures a real driver produces (see the comment at the top of the C
// file).
//
// The tests of cuda, devicecopy, the root package and cmd/ckpt share it:
// they open the library with cuda.OpenLibrary (or point CKPT_LIBCUDA at
// it) and steer it through Fake. A dlopen of the same path returns the
// library already loaded, so the faults a test sets are the ones the code
// under test meets. Without a C compiler the tests skip, unless
// CKPT_REQUIRE_CC=1 makes that a failure.
package fakecuda
