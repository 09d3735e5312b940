package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/ckpt-dev/ckpt/internal/human"

	"github.com/ckpt-dev/ckpt"
)

func writeLoadText(w io.Writer, rep *ckpt.LoadReport) error {
	var b strings.Builder
	ml := rep.MapLocation
	if ml == "" {
		ml = "none (tensors go where they were saved)"
	}
	fmt.Fprintf(&b, "%s\nMap location: %s\n\n", clean(rep.File), ml)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TENSOR\tSAVED\tTARGET\tBYTES")
	for _, e := range rep.Plan.Entries {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", displayName(e.Name), clean(e.Source), e.Target, human.Bytes(e.NBytes))
	}
	tw.Flush()
	if vals := rep.Plan.Storages; len(vals) > 0 {
		b.WriteString("\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "STORAGE VALUE\tSAVED\tTARGET\tBYTES")
		for _, v := range vals {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", displayName(v.Name), clean(v.Source), v.Target, human.Bytes(v.NBytes))
		}
		tw.Flush()
	}
	b.WriteString("\nPer target device (each storage counted once):\n")
	for _, d := range rep.Plan.Devices() {
		fmt.Fprintf(&b, "  %-8s %s in %d storage(s), %d tensor(s)\n", d.Device, human.Bytes(d.Bytes), d.Storages, d.Tensors)
	}
	if strays := rep.Plan.Strays; len(strays) > 0 {
		fmt.Fprintf(&b, "\n%s\n", strayHeading(strays[0].Dominant))
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		for _, st := range strays {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", displayName(st.Name), clean(st.Tag), human.Bytes(st.NBytes))
		}
		tw.Flush()
	}
	for _, wn := range rep.Warnings {
		fmt.Fprintf(&b, "\nWarning: %s\n", clean(wn))
	}
	if rep.DryRun {
		b.WriteString("\nDry run: no pre-flight, nothing read.\n")
	}
	if rep.Preflight != nil {
		b.WriteString("\nPre-flight: passed\n")
		for _, t := range rep.Preflight.Targets {
			free := "free memory unknown"
			if t.Known {
				free = human.Bytes(int64(min(t.Free, 1<<62))) + " free"
			}
			fmt.Fprintf(&b, "  %-8s needs %s, %s\n", t.Device, human.Bytes(t.Needed), free)
		}
	}
	if h := rep.Loaded; h != nil {
		fmt.Fprintf(&b, "\nLoaded %s (%d storages, %d tensors%s) into host memory %s\n",
			human.Bytes(h.Bytes), len(h.Storages), len(h.Tensors), valueCount(len(h.Values)), timeAndRate(h.Bytes, h.Elapsed))
		fmt.Fprintf(&b, "CRC32 checked: %d of %d storages (the others have no CRC32 in the file); xxh64c digests computed for all\n",
			h.CRCChecked(), len(h.Storages))
		if mapped := h.MappedBytes(); mapped > 0 {
			fmt.Fprintf(&b, "Mapped from the file, not copied: %s (--no-mmap copies)\n", human.Bytes(mapped))
		}
		if len(h.Mismatches) > 0 {
			fmt.Fprintf(&b, "\nVerification FAILED: %d mismatch(es) with the digests saved in the file\n", len(h.Mismatches))
			for _, m := range h.Mismatches {
				fmt.Fprintf(&b, "  %s\n", clean(m.String()))
			}
		}
	}
	if rep.Uploaded != nil {
		writeUploadText(&b, rep)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeUploadText(b *strings.Builder, rep *ckpt.LoadReport) {
	g := rep.Uploaded
	if len(g.Mismatches) > 0 {
		fmt.Fprintf(b, "\nVerification FAILED: %d mismatch(es)\n", len(g.Mismatches))
		for _, m := range g.Mismatches {
			fmt.Fprintf(b, "  %s\n", clean(m.String()))
		}
		return
	}
	fmt.Fprintf(b, "\nUploaded %s (%d storages, %d tensors%s) to the GPU:\n", human.Bytes(g.Bytes), len(g.Storages), len(g.Tensors), valueCount(len(g.Values)))
	for _, d := range g.Arenas {
		fmt.Fprintf(b, "  %-8s %s in %d storage(s)\n", clean(d.Device.String()), human.Bytes(d.Bytes), d.Storages)
	}
	crc := 0
	for _, s := range g.Storages {
		if s.CRCChecked {
			crc++
		}
	}
	fmt.Fprintf(b, "Read:   %s: time spent reading the file\n", timeAndRate(g.Bytes, g.ReadTime))
	fmt.Fprintf(b, "Upload: %s: read, hash and copy, overlapped, until the last copy finished\n", timeAndRate(g.Bytes, g.UploadTime))
	switch {
	case !g.VerifyRequested:
		b.WriteString("Verify: skipped (--no-verify)\n")
	default:
		fmt.Fprintf(b, "Verify: %s: time added after the last copy\n", timeAndRate(g.Bytes, g.VerifyTime))
	}
	fmt.Fprintf(b, "CRC32 checked: %d of %d storages; xxh64c digests computed for all on the host\n", crc, len(g.Storages))
	if g.Verified {
		b.WriteString("verified: every byte on the GPU matches the file (xxh64c, computed on the device)\n")
	}
}

// valueCount is ", N storage value(s)" when n > 0, else "".
func valueCount(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", %d storage value(s)", n)
}
