package persist

import (
	"context"
	"errors"
	"time"

	"github.com/fencegate/fencegate/internal/groupcommit"
)

// Prune applies the journal retention to every device (at most a bounded
// number of records per device per call) and returns once that is durable.
// The writer also prunes each device its batches touch, so calling Prune
// matters only for devices that receive no commands for a long time.
func (s *Store) Prune(ctx context.Context) error {
	return s.w.Submit(ctx, "", func(tx *groupcommit.Tx) (bool, error) {
		return s.pruneDevices(tx, fencedDevices(tx))
	})
}

// pruneDevices prunes each device's journal; it is the Committer's
// AfterBatch, run for the devices a batch touched.
func (s *Store) pruneDevices(tx *groupcommit.Tx, devices []string) (bool, error) {
	var pruned bool
	for _, d := range devices {
		n, err := s.pruneDevice(tx, d)
		if err != nil {
			return false, err
		}
		pruned = pruned || n > 0
	}
	return pruned, nil
}

var errStopPrune = errors.New("stop")

// pruneDevice removes a device's oldest journal records while there are more
// than MaxRecords or the oldest is older than MaxAge, up to pruneBudget
// records. It stops at a record still waiting for its result, or pinned by
// a retry waiting for that result (see pins). Age alone never removes an
// open in-doubt command: one that was in the driver longer than MaxAge when
// the agent stopped is already past the cutoff when Open marks it, and its
// retry — the command may have reached the device — would be taken as new;
// only MaxRecords newer commands, or a resolution, move it out. It reads
// only the order index (which carries acceptance times) and the in-doubt
// index, never record bodies.
func (s *Store) pruneDevice(tx *groupcommit.Tx, device string) (int, error) {
	j := journalFor(tx, device)
	last, first := j.orderBounds()
	if last == 0 {
		return 0, nil
	}
	count, cutoff := last-first+1, s.cutoff()
	inDoubt := tx.Bucket(bucketInDoubt)
	var doomed [][]byte // journal keys; deleted after the walk (no writes under a cursor walk)
	err := j.forEach(func(at time.Time, id string) error {
		tooMany := count-uint64(len(doomed)) > uint64(s.opts.MaxRecords)
		if len(doomed) == pruneBudget || (!tooMany && !at.Before(cutoff)) || j.isPending(id) || s.pins.pinned(device, id) ||
			(!tooMany && has(inDoubt, j.key([]byte(id)))) {
			return errStopPrune
		}
		doomed = append(doomed, j.key([]byte(id)))
		return nil
	})
	if err != nil && !errors.Is(err, errStopPrune) {
		return 0, err
	}
	for i, k := range doomed {
		if err := j.ids.Delete(k); err != nil {
			return i, err
		}
		if err := inDoubt.Delete(k); err != nil { // an in-doubt record leaves the list with the window (by count)
			return i, err
		}
		if err := j.order.Delete(j.key(orderKey(first + uint64(i)))); err != nil {
			return i, err
		}
	}
	return len(doomed), nil
}
