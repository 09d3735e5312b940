package pickle

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"testing"
	"time"
)

// floodMixes are opcode streams of about n bytes that build (next to)
// nothing: what a hostile pickle can make every reader walk through.
func floodMixes(n int) map[string][]byte {
	body := func(unit []byte, tail ...byte) []byte {
		b := append([]byte{}, proto...)
		b = append(b, bytes.Repeat(unit, n/len(unit))...)
		return append(append(b, tail...), '.')
	}
	putGet := []byte{'N', 'q', 1, '0', 'h', 1, '0'}
	uni := binary.LittleEndian.AppendUint32([]byte{'X'}, 3)
	uni = append(append(uni, "abc"...), '0')
	return map[string][]byte{
		"none-pop":     body([]byte{'N', '0'}, 'N'),
		"mark-popmark": body([]byte{'(', '1'}, 'N'),
		"memo-put-get": body(putGet, 'N'),
		"binunicode":   body(uni, 'N'),
	}
}

var floodNames = []string{"none-pop", "mark-popmark", "memo-put-get", "binunicode"}

// BenchmarkFlood reports the rate at which Unpickle and Globals read
// opcode floods: MB/s (b.SetBytes) is megabytes of opcodes a second of
// wall time, MB/cpu-s the same per second of this process's CPU time
// (garbage collection included), which a loaded machine disturbs less.
func BenchmarkFlood(b *testing.B) {
	mixes := floodMixes(16 << 20)
	for _, name := range floodNames {
		in := mixes[name]
		for _, reader := range []string{"unpickle", "globals"} {
			b.Run(reader+"/"+name, func(b *testing.B) {
				b.SetBytes(int64(len(in)))
				cpu := cpuTime()
				for b.Loop() {
					var err error
					if reader == "unpickle" {
						_, err = Unpickle(in)
					} else {
						_, _, err = Globals(in, Limits{})
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(in))*float64(b.N)/1e6/(cpuTime()-cpu).Seconds(), "MB/cpu-s")
			})
		}
	}
}

// measureRun runs f and returns the bytes it allocated (garbage included)
// and the CPU time the process used meanwhile.
func measureRun(f func()) (uint64, time.Duration) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu := cpuTime()
	f()
	took := cpuTime() - cpu
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, took
}

// Opcode floods of 8 MiB are read by Unpickle and by Globals at 40 MB or
// more of opcodes per CPU second (at least 100 on an idle machine; the
// bound leaves room for a loaded one), allocating a quarter of their size
// or less: nothing per opcode that leaves nothing behind. Before, the
// rewritten stream alone was as large as the input, and these ran at
// 20-90 MB per CPU second.
func TestFloodBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 64 MiB of floods")
	}
	mixes := floodMixes(8 << 20)
	for _, name := range floodNames {
		in := mixes[name]
		for _, reader := range []string{"Unpickle", "Globals"} {
			var err error
			alloc, cpu := measureRun(func() {
				if reader == "Unpickle" {
					_, err = Unpickle(in)
				} else {
					_, _, err = Globals(in, Limits{})
				}
			})
			rate := float64(len(in)) / 1e6 / cpu.Seconds()
			t.Logf("%s %s: %.1f MB allocated, %v CPU, %.0f MB/cpu-s", reader, name, float64(alloc)/1e6, cpu, rate)
			if err != nil {
				t.Fatalf("%s %s: %v", reader, name, err)
			}
			if alloc > uint64(len(in))/4 {
				t.Errorf("%s %s: %d bytes allocated for %d bytes of opcodes", reader, name, alloc, len(in))
			}
			if rate < 40 {
				t.Errorf("%s %s: %.0f MB of opcodes per CPU second", reader, name, rate)
			}
		}
	}
}

// A flood of 16 Mi MEMOIZE (none read) costs 4 bytes per memo entry, in
// one table both passes share: about 5 bytes allocated per input byte.
// Before, each pass kept 8-byte slots in a slice grown by doubling (30
// bytes per input byte, a 537 MB peak in ckpt inspect).
func TestMemoFloodMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates about 100 MB")
	}
	in := append(append([]byte{0x80, 2, 'N'}, bytes.Repeat([]byte{0x94}, 16<<20)...), '.')
	var err error
	alloc, cpu := measureRun(func() { _, err = Unpickle(in) })
	t.Logf("%.1f MB allocated, %v CPU", float64(alloc)/1e6, cpu)
	if err != nil {
		t.Fatal(err)
	}
	if alloc > 6*uint64(len(in)) {
		t.Errorf("%d bytes allocated for %d bytes of input", alloc, len(in))
	}
}

// An opcode reaching past its FRAME makes Globals read the rest again from
// every point a loader may resume at (up to 32). After one, 40 NONE that
// no reading ever pops and a flood of 4 Mi NONE/POP pairs: the readings
// together cost a small multiple of one pass (they once cost one pass
// each), one is cut, and a finding says so.
func TestRereadBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("reads an 8 MiB flood many times")
	}
	flood := append(bytes.Repeat([]byte{'N', '0'}, 4<<20), 'N', '.')
	plain := append([]byte{0x80, 4}, flood...)
	// FRAME of 1 byte holding the start of a 40-byte BINBYTES.
	crossing := []byte{0x80, 4, 0x95, 1, 0, 0, 0, 0, 0, 0, 0, 'B', 40, 0, 0, 0}
	crossing = append(crossing, bytes.Repeat([]byte{'N'}, 80)...)
	crossing = append(crossing, flood...)
	_, one := measureRun(func() {
		if _, _, err := Globals(plain, Limits{}); err != nil {
			t.Fatal(err)
		}
	})
	var gs []GlobalUse
	var err error
	_, all := measureRun(func() { gs, _, err = Globals(crossing, Limits{}) })
	t.Logf("one pass %v CPU, with the readings from resume points %v CPU (%.1fx)", one, all, all.Seconds()/one.Seconds())
	if err != nil {
		t.Fatal(err)
	}
	cut := false
	for _, g := range gs {
		if g.Op == "FRAME" && g.Verdict == VerdictUnknown && g.Incomplete && bytes.Contains([]byte(g.Reason), []byte("up to here only")) {
			cut = true
		}
	}
	if !cut {
		t.Errorf("no finding says a reading was cut: %+v", gs)
	}
	if all > 12*one+time.Second {
		t.Errorf("the readings took %v CPU, one pass %v", all, one)
	}
}
