// Package app wires one node together and runs it until its context ends.
package app

import (
	"context"
	"errors"

	"github.com/berthmq/berth/internal/config"
)

// Run starts a node and blocks until ctx is done, then shuts down cleanly.
func Run(ctx context.Context, cfg *config.Config) error {
	return errors.New("not wired yet")
}
