package berthmsg

// Berth's tagged fields on DescribeShareGroupOffsets (key 90) response
// partitions (every version): a share-partition's current counts, each a
// zigzag varint (kbin varlong). The partition's leader writes them
// (internal/handler) only where the share-partition has state; `berth
// queue` reads them, stock clients skip them (docs/compatibility.md, key
// 90).
const (
	// ShareStatsTagAvailable: records a consumer can acquire now, in the
	// in-flight window plus those past it up to the high watermark.
	ShareStatsTagAvailable uint32 = 1000
	// ShareStatsTagAcquired: records in flight (under an acquisition lock).
	ShareStatsTagAcquired uint32 = 1001
	// ShareStatsTagDelayed: released records waiting out their retry backoff.
	ShareStatsTagDelayed uint32 = 1002
	// ShareStatsTagOldestAvailableAgeMs: how long the oldest record
	// available in the window has waited, in milliseconds; -1 when none
	// is (records past the window, never fetched, are not timed).
	ShareStatsTagOldestAvailableAgeMs uint32 = 1003
	// ShareStatsTagRedeliveries: records acquired with a delivery count
	// above 1, since this broker took the share-partition.
	ShareStatsTagRedeliveries uint32 = 1004
	// ShareStatsTagRejected: records archived because a consumer rejected
	// them, since this broker took the share-partition.
	ShareStatsTagRejected uint32 = 1005
	// ShareStatsTagDeliveryLimit: records archived at the delivery count
	// limit, since this broker took the share-partition.
	ShareStatsTagDeliveryLimit uint32 = 1006
	// ShareStatsTagDLQWritten: records written to the group's DLQ topic,
	// since this broker took the share-partition.
	ShareStatsTagDLQWritten uint32 = 1007
	// ShareStatsTagArchiving: records waiting for their DLQ write.
	ShareStatsTagArchiving uint32 = 1008
	// ShareStatsTagEndOffset: one past the last offset in the in-flight
	// window; records from here to the high watermark were never fetched
	// (a client times the oldest of them by reading its timestamp).
	ShareStatsTagEndOffset uint32 = 1009
)
