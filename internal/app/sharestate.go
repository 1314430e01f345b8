package app

import (
	"github.com/berthmq/berth/internal/config"
	"github.com/berthmq/berth/internal/sharepart"
)

// shareStore is the share coordinator's store of share-partition state
// (nil: in memory only).
func (n *Node) shareStore(cfg *config.Config) sharepart.Store { return nil }
