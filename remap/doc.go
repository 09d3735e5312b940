// Package remap owns device remapping: the rules that say where each saved
// storage goes (torch.load's map_location, spelled for a command line and
// for Go), the Plan that applies them to a checkpoint's tensors and totals
// the bytes per target device, and the detection of stray tensors saved on
// another device than the rest. It reads only metadata (statedict.Tensor
// and statedict.Storage) and never touches tensor data.
//
// # Rules
//
// Parse reads what a user types after --map-location:
//
//	cpu                        everything to the CPU (map_location='cpu')
//	cuda:1                     everything to GPU 1
//	cuda                       everything to the current GPU (index 0 unless WithCurrentDevice)
//	cuda:0=cuda:1,cuda:1=cuda:0  swap two GPUs (map_location={'cuda:0':'cuda:1', ...})
//	cuda=cpu                   every cuda tag to the CPU (see below: torch's dict differs)
//
// In Go the same rules come from To (one device), Dict (a map) and Func (a
// function, like a map_location callable). Devices are parsed by
// ParseDevice, which follows torch.device's parser.
//
// # Where these rules differ from torch.load's map_location
//
//   - A bare type as a dict key matches every index. In torch,
//     map_location={'cuda': 'cpu'} matches only storages tagged exactly
//     "cuda" and leaves "cuda:0" where it was: the dict is an exact string
//     lookup, and torch.save writes "cuda:0", never "cuda". Here the key
//     "cuda" matches "cuda" and every "cuda:N", for every device type. A key
//     with an index ("cuda:0") is an exact match as in torch and wins over
//     the bare key. Keys with an index behave exactly as torch's dict (see
//     interop_test.go, which checks this against torch).
//   - Keys and values are parsed strictly. torch accepts any string as a
//     dict key (a key that matches no tag is silently useless) and fails only
//     when a storage reaches a bad value; here both must be devices. Private
//     backend names are accepted only after WithBackend(name), the way torch
//     accepts them only after rename_privateuse1_backend. The function of
//     Func answers a device string or false (torch's None), not a storage.
//   - Device strings: like torch.device, "cuda1", "gpu", "CUDA:0", "cuda:-1",
//     "cuda:+1", "cuda:x", "cuda:01", "cuda:0:1", " cuda" and "" are refused,
//     and "cpu:0" is accepted. Indices above 127 are refused: torch keeps an
//     index in an int8, so 1.13 wraps "cuda:128" to -128 and later versions
//     reject it. "cpu:1" is refused as torch 2.x does (1.13 accepts it).
//     "mtia" and "maia" are accepted although torch 1.13 predates them.
//   - A rule string may hold spaces around "," and "=", which a shell
//     user may type; a repeated source is an error, where a Python dict
//     literal would keep the last value silently.
//   - In a Plan, a bare target on a type with several devices ("cuda",
//     "xpu") is resolved to the current device of that type, which torch
//     finds at load time and this package takes from WithCurrentDevice
//     (default index 0). "cpu:0", "mps:0" and "meta:0" are counted as "cpu",
//     "mps" and "meta", which have one device each.
//   - A tensor whose file records no location tag (safetensors) counts as
//     saved on "cpu", where safetensors loads by default.
//
// # Storage values
//
// torch.load maps every storage through map_location, including storages
// saved as values of their own (torch.save(t.storage()), a TypedStorage in
// a dict). WithStorageValues gives them to NewPlan, which places each from
// its own location tag in Plan.Storages (StorageEntry), apart from
// Plan.Entries, which stays one entry per tensor. Device totals count a
// storage once per device whether tensors, values or both bring it there.
//
// # Strays
//
// DetectStrays (and Plan.Strays) report tensors saved on another device
// than the one holding most of the checkpoint's bytes, such as a CPU tensor
// in a cuda:0 checkpoint or a lone cuda:1 tensor among cuda:0 ones.
// Optimizer step counters, which torch keeps on the CPU by design, are not
// strays.
package remap
