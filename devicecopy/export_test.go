package devicecopy

// The stream's shape, for tests that must outnumber its window.
const (
	SegmentSize = segmentSize
	StreamDepth = streamDepth
)

// MemFilesOpened counts the memory files that loads have made.
func MemFilesOpened() int64 { return memFilesOpened.Load() }
