package main

import "github.com/ckpt-dev/ckpt/remap"

// loadReport decodes `ckpt load --json` as a client does (the schema is
// docs/cli-json.md; the library types marshal it: ckpt.LoadReport).
type loadReport struct {
	File        string        `json:"file"`
	MapLocation string        `json:"map_location"`
	DryRun      bool          `json:"dry_run"`
	Plan        loadPlanJSON  `json:"plan"`
	Preflight   *loadPreJSON  `json:"preflight"`
	Loaded      *loadHostJSON `json:"loaded"`
	Uploaded    *loadGPUJSON  `json:"uploaded"`
	Warnings    []string      `json:"warnings"`
	// Requests counts the HTTP requests made for a URL source.
	Requests *int64 `json:"requests,omitempty"`
}

type loadPlanJSON struct {
	Tensors []loadEntryJSON  `json:"tensors"`
	Devices []loadDeviceJSON `json:"devices"`
	Values  []loadValueJSON  `json:"storage_values"`
	Strays  []remap.Stray    `json:"strays"`
}

// loadValueJSON is a storage value of the plan.
type loadValueJSON struct {
	Name    string `json:"name"`
	Storage string `json:"storage"`
	Source  string `json:"source"`
	Target  string `json:"target"`
	NBytes  int64  `json:"nbytes"`
}

type loadEntryJSON struct {
	Name   string `json:"name"`
	Source string `json:"source"`
	Target string `json:"target"`
	NBytes int64  `json:"nbytes"`
}

type loadDeviceJSON struct {
	Device   string `json:"device"`
	Bytes    int64  `json:"bytes"`
	Tensors  int    `json:"tensors"`
	Storages int    `json:"storages"`
	Values   int    `json:"storage_values"`
}

type loadPreJSON struct {
	Targets []loadTargetJSON `json:"targets"`
}

type loadTargetJSON struct {
	Device      string  `json:"device"`
	Name        string  `json:"name,omitempty"`
	NeededBytes int64   `json:"needed_bytes"`
	FreeBytes   *uint64 `json:"free_bytes"`
}

type loadHostJSON struct {
	Bytes      int64             `json:"bytes"`
	Seconds    float64           `json:"seconds"`
	GBPerS     float64           `json:"gb_per_s"`
	Tensors    int               `json:"tensors"`
	Values     int               `json:"storage_values"`
	CRCChecked int               `json:"crc_checked"`
	Mapped     int64             `json:"mapped_bytes"`
	Storages   []loadStorageJSON `json:"storages"`
	Mismatches []loadMismatch    `json:"mismatches"`
}

type loadStorageJSON struct {
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

// loadGPUJSON is the result of the upload to GPUs.
type loadGPUJSON struct {
	Bytes         int64             `json:"bytes"`
	Tensors       int               `json:"tensors"`
	Values        int               `json:"storage_values"`
	Devices       []loadArenaJSON   `json:"devices"`
	ReadSeconds   float64           `json:"read_seconds"`
	UploadSeconds float64           `json:"upload_seconds"`
	VerifySeconds float64           `json:"verify_seconds"`
	ReadGBPerS    float64           `json:"read_gb_per_s"`
	UploadGBPerS  float64           `json:"upload_gb_per_s"`
	VerifyGBPerS  float64           `json:"verify_gb_per_s"`
	Verify        bool              `json:"verify"`
	Verified      bool              `json:"verified"`
	Mismatches    []loadMismatch    `json:"mismatches"`
	Storages      []loadGPUStorJSON `json:"storages"`
}

type loadArenaJSON struct {
	Device   string `json:"device"`
	Bytes    int64  `json:"bytes"`
	Storages int    `json:"storages"`
}

type loadMismatch struct {
	Kind    string   `json:"kind"`
	Storage string   `json:"storage"`
	Tensors []string `json:"tensors"`
	Device  string   `json:"device"`
	Chunks  []int64  `json:"chunks"`
	Bad     int64    `json:"bad_chunks"`
	Want    string   `json:"want"`
	Got     string   `json:"got"`
	Message string   `json:"message"`
}

type loadGPUStorJSON struct {
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
