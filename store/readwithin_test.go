package store_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/weftmesh/weft/store"
	"github.com/weftmesh/weft/store/storetest"
)

// TestReadWithinBytes: a read stops before the entry that would take it
// past its byte budget (raw bytes plus the overhead per entry), always
// returning one; cut says so, and next continues after the last entry
// returned, so that following it reads every message once. Expired
// messages are skipped without weighing anything.
func TestReadWithinBytes(t *testing.T) {
	const t0 = 1_000_000
	clock := storetest.NewClock(t0)
	s := openDiskWith(t, t.TempDir(), store.Options{Now: clock.Now, SweepInterval: -1})
	sp := storetest.ID("within")
	var want []string // the raw bytes of the live messages, in order
	for i := range 30 {
		m := storetest.Msg(sp, fmt.Sprint("w", i))
		m.Raw = []byte(fmt.Sprintf("%02d", i) + strings.Repeat("x", 98)) // 100 bytes
		if i%7 == 3 {
			m.Expires = t0 // expired: skipped
		} else {
			want = append(want, string(m.Raw))
		}
		storetest.MustPut(t, s, m)
	}

	// 100 bytes + 50 overhead each: 3 fit in 450, a fourth would not;
	// next is past the expired fourth message, not past the fifth.
	es, next, cut, err := s.ReadWithin(sp, 0, 10, 450, 50)
	if err != nil || len(es) != 3 || !cut || next != es[2].Cursor+1 {
		t.Fatalf("ReadWithin(450) = %d entries, next %d, cut %v, %v; want 3, the fourth's cursor, cut", len(es), next, cut, err)
	}
	// A budget below one entry still returns one.
	if es, _, cut, err := s.ReadWithin(sp, 0, 10, 10, 50); err != nil || len(es) != 1 || !cut {
		t.Fatalf("ReadWithin(10) = %d entries, cut %v, %v; want 1, cut", len(es), cut, err)
	}
	// The limit, not the budget: not cut.
	if es, _, cut, err := s.ReadWithin(sp, 0, 2, 450, 50); err != nil || len(es) != 2 || cut {
		t.Fatalf("ReadWithin(limit 2) = %d entries, cut %v, %v; want 2, not cut", len(es), cut, err)
	}

	// Following next reads every live message once, in order; the last
	// read reaches the end and is not cut.
	var got []string
	after := store.Cursor(0)
	for reads := 0; ; reads++ {
		if reads > 30 {
			t.Fatal("no end")
		}
		es, next, cut, err := s.ReadWithin(sp, after, 10, 450, 50)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			got = append(got, string(e.Raw))
		}
		if !cut && len(es) < 10 {
			if len(es) > 3 {
				t.Fatalf("the last read has %d entries, over the budget", len(es))
			}
			break
		}
		after = next
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("read %d messages:\n%v\nwant %d:\n%v", len(got), got, len(want), want)
	}

	// A negative budget bounds nothing: Read.
	all, _, cut, err := s.ReadWithin(sp, 0, 100, -1, 50)
	if err != nil || len(all) != len(want) || cut {
		t.Fatalf("ReadWithin(-1) = %d entries, cut %v, %v; want %d", len(all), cut, err, len(want))
	}
}
