package client

import (
	"context"

	"github.com/ferrymq/ferry/wire"
)

// SettingInfo describes one queue setting as the cluster applies it: its
// name, default, range and what 0 means.
type SettingInfo = wire.SettingInfo

// Setting sets the queue setting with wire name name (as QueueSettings
// and ListQueues' JSON name them, e.g. "max_depth") to v: a count, a
// number of bytes, or a duration in nanoseconds. It reaches every setting,
// the ones without a constructor of their own included; an unknown name
// fails with ErrInvalidArgument.
func Setting(name string, v int64) (QueueSetting, error) {
	f, ok := wire.ConfigFieldNamed(name)
	if !ok {
		return QueueSetting{}, invalidArg("unknown queue setting %q", name)
	}
	s := QueueSetting{fields: f}
	s.value.Set(f, v)
	return s, nil
}

// QueueSettings asks the cluster which queue settings it knows, with their
// defaults, ranges and meaning, in the order of QueueConfig's fields.
func (c *Client) QueueSettings(ctx context.Context) ([]SettingInfo, error) {
	var resp wire.QueueSettingsResponse
	if err := c.call(ctx, nodeRoute{c}, wire.OpQueueSettings, wire.QueueSettingsRequest{}, &resp); err != nil {
		return nil, err
	}
	return resp.Settings, nil
}
