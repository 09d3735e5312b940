// Package atomicfile writes local output files atomically and fast: a
// File is an unnamed temporary file in its destination directory
// (O_TMPFILE on Linux; a locked ".NAME.tmp-*" file elsewhere, which a
// later RemoveStale removes once its writer is dead), written through a
// Writer of large aligned buffers by a second goroutine, and given its
// final name only by Commit,
// so that nothing incomplete ever appears at the path, even after
// kill -9.
//
// The first bytes of a conversion's outputs, up to a budget shared by
// its Files (WriteBackBudget: the kernel's free-run ceiling, below which
// it never throttles a writer, less the pages already dirty), go through
// the page cache and are left to the kernel's write-back, as cp leaves
// them; the rest, and every byte of a File created without a budget
// (which is synced before Commit), are written behind: each window handed
// to the disk as soon as it is written, and dropped from the page cache
// once there (sync_file_range; O_DIRECT where that is missing). ResolveTarget and Commit
// replace only regular files (ErrNotRegular), writing through symbolic
// links as cp does.
//
// Bytes that lie unchanged in a local file (a RangeReader given to
// Writer.ReadFrom) are copied by the kernel with copy_file_range, as cp
// copies, and read otherwise (other systems, a refused copy).
//
// It imports no other ckpt package but internal/human, internal/par (its
// buffers' free list) and internal/fadvise; its messages are
// worded for ckpt convert, its only user.
package atomicfile
