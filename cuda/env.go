package cuda

import (
	"fmt"
	"strings"
)

// Environment variable names read by the CUDA driver.
const (
	EnvVisibleDevices = "CUDA_VISIBLE_DEVICES"
	EnvDeviceOrder    = "CUDA_DEVICE_ORDER"
)

// Device orders CUDA documents for CUDA_DEVICE_ORDER.
const (
	OrderFastestFirst = "FASTEST_FIRST" // the default
	OrderPCIBusID     = "PCI_BUS_ID"    // ascending PCI bus id, as nvidia-smi numbers GPUs
)

// IDKind classifies one entry of CUDA_VISIBLE_DEVICES.
type IDKind int

// The kinds of CUDA_VISIBLE_DEVICES entries.
const (
	IDIndex   IDKind = iota // a device index in CUDA_DEVICE_ORDER order, e.g. "2"
	IDGPUUUID               // "GPU-8932f937-..." or a unique prefix of it
	IDMIG                   // "MIG-<uuid>" or "MIG-GPU-<uuid>/<gi>/<ci>"
	IDInvalid               // anything else: enumeration stops here
)

// String returns "index", "gpu-uuid", "mig" or "invalid".
func (k IDKind) String() string {
	switch k {
	case IDIndex:
		return "index"
	case IDGPUUUID:
		return "gpu-uuid"
	case IDMIG:
		return "mig"
	}
	return "invalid"
}

// VisibleID is one entry of CUDA_VISIBLE_DEVICES that CUDA enumerates.
type VisibleID struct {
	ID      string // the entry as written
	Kind    IDKind // IDIndex, IDGPUUUID or IDMIG
	Index   int    // the device index, for IDIndex
	Ordinal int    // the ordinal it becomes inside the process (cuda:N)
}

// Env describes how CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER shape the
// devices this process sees. Build it with Environment.
type Env struct {
	VisibleSet bool        // CUDA_VISIBLE_DEVICES is present (possibly empty)
	Visible    string      // its value
	IDs        []VisibleID // the entries CUDA enumerates; IDs[i] becomes ordinal i
	Invalid    string      // the first invalid entry, "" if none
	Hidden     []string    // entries after the invalid one, which CUDA ignores
	HidesAll   bool        // set, and no GPU can be visible
	OrderSet   bool        // CUDA_DEVICE_ORDER is present
	Order      string      // the effective order: OrderFastestFirst or OrderPCIBusID
	OrderRaw   string      // CUDA_DEVICE_ORDER as written
	Notes      []string    // plain-language remarks on the above
}

// Environment reads the two variables through lookup (os.LookupEnv in
// production) and says what CUDA will do with them. It is a pure function
// of the two strings and never fails; what is questionable lands in Notes.
//
// The rules are NVIDIA's (CUDA C Programming Guide, "CUDA Environment
// Variables"): entries are comma-separated indices or GPU UUIDs (a unique
// prefix is enough) or one MIG instance; only the listed devices are
// visible, numbered 0..n-1 in list order; at the first invalid entry
// enumeration stops, so "0,2,-1,1" shows devices 0 and 2 only; an empty
// value hides every GPU. CUDA_DEVICE_ORDER is FASTEST_FIRST (default) or
// PCI_BUS_ID, and decides which physical GPU each index names.
func Environment(lookup func(key string) (string, bool)) Env {
	var e Env
	e.OrderRaw, e.OrderSet = lookup(EnvDeviceOrder)
	e.Order = OrderFastestFirst
	switch e.OrderRaw {
	case OrderPCIBusID:
		e.Order = OrderPCIBusID
	case OrderFastestFirst, "":
	default:
		e.Notes = append(e.Notes, fmt.Sprintf("%s=%q is not a value CUDA documents (only %s and %s); expect the default, %s",
			EnvDeviceOrder, e.OrderRaw, OrderFastestFirst, OrderPCIBusID, OrderFastestFirst))
	}
	e.Visible, e.VisibleSet = lookup(EnvVisibleDevices)
	if !e.VisibleSet {
		return e
	}
	entries := strings.Split(e.Visible, ",")
	seen := map[string]bool{}
	migs := 0
	for i, raw := range entries {
		id, reason := classify(raw)
		if id.Kind != IDInvalid && seen[id.key()] {
			id.Kind, reason = IDInvalid, "repeats an earlier entry (NVIDIA does not document repeats; ckpt assumes enumeration ends there)"
		}
		if id.Kind == IDInvalid {
			e.Invalid = raw
			e.Hidden = entries[i+1:]
			if e.Visible == "" {
				reason = "the variable is set but empty"
			}
			e.Notes = append(e.Notes, fmt.Sprintf("entry %q is invalid: %s; CUDA stops there, so it and every later entry are ignored", raw, reason))
			break
		}
		if reason != "" {
			e.Notes = append(e.Notes, fmt.Sprintf("entry %q: %s", raw, reason))
		}
		seen[id.key()] = true
		if id.Kind == IDMIG {
			migs++
		}
		id.Ordinal = len(e.IDs)
		e.IDs = append(e.IDs, id)
	}
	if migs > 1 {
		e.Notes = append(e.Notes, "more than one MIG instance is listed; NVIDIA documents that CUDA enumerates a single MIG instance only")
	}
	e.HidesAll = len(e.IDs) == 0
	if len(e.IDs) > 0 && e.IDs[0].Kind == IDIndex {
		n := "indices count GPUs in " + e.Order + " order; an index past the last GPU is invalid too and ends the list"
		if e.Order == OrderFastestFirst {
			n += "; nvidia-smi numbers GPUs by PCI bus id, so set CUDA_DEVICE_ORDER=PCI_BUS_ID (or use UUIDs) to make the two agree"
		}
		e.Notes = append(e.Notes, n)
	}
	return e
}

