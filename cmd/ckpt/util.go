package main

import (
	"errors"
	"sort"

	"github.com/ckpt-dev/ckpt/statedict"
)

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func errorsIsNoStats(err error) bool { return errors.Is(err, statedict.ErrNoStats) }
