//go:build !linux

package main

import (
	"errors"
	"os"
	"testing"
)

func openPTY(t *testing.T) (*os.File, error) {
	return nil, errors.New("pseudo-terminals are opened on Linux only")
}
