package devicecopy

import (
	"encoding/json"
	"time"
)

// The JSON forms below are the ones `ckpt load --json` prints, field for
// field; docs/cli-json.md ("load") is their schema. Empty lists are
// written as [], never null.

// MarshalJSON writes the report as docs/cli-json.md's `preflight`: the
// targets with `device`, `name` (omitted for the cpu), `needed_bytes`
// and `free_bytes` (null when unknown).
func (r *PreflightReport) MarshalJSON() ([]byte, error) {
	type target struct {
		Device      string  `json:"device"`
		Name        string  `json:"name,omitempty"`
		NeededBytes int64   `json:"needed_bytes"`
		FreeBytes   *uint64 `json:"free_bytes"`
	}
	j := struct {
		Targets []target `json:"targets"`
	}{Targets: []target{}}
	for _, t := range r.Targets {
		tj := target{Device: t.Device.String(), Name: t.Name, NeededBytes: t.Needed}
		if t.Known {
			free := t.Free
			tj.FreeBytes = &free
		}
		j.Targets = append(j.Targets, tj)
	}
	return json.Marshal(j)
}

// MarshalJSON writes the mismatch as docs/cli-json.md's
// `uploaded.mismatches` entries: `kind`, `storage`, `tensors`, `device`,
// `chunks`, `bad_chunks`, `want`, `got` and `message` (String).
func (m Mismatch) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Kind    string   `json:"kind"`
		Storage string   `json:"storage"`
		Tensors []string `json:"tensors"`
		Device  string   `json:"device"`
		Chunks  []int64  `json:"chunks"`
		Bad     int64    `json:"bad_chunks"`
		Want    string   `json:"want"`
		Got     string   `json:"got"`
		Message string   `json:"message"`
	}{Kind: m.Kind, Storage: m.Storage, Tensors: m.Tensors, Device: m.Device.String(), Chunks: append([]int64{}, m.Chunks...),
		Bad: m.BadChunks, Want: m.Want.String(), Got: m.Got.String(), Message: m.String()})
}

// MarshalJSON writes the result as docs/cli-json.md's `loaded`: `bytes`,
// `seconds`, `gb_per_s`, `tensors`, `crc_checked`, `storages` and
// `mismatches`.
func (r *HostResult) MarshalJSON() ([]byte, error) {
	type storage struct {
		Key        string   `json:"key"`
		Record     string   `json:"record"`
		File       string   `json:"file"`
		NBytes     int64    `json:"nbytes"`
		BigEndian  bool     `json:"big_endian"`
		CRCChecked bool     `json:"crc32_checked"`
		Mapped     bool     `json:"mapped"`
		Digest     string   `json:"digest"`
		Tensors    []string `json:"tensors"`
		Values     []string `json:"storage_values"`
	}
	j := struct {
		Bytes      int64      `json:"bytes"`
		Seconds    float64    `json:"seconds"`
		GBPerS     float64    `json:"gb_per_s"`
		Tensors    int        `json:"tensors"`
		Values     int        `json:"storage_values"`
		CRCChecked int        `json:"crc_checked"`
		Mapped     int64      `json:"mapped_bytes"`
		Storages   []storage  `json:"storages"`
		Mismatches []Mismatch `json:"mismatches"`
	}{Bytes: r.Bytes, Seconds: r.Elapsed.Seconds(), GBPerS: r.GBPerSecond(), Tensors: len(r.Tensors), Values: len(r.Values),
		CRCChecked: r.CRCChecked(), Storages: []storage{}, Mismatches: append([]Mismatch{}, r.Mismatches...)}
	j.Mapped = r.MappedBytes()
	for _, hs := range r.Storages {
		st := hs.Storage
		j.Storages = append(j.Storages, storage{Key: st.Key, Record: st.Record, File: st.File, NBytes: st.NBytes,
			BigEndian: st.BigEndian, CRCChecked: hs.CRCChecked, Mapped: hs.Mapped, Digest: hs.Digest.String(), Tensors: append([]string{}, hs.Tensors...),
			Values: append([]string{}, hs.Values...)})
	}
	return json.Marshal(j)
}