func (v VisibleID) key() string {
	if v.Kind == IDIndex {
		return fmt.Sprint(v.Index)
	}
	return v.ID
}

// classify reads one entry. reason explains an invalid entry, or remarks on
// a valid one.
func classify(raw string) (VisibleID, string) {
	id := VisibleID{ID: raw, Kind: IDInvalid}
	switch {
	case strings.HasPrefix(raw, "GPU-"):
		if !isUUIDText(raw[4:], false) {
			return id, "not a GPU UUID (GPU- followed by hex digits and dashes)"
		}
		id.Kind = IDGPUUUID
		if hexDigits(raw[4:]) < 32 {
			return id, "abbreviated UUID: valid only if no other GPU's UUID starts the same way"
		}
		return id, ""
	case strings.HasPrefix(raw, "MIG-"):
		if !isUUIDText(raw[4:], true) {
			return id, "not a MIG identifier (MIG-<uuid> or MIG-GPU-<uuid>/<gpu instance>/<compute instance>)"
		}
		id.Kind = IDMIG
		return id, ""
	}
	// The driver reads indices like C's strtoul: leading blanks, digits,
	// and it ignores what follows the digits.
	s := strings.TrimLeft(raw, " \t\n\v\f\r")
	n, digits := 0, 0
	for digits < len(s) && '0' <= s[digits] && s[digits] <= '9' {
		if n > 1<<20 {
			return id, "index too large"
		}
		n = n*10 + int(s[digits]-'0')
		digits++
	}
	if digits == 0 {
		if raw == "" {
			return id, "empty entry"
		}
		if s != "" && s[0] == '-' {
			return id, "negative index (a common way to hide all GPUs)"
		}
		return id, "neither a non-negative index, a GPU- UUID nor a MIG- identifier"
	}
	id.Kind, id.Index = IDIndex, n
	if s != raw || digits != len(s) {
		return id, fmt.Sprintf("read as index %d; CUDA parses the leading digits and ignores the rest, so write it plainly", n)
	}
	return id, ""
}

// isUUIDText accepts hex digits and dashes, and for MIG identifiers also
// the "GPU-" prefix and "/" separators of the older MIG form.
func isUUIDText(s string, mig bool) bool {
	if mig {
		s = strings.TrimPrefix(s, "GPU-")
	}
	if hexDigits(s) == 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c == '-' || '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' || mig && c == '/'
		if !ok {
			return false
		}
	}
	return true
}

func hexDigits(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' {
			n++
		}
	}
	return n
}

// Explain returns plain-language lines describing e, for `ckpt devices`.
func (e Env) Explain() []string {
	var out []string
	switch {
	case !e.VisibleSet:
		out = append(out, EnvVisibleDevices+" is not set: every GPU is visible, numbered 0..n-1 in "+e.Order+" order.")
	case e.HidesAll:
		out = append(out, fmt.Sprintf("%s=%q hides every GPU from CUDA in this process.", EnvVisibleDevices, e.Visible))
	default:
		out = append(out, fmt.Sprintf("%s=%q: only the listed GPUs are visible, renumbered in list order:", EnvVisibleDevices, e.Visible))
		for _, id := range e.IDs {
			switch id.Kind {
			case IDIndex:
				out = append(out, fmt.Sprintf("  cuda:%d is GPU index %d (%s order)", id.Ordinal, id.Index, e.Order))
			default:
				out = append(out, fmt.Sprintf("  cuda:%d is %s", id.Ordinal, id.ID))
			}
		}
	}
	if e.OrderSet {
		out = append(out, fmt.Sprintf("%s=%q.", EnvDeviceOrder, e.OrderRaw))
	} else {
		out = append(out, EnvDeviceOrder+" is not set: CUDA uses FASTEST_FIRST, which may differ from nvidia-smi's PCI bus order.")
	}
	for _, n := range e.Notes {
		out = append(out, "Note: "+n+".")
	}
	return out
}
