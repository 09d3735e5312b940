// Command rankread reads one tensor-parallel rank's part of a checkpoint
// (what `ckpt load --rank R --world-size W --split RULES --map-location
// cpu` reads) and reports the bytes delivered and the bytes the process
// read from files (rchar of /proc/self/io, so page-cache hits count too).
//
//	go run ./bench/rankread PATH RANK WORLD RULES
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/ckpt-dev/ckpt/statedict"
)

func rchar() int64 {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "rchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return -1
}

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: rankread PATH RANK WORLD RULES")
		os.Exit(2)
	}
	rank, _ := strconv.Atoi(os.Args[2])
	world, _ := strconv.Atoi(os.Args[3])
	rules, err := statedict.ParseSplitRules(os.Args[4])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	before := rchar()
	ck, err := statedict.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer ck.Close()
	var total int64
	for _, t := range ck.Tensors {
		total += max(t.NBytes(), 0)
	}
	opened := rchar()
	part, err := statedict.RankCheckpoint(ck, rank, world, rules)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var got int64
	for _, t := range part.Tensors {
		rc, err := t.Open()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		n, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		got += n
	}
	after := rchar()
	fmt.Printf("{\"tensor_bytes\": %d, \"rank_bytes\": %d, \"read_open\": %d, \"read_data\": %d}\n", total, got, opened-before, after-opened)
}
