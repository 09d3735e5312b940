package devicecopy

// The stream's shape, for tests that must outnumber its window.
const (
	SegmentSize = segmentSize
	StreamDepth = streamDepth
)
