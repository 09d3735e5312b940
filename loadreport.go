package ckpt

import (
	"errors"

	"github.com/ckpt-dev/ckpt/devicecopy"
	"github.com/ckpt-dev/ckpt/remap"
)

// LoadReport is what a load planned, checked, read and uploaded: the
// object `ckpt load --json` prints, whose schema is docs/cli-json.md
// ("load"). Its parts are the library's own results, each marshalling to
// its documented form, so a Go service reports exactly what the CLI
// prints.
type LoadReport struct {
	File        string `json:"file"`         // the source given to Load
	MapLocation string `json:"map_location"` // the rules, normalised; "" when none
	DryRun      bool   `json:"dry_run"`      // WithDryRun: only Plan is filled
	// Plan says where every selected tensor goes.
	Plan *remap.Plan `json:"plan"`
	// Preflight is the pre-flight's report; nil with WithDryRun.
	Preflight *devicecopy.PreflightReport `json:"preflight"`
	// Loaded is what was read into host memory; nil when nothing went to
	// the cpu.
	Loaded *devicecopy.HostResult `json:"loaded"`
	// Uploaded is what was uploaded to GPUs and how it verified; after a
	// failed verification, the GPU bytes planned and the mismatches.
	Uploaded *devicecopy.DeviceState `json:"uploaded"`
	Warnings []string                `json:"warnings"` // the reader's non-fatal findings
	// Requests counts the HTTP requests made for a URL source; the caller
	// that watched the object store (WithObjectStore) sets it.
	Requests *int64 `json:"requests,omitempty"`
}

// Report returns the Model's LoadReport. After a failed verification (the
// Model Load returns with an error matching devicecopy.ErrVerify) it
// carries the mismatches: under Loaded for save-time digests that the
// bytes read into host memory disagree with, under Uploaded otherwise.
func (m *Model) Report() *LoadReport {
	rep := &LoadReport{File: m.src, MapLocation: m.rules, DryRun: m.dryRun, Plan: m.Plan,
		Preflight: m.Preflight, Loaded: m.Host, Warnings: append([]string{}, m.Checkpoint.Warnings...)}
	gpu := false
	var total int64
	for _, u := range m.Plan.Devices() {
		if u.Device.Type == "cuda" {
			gpu = true
			total += u.Bytes
		}
	}
	var ve *devicecopy.VerifyError
	switch {
	case errors.As(m.failed, &ve) && m.Device == nil && !gpu:
		// The host's mismatches are in m.Host already.
	case errors.As(m.failed, &ve):
		rep.Uploaded = &devicecopy.DeviceState{Bytes: total, VerifyRequested: m.verify, Mismatches: ve.Mismatches}
	case m.Device != nil:
		rep.Uploaded = m.Device
	}
	return rep
}

// ErrVerify matches a load whose bytes failed a check
// (devicecopy.ErrVerify): on a GPU after upload, or against the digests
// saved with the checkpoint. The Model is returned with it; see Load.
var ErrVerify = devicecopy.ErrVerify

// VerifyError lists the storages whose bytes failed verification
// (devicecopy.VerifyError); it matches ErrVerify.
type VerifyError = devicecopy.VerifyError

// MismatchSaved is the Kind of a mismatch with a digest saved with the
// checkpoint (the file changed after it was saved), as opposed to one on
// a GPU (devicecopy.MismatchDevice).
const MismatchSaved = devicecopy.MismatchSaved
