package main

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
)

// diffPage is the HTML report's page: inline CSS and JS, no network; the
// report goes where diffDataMark is, as JSON (HTML-escaped by
// encoding/json, so it cannot close the script element holding it).
//
//go:embed diff.html
var diffPage []byte

var diffDataMark = []byte("/*DIFF-DATA*/null")

// writeDiffHTML writes the report as one self-contained page to path;
// r.Selected is the tensor whose histogram is shown first ("" for the
// worst).
func writeDiffHTML(path string, r *diffReport) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	i := bytes.Index(diffPage, diffDataMark)
	if i < 0 {
		return fmt.Errorf("diff: the HTML page has no data mark")
	}
	var page bytes.Buffer
	page.Grow(len(diffPage) + len(data))
	page.Write(diffPage[:i])
	page.Write(data)
	page.Write(diffPage[i+len(diffDataMark):])
	if err := os.WriteFile(path, page.Bytes(), 0o644); err != nil {
		return fmt.Errorf("--html: %w", err)
	}
	return nil
}
