package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/ckpt-dev/ckpt/internal/human"

	"github.com/ckpt-dev/ckpt"
)

func printInspect(w io.Writer, rep *inspectReport, filter string) {
	sum := rep.Summary
	format := rep.Format
	if rep.Version != "" {
		format += " (version " + rep.Version + ")"
	}
	if rep.Compression != "" {
		format += ", " + rep.Compression + "-compressed"
	}
	fmt.Fprintf(w, "File:      %s\n", clean(rep.File))
	fmt.Fprintf(w, "Format:    %s, %s-endian\n", format, rep.ByteOrder)
	if len(rep.Shards) > 0 {
		fmt.Fprintf(w, "Shards:    %d (%s)\n", len(rep.Shards), clean(strings.Join(rep.Shards, ", ")))
	}
	fmt.Fprintf(w, "Tensors:   %s (%s elements, %s) in %s storages (%d shared, %s stored)\n", humanCount(int64(sum.Tensors)),
		humanCount(sum.Elements), human.Bytes(sum.Bytes), humanCount(int64(sum.Storages)), sum.Shared, human.Bytes(sum.StorageBytes))
	fmt.Fprintf(w, "By dtype:  %s\n", groupLine(sum.ByDType))
	fmt.Fprintf(w, "By device: %s\n", groupLine(sum.ByDevice))
	printQuantization(w, rep)
	if filter != "" && len(rep.Tensors) == 0 {
		fmt.Fprintf(w, "\nNo tensor matches --filter %q (of %s tensors).\n", filter, humanCount(int64(sum.Tensors)))
	}
	if len(rep.Tensors) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		header := "NAME\tDTYPE\tSHAPE\tDEVICE\tSIZE\tFLAGS"
		withStats := anyStats(rep.Tensors)
		if withStats {
			header += "\tMIN\tMAX\tMEAN\tNAN\tINF"
		}
		fmt.Fprintln(tw, header)
		for _, t := range rep.Tensors {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s", displayName(t.Name), t.DType, shapeString(t.Shape), clean(t.Device), human.Bytes(t.NBytes), clean(tensorFlags(t)))
			if st := t.Stats; st != nil {
				fmt.Fprintf(tw, "\t%s\t%s\t%s\t%d\t%d", fnum(st.Min), fnum(st.Max), fnum(st.Mean), st.NaN, st.Inf)
			} else if withStats {
				fmt.Fprint(tw, "\t-\t-\t-\t-\t-")
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	}
	if len(rep.Strays) > 0 {
		fmt.Fprintf(w, "\n%s\n", strayHeading(rep.Strays[0].Dominant))
		for _, st := range rep.Strays {
			fmt.Fprintf(w, "  %s on %s (%s)\n", displayName(st.Name), clean(st.Tag), human.Bytes(st.NBytes))
		}
	}
	printObjects(w, "Values", rep.Objects, true)
	printObjects(w, "Opaque objects (kept, not executed)", rep.Opaque, false)
	printObjects(w, "Foreign objects (unknown classes, never executed)", rep.Foreign, false)
	if len(rep.Metadata) > 0 {
		fmt.Fprintln(w, "\nMetadata:")
		for _, k := range sortedKeys(rep.Metadata) {
			fmt.Fprintf(w, "  %s = %s\n", clean(k), clean(rep.Metadata[k]))
		}
	}
	printGGUF(w, rep)
	if len(rep.Warnings) > 0 {
		fmt.Fprintln(w, "\nWarnings:")
		for _, m := range rep.Warnings {
			fmt.Fprintf(w, "  %s\n", clean(m))
		}
	}
}

func anyStats(ts []inspectTensor) bool {
	for _, t := range ts {
		if t.Stats != nil {
			return true
		}
	}
	return false
}

func printObjects(w io.Writer, title string, objs []inspectObject, values bool) {
	if len(objs) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s:\n", title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, o := range objs {
		name := displayName(o.Name)
		if values {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", name, clean(o.Type), clean(ckpt.Repr(o.Value)))
		} else {
			fmt.Fprintf(tw, "  %s\t%s\n", name, clean(o.Type))
		}
	}
	tw.Flush()
}

func fnum(f *float64) string {
	if f == nil {
		return "-"
	}
	return fmt.Sprintf("%.6g", *f)
}

func tensorFlags(t inspectTensor) string {
	var f []string
	add := func(ok bool, s string) {
		if ok {
			f = append(f, s)
		}
	}
	add(t.Parameter, "param")
	add(t.RequiresGrad, "grad")
	add(t.Shared, "shared")
	add(t.View, "view")
	add(!t.Contiguous, "non-contiguous")
	add(t.Stray, "STRAY")
	add(t.Layout != "strided", t.Layout)
	add(t.Quantized, "quantized")
	add(t.Meta, "meta")
	add(t.Attribute, "attr")
	add(t.Subclass != "" && t.DTensor == nil, t.Subclass)
	if d := t.DTensor; d != nil {
		f = append(f, fmt.Sprintf("DTensor %v %s", d.Shape, strings.Join(d.Placements, " ")))
	}
	f = append(f, chunkFlags(t)...)
	f = append(f, ggufFlag(t)...)
	f = append(f, storedFlag(t)...)
	return strings.Join(f, ",")
}

func groupLine(m map[string]int64) string {
	keys := sortedKeys(m)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %s", clean(k), human.Bytes(m[k])))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}
