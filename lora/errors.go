package lora

import (
	"errors"
	"fmt"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrConfig reports an adapter_config.json that is not valid JSON or
	// has a key of the wrong type.
	ErrConfig = errors.New("lora: bad adapter_config.json")
	// ErrNotLoRA reports an adapter whose peft_type is not LORA (IA3,
	// LOHA, LOKR, ...).
	ErrNotLoRA = errors.New("lora: not a LoRA adapter")
	// ErrUnsupported reports a setting that changes the merge and that
	// ckpt does not implement (an unknown config key with a value set,
	// layer_replication, an initialisation that altered the base, ...).
	ErrUnsupported = errors.New("lora: unsupported adapter setting")
	// ErrMissing reports an adapter module or tensor the base lacks, or a
	// LoRA pair with a half missing. PEFT loads adapters with
	// strict=False and ignores such modules; ckpt refuses them.
	ErrMissing = errors.New("lora: adapter and base do not match")
	// ErrShape reports adapter tensors whose shapes do not fit the base's
	// tensor or the configured rank.
	ErrShape = errors.New("lora: shape mismatch")
)

// Error is an error about one adapter tensor or module.
type Error struct {
	Adapter string // the adapter, as named to NewAdapter
	Name    string // the tensor or module
	Err     error
}

func (e *Error) Error() string {
	return fmt.Sprintf("adapter %s: %q: %v", e.Adapter, e.Name, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }
