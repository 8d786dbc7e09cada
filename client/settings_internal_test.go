package client

import (
	"errors"
	"testing"

	"github.com/ferrymq/ferry/wire"
)

// TestSetting_ReachesEveryField: Setting names each wire field by its name
// and carries the value in that field only; an unknown name is refused.
func TestSetting_ReachesEveryField(t *testing.T) {
	for i, f := range wire.ConfigFieldList() {
		s, err := Setting(f.Name, int64(100+i))
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		cfg, set := settingsToWire([]QueueSetting{s})
		var want wire.QueueConfig
		want.Set(f.Field, int64(100+i))
		if set != f.Field || cfg != want {
			t.Errorf("%s: set %v config %+v, want %v %+v", f.Name, set, cfg, f.Field, want)
		}
	}
	if _, err := Setting("max_dept", 1); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("unknown setting: %v", err)
	}
}

// TestSetting_AgreesWithTheTypedConstructors: MaxDepth(7) and
// Setting("max_depth", 7) make the same request.
func TestSetting_AgreesWithTheTypedConstructors(t *testing.T) {
	s, err := Setting("max_depth", 7)
	if err != nil {
		t.Fatal(err)
	}
	a, as := settingsToWire([]QueueSetting{s})
	b, bs := settingsToWire([]QueueSetting{MaxDepth(7)})
	if a != b || as != bs {
		t.Fatalf("Setting %+v/%v, MaxDepth %+v/%v", a, as, b, bs)
	}
}
