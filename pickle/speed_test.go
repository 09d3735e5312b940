package pickle

import (
	"bytes"
	"encoding/binary"
	"syscall"
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
		"none-pop":      body([]byte{'N', '0'}, 'N'),
		"mark-popmark":  body([]byte{'(', '1'}, 'N'),
		"memo-put-get":  body(putGet, 'N'),
		"binunicode":    body(uni, 'N'),
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

// cpuTime is the CPU time this process has used (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
