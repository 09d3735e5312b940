// Package fadvise gives the kernel hints about how a file's bytes will be
// used (posix_fadvise): read soon, or no longer needed in the page cache.
// Hints only: their errors are ignored, and where the system has no such
// call they do nothing.
package fadvise
