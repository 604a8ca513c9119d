package main

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/weftmesh/weft/store"
)

// catchupFloorRun is the floors' figure for the catchup scenario: what a
// late joiner of Messages messages of Bytes bytes cannot beat here with
// nothing of weft in the way. Badger alone, as weft runs it
// (store.BadgerOptions), stores each message in the bench process under a
// random 32-byte ID (content hashes are uniform) with one key of a
// sync-order index beside it, in transactions as large as Badger takes:
// the least a store that syncs must write. Then each message is read back
// by its ID, in random order, as a member reads what a joiner asked for.
// With crypto/ed25519's Verify of each signature (the floors' VerifyUs),
// that is the CPU both sides spend at the least; the joiner and its member
// share the machine's cores, so no catch-up of that many takes less than
// that CPU spread over all of them (FloorS). Nothing of the transfer, of
// parsing, or of a store's other indexes is counted.
type catchupFloorRun struct {
	Messages int `json:"messages"`
	Bytes    int `json:"bytes"`
	// StoreS is the writes' wall time; StoreCPUUs the bench process's CPU
	// over it per message (Badger's flushes and compactions in that time
	// included, as a joiner's are).
	StoreS     float64 `json:"store_s"`
	StoreCPUUs float64 `json:"store_cpu_us"`
	ReadCPUUs  float64 `json:"read_cpu_us"` // per message read back
	FloorS     float64 `json:"floor_s"`     // Messages × (VerifyUs + StoreCPUUs + ReadCPUUs) over the cores
}

// catchupFloorBytes is about the wire size of a catchup scenario message
// (benchContent, a prev or two).
const catchupFloorBytes = 450

// catchupFloor measures catchupFloorRun for n messages in a Badger store
// under root, removed after, with verifyUs the floors' Verify time and
// cores the machine's.
func catchupFloor(root string, n int, verifyUs float64, cores int) (catchupFloorRun, error) {
	run := catchupFloorRun{Messages: n, Bytes: catchupFloorBytes}
	dir, err := os.MkdirTemp(root, "floor-badger-")
	if err != nil {
		return run, err
	}
	defer os.RemoveAll(dir)
	db, err := badger.Open(store.BadgerOptions(dir))
	if err != nil {
		return run, fmt.Errorf("badger: %w", err)
	}
	defer db.Close()

	ids := floorIDs(n) // made before the clock starts: a joiner is given its messages' IDs
	cpu0, _ := procCPU(os.Getpid())
	t0 := time.Now()
	if err := floorWrite(db, ids); err != nil {
		return run, err
	}
	run.StoreS = round(time.Since(t0).Seconds(), 2)
	cpu1, _ := procCPU(os.Getpid())
	mrand.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	if err := floorRead(db, ids); err != nil {
		return run, err
	}
	cpu2, _ := procCPU(os.Getpid())
	if n == 0 || cpu2 == 0 {
		return run, nil // no /proc: no CPU figures
	}
	run.StoreCPUUs = round(float64((cpu1-cpu0).Microseconds())/float64(n), 1)
	run.ReadCPUUs = round(float64((cpu2-cpu1).Microseconds())/float64(n), 1)
	perMsg := verifyUs + run.StoreCPUUs + run.ReadCPUUs
	run.FloorS = round(float64(n)*perMsg/1e6/float64(max(cores, 1)), 2)
	return run, nil
}

// floorIDs returns n message keys: a prefix and 32 random bytes each.
func floorIDs(n int) [][]byte {
	raw := make([]byte, n*32)
	_, _ = rand.Read(raw)
	ids := make([][]byte, n)
	for i := range ids {
		ids[i] = append([]byte{'m'}, raw[i*32:(i+1)*32]...)
	}
	return ids
}

// floorWrite stores a message of catchupFloorBytes under each of ids,
// committing each transaction when Badger takes no more. The messages
// share one value: a joiner holds its messages' bytes already, and Badger
// copies what it is given at the commit.
func floorWrite(db *badger.DB, ids [][]byte) error {
	val := make([]byte, catchupFloorBytes)
	_, _ = rand.Read(val)
	txn := db.NewTransaction(true)
	defer func() { txn.Discard() }()
	for i, id := range ids {
		idx := make([]byte, 1+8+32) // sync order: a time, then the ID
		idx[0] = 't'
		binary.BigEndian.PutUint64(idx[1:], uint64(i))
		copy(idx[9:], id[1:])
		set := func() error {
			if err := txn.Set(id, val); err != nil {
				return err
			}
			return txn.Set(idx, nil)
		}
		err := set()
		if errors.Is(err, badger.ErrTxnTooBig) {
			// Committed without the message's index key (perhaps with
			// its value), which go in the next one: a value set twice is
			// the same value.
			if err = txn.Commit(); err != nil {
				return fmt.Errorf("badger commit: %w", err)
			}
			txn = db.NewTransaction(true)
			err = set()
		}
		if err != nil {
			return fmt.Errorf("badger set: %w", err)
		}
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("badger commit: %w", err)
	}
	return nil
}

// floorRead reads each of ids back, a copy of its value, floorReadBatch
// to a read transaction, and checks that it is whole.
func floorRead(db *badger.DB, ids [][]byte) error {
	const floorReadBatch = 2000 // about an exchange's messages (1 MiB)
	for len(ids) > 0 {
		batch := ids[:min(len(ids), floorReadBatch)]
		ids = ids[len(batch):]
		err := db.View(func(txn *badger.Txn) error {
			for _, id := range batch {
				item, err := txn.Get(id)
				if err != nil {
					return err
				}
				v, err := item.ValueCopy(nil)
				if err != nil {
					return err
				}
				if len(v) != catchupFloorBytes {
					return fmt.Errorf("%x: %d bytes, stored %d", id[1:], len(v), catchupFloorBytes)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("badger read: %w", err)
		}
	}
	return nil
}
