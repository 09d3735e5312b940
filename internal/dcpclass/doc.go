// Package dcpclass names the Python classes of a torch.distributed.checkpoint
// .metadata pickle, once: package dcp writes and parses them, and package
// pickle admits them (as plain objects, never instantiated). It imports
// nothing, so that pickle, below dcp in the layering, can import it too.
package dcpclass
