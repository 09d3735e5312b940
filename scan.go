package ckpt

import (
	"context"

	"github.com/ckpt-dev/ckpt/pickle"
	"github.com/ckpt-dev/ckpt/scan"
)

// Verdict is how dangerous a global a pickle imports is (pickle.Verdict):
// VerdictAllowed, VerdictData, VerdictUnknown or VerdictUnsafe.
type Verdict = pickle.Verdict

// The verdicts of a scan, from harmless to dangerous.
const (
	VerdictAllowed = pickle.VerdictAllowed // what torch.load(weights_only=True) accepts
	VerdictData    = pickle.VerdictData    // benign classes kept as opaque values
	VerdictUnknown = pickle.VerdictUnknown // on no list
	VerdictUnsafe  = pickle.VerdictUnsafe  // can run code, import modules or touch the system
)

// ScanReport is what Scan found: the worst verdict and the scan's report
// (package scan), every global with where it is. It marshals to what `ckpt
// scan --json` prints (docs/cli-json.md, "scan").
type ScanReport struct {
	Verdict Verdict `json:"verdict"` // the worst verdict of any finding (Report.Worst)
	*scan.Report
}

// Scan audits the files and directories at paths without running
// anything (scan.Paths): every pickle in every file torch.load could be
// pointed at, and every global each imports with a verdict. A path that
// does not exist, an error walking a directory and ctx's error are
// errors; a file that cannot be read in full is a Problem in the report.
func Scan(ctx context.Context, paths []string, opts ...scan.Option) (*ScanReport, error) {
	rep, err := scan.Paths(ctx, paths, opts...)
	if err != nil {
		return nil, err
	}
	return &ScanReport{Verdict: rep.Worst(), Report: rep}, nil
}
