package sharestate

import "github.com/berthmq/berth/internal/sharepart"

// The Client is what a partition leader's share-partitions persist
// through (internal/app wires it into the registry); sharestate does not
// import sharepart, so these say it still fits.
var (
	_ sharepart.Store       = (*Client)(nil)
	_ sharepart.StateReader = (*Client)(nil)
	_ sharepart.StateAdmin  = (*Client)(nil)
)
