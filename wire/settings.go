package wire

// QueueSettingsRequest asks any node for the queue settings it knows: their
// names, defaults, ranges and meaning, so that a client or the CLI shows
// the cluster's defaults instead of its own copy of them.
type QueueSettingsRequest struct{}

// QueueSettingsResponse answers QueueSettingsRequest: one entry per
// QueueConfig field the server knows, in field order.
type QueueSettingsResponse struct {
	Settings []SettingInfo `msgpack:"settings"`
}

// SettingInfo describes one queue setting as the server applies it.
type SettingInfo struct {
	// Name is the setting's wire and JSON name, e.g. "max_depth".
	Name string `msgpack:"name"`
	// Kind is "count", "bytes" or "duration" (nanoseconds).
	Kind string `msgpack:"kind"`
	// Default is the value a queue created without the setting gets; for
	// replicas 0 stands for "3, or the cluster size when smaller".
	Default int64 `msgpack:"default"`
	// Min and Max bound the value, both included; Max is 0 when there is
	// no upper bound.
	Min int64 `msgpack:"min"`
	Max int64 `msgpack:"max"`
	// Zero says what 0 means where it means more than the number: "no
	// limit", "off", "keep"; empty otherwise.
	Zero string `msgpack:"zero,omitempty"`
	// Help says in one line what the setting does.
	Help string `msgpack:"help"`
	// Fixed is set for a setting fixed when the queue is created
	// (partitions, replicas).
	Fixed bool `msgpack:"fixed,omitempty"`
}
