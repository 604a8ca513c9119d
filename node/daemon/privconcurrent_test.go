package daemon

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// TestPrivateSendsStoredWhenAnswered: concurrent sends to a private space
// are each stored (durably: through the send path, with a cursor) when
// the API answers them. A send whose heads named a message another send
// had stored but not yet taken into the space's membership graph used to
// be held for that parent and answered at once with no cursor, then
// stored later without waiting for the disk (as a relayed message is).
func TestPrivateSendsStoredWhenAnswered(t *testing.T) {
	ctx := context.Background()
	_, c := startNode(t, nil)
	if _, err := c.CreatePrivate(ctx, "club"); err != nil {
		t.Fatal(err)
	}
	const senders, each = 8, 150
	var wg sync.WaitGroup
	errs := make(chan error, senders*each)
	for w := range senders {
		wg.Go(func() {
			for i := range each {
				m, err := c.SendText(ctx, "club", fmt.Sprintf("%d/%d", w, i))
				switch {
				case err != nil:
					errs <- err
				case m.Cursor == "":
					errs <- fmt.Errorf("send %s answered with no cursor: not stored yet", m.ID)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	n := 0
	for err := range errs {
		if n++; n <= 5 {
			t.Error(err)
		}
	}
	if n > 0 {
		t.Fatalf("%d of %d sends failed or were answered before they were stored", n, senders*each)
	}
}