// MappedBytes is the bytes of the storages taken from a mapping of their
// file (WithFileMapping) rather than copied.
func (r *HostResult) MappedBytes() int64 {
	var n int64
	for _, hs := range r.Storages {
		if hs.Mapped {
			n += hs.Storage.NBytes
		}
	}
	return n
}

// CRCChecked counts the storages whose bytes matched their CRC32.
func (r *HostResult) CRCChecked() int {
	n := 0
	for _, hs := range r.Storages {
		if hs.CRCChecked {
			n++
		}
	}
	return n
}

// MarshalJSON writes the state as docs/cli-json.md's `uploaded`: `bytes`,
// `tensors`, `devices`, the read, upload and verify times and rates,
// `verify`, `verified`, `mismatches` and `storages` (`device_digest` only
// when verified).
func (s *DeviceState) MarshalJSON() ([]byte, error) {
	type arena struct {
		Device   string `json:"device"`
		Bytes    int64  `json:"bytes"`
		Storages int    `json:"storages"`
	}
	type storage struct {
		Key          string   `json:"key"`
		Device       string   `json:"device"`
		NBytes       int64    `json:"nbytes"`
		Swapped      bool     `json:"swapped"`
		CRCChecked   bool     `json:"crc32_checked"`
		FileDigest   string   `json:"file_digest"`
		UploadDigest string   `json:"upload_digest"`
		DeviceDigest string   `json:"device_digest,omitempty"`
		Tensors      []string `json:"tensors"`
		Values       []string `json:"storage_values"`
	}
	j := struct {
		Bytes         int64      `json:"bytes"`
		Tensors       int        `json:"tensors"`
		Values        int        `json:"storage_values"`
		Devices       []arena    `json:"devices"`
		ReadSeconds   float64    `json:"read_seconds"`
		UploadSeconds float64    `json:"upload_seconds"`
		VerifySeconds float64    `json:"verify_seconds"`
		ReadGBPerS    float64    `json:"read_gb_per_s"`
		UploadGBPerS  float64    `json:"upload_gb_per_s"`
		VerifyGBPerS  float64    `json:"verify_gb_per_s"`
		Verify        bool       `json:"verify"`
		Verified      bool       `json:"verified"`
		Mismatches    []Mismatch `json:"mismatches"`
		Storages      []storage  `json:"storages"`
	}{Bytes: s.Bytes, Tensors: len(s.Tensors), Values: len(s.Values), Verify: s.VerifyRequested, Verified: s.Verified,
		ReadSeconds: s.ReadTime.Seconds(), UploadSeconds: s.UploadTime.Seconds(), VerifySeconds: s.VerifyTime.Seconds(),
		ReadGBPerS: gbPerSecond(s.Bytes, s.ReadTime), UploadGBPerS: gbPerSecond(s.Bytes, s.UploadTime), VerifyGBPerS: gbPerSecond(s.Bytes, s.VerifyTime),
		Devices: []arena{}, Mismatches: append([]Mismatch{}, s.Mismatches...), Storages: []storage{}}
	for _, a := range s.Arenas {
		j.Devices = append(j.Devices, arena{Device: a.Device.String(), Bytes: a.Bytes, Storages: a.Storages})
	}
	for _, ds := range s.Storages {
		sj := storage{Key: ds.Storage.Key, Device: ds.Device.String(), NBytes: ds.Storage.NBytes, Swapped: ds.Swapped,
			CRCChecked: ds.CRCChecked, FileDigest: ds.FileDigest.String(), UploadDigest: ds.UploadDigest.String(),
			Tensors: append([]string{}, ds.Tensors...), Values: append([]string{}, ds.Values...)}
		if s.Verified {
			sj.DeviceDigest = ds.DeviceDigest.String()
		}
		j.Storages = append(j.Storages, sj)
	}
	return json.Marshal(j)
}

// gbPerSecond is n bytes per d in 10^9 bytes per second; 0 for no time.
func gbPerSecond(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds() / 1e9
}
