// Package devicecopy copies a planned checkpoint into memory and checks
// what arrived: Preflight checks a remap.Plan against the devices it uses
// (and only those) before anything is copied; LoadHost reads cpu-bound
// storages into host memory with CRC32 and xxh64c checks; Upload copies
// GPU-bound storages through page-locked staging buffers into one arena per
// device and verifies them on the device with the kernel of package
// kernels. The results marshal to the JSON `ckpt load --json` prints.
//
// The GPUs are package cuda's: Preflight asks a cuda.Inventory for the
// visible devices, Upload goes through a cuda.Driver (cuda.Open unless
// WithDriver gives one). LoadHost copies to no device and needs no driver.
//
// Storages saved as values of their own (remap.Plan.Storages, placed with
// remap.WithStorageValues) are moved by LoadHost and Upload with the
// tensors' storages: a storage that a tensor views too is read and copied
// once per device, and verified like any other. They are reachable by name
// (HostResult.Value, DeviceState.Value); Plan.Entries stays one entry per
// tensor, matched index for index against the checkpoint's tensors.
//
// Which file holds what:
//
//   - preflight.go: Preflight and its errors.
//   - host.go, hostmap*.go, prefault_*.go: LoadHost (cpu-bound storages
//     into host memory, copied or mapped from their file).
//   - Upload, one job per file: upload.go (Upload and its options),
//     upload_state.go (DeviceState, Arena, DeviceStorage, DeviceTensor and
//     freeing them), upload_layout.go (placing storages in arenas),
//     upload_stream.go (allocating, reading through the staging buffers,
//     queueing copies, host digests), upload_kernel.go (loading and
//     launching the checksum kernel, VerifyUnavailableError).
//   - stream.go, pieces.go: reading storages from sources without cheap
//     random access, and checking pieces that arrive in any order.
//   - values.go: storage values (HostValue, DeviceValue) and the checks
//     of the plan's Storages.
//   - verify.go: VerifyError, Mismatch and DeviceState.Verify.
//   - json.go: the JSON forms of the load report (docs/cli-json.md, "load").
package devicecopy
