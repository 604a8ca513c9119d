package a2abridge

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/weftmesh/weft/store"
)

// Records is where tasks are kept (*store.Store): small values per table
// and key, kept across restarts. Record returns store.ErrNotFound for a
// missing key. Safe for concurrent use.
type Records interface {
	PutRecord(table, key string, value []byte) error
	Record(table, key string) ([]byte, error)
	Records(table string, fn func(key string, value []byte) bool) error
}

// maxListed bounds the tasks a ListTasks reads.
const maxListed = 10000

// tasks is an A2A task store (taskstore.Store) over Records: one table per
// agent the bridge serves, so an agent's tasks are its own.
//
// A task is written to the store when it is created and when it reaches a
// terminal state; the updates in between (working, each streamed artifact
// chunk) are kept in memory only (live), since each store write is synced
// to disk: a stream of thousands of deltas would be thousands of syncs.
// After a restart a task that was running reads as it was created (its
// call ended with the daemon).
type tasks struct {
	db    Records
	table string
	mu    *sync.Mutex            // shared by the bridge's task stores: versions are read then written
	live  map[string]*storedTask // shared: running tasks' latest state, by table + "\x00" + ID
}

var _ taskstore.Store = (*tasks)(nil)

// storedTask is a task as kept in a record.
type storedTask struct {
	Version int64     `json:"v"`
	Updated time.Time `json:"updated"`
	Task    *a2a.Task `json:"task"`
}

func (s *tasks) liveKey(id a2a.TaskID) string { return s.table + "\x00" + string(id) }

func (s *tasks) get(id a2a.TaskID) (*storedTask, error) {
	if st, ok := s.live[s.liveKey(id)]; ok {
		return st, nil
	}
	b, err := s.db.Record(s.table, string(id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, a2a.ErrTaskNotFound
	}
	if err != nil {
		return nil, err
	}
	var st storedTask
	if err := json.Unmarshal(b, &st); err != nil || st.Task == nil {
		return nil, fmt.Errorf("task %s: stored record unreadable: %v", id, err)
	}
	return &st, nil
}

func (s *tasks) put(st *storedTask) error {
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("task %s: encode: %w", st.Task.ID, err)
	}
	return s.db.PutRecord(s.table, string(st.Task.ID), b)
}

// Create stores a new task.
func (s *tasks) Create(ctx context.Context, t *a2a.Task) (taskstore.TaskVersion, error) {
	if t == nil || t.ID == "" {
		return taskstore.TaskVersionMissing, errors.New("a task needs an ID")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.get(t.ID); err == nil {
		return taskstore.TaskVersionMissing, taskstore.ErrTaskAlreadyExists
	} else if !errors.Is(err, a2a.ErrTaskNotFound) {
		return taskstore.TaskVersionMissing, err
	}
	st := &storedTask{Version: 1, Updated: time.Now().UTC(), Task: t}
	if err := s.put(st); err != nil {
		return taskstore.TaskVersionMissing, err
	}
	if !t.Status.State.Terminal() {
		c, err := copyTask(t)
		if err != nil {
			return taskstore.TaskVersionMissing, err
		}
		s.live[s.liveKey(t.ID)] = &storedTask{Version: st.Version, Updated: st.Updated, Task: c}
	}
	return taskstore.TaskVersion(st.Version), nil
}

// Update replaces a stored task, if its version is still PrevVersion.
func (s *tasks) Update(ctx context.Context, u *taskstore.UpdateRequest) (taskstore.TaskVersion, error) {
	if u == nil || u.Task == nil {
		return taskstore.TaskVersionMissing, errors.New("an update needs a task")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.get(u.Task.ID)
	if err != nil {
		return taskstore.TaskVersionMissing, err
	}
	if u.PrevVersion != taskstore.TaskVersionMissing && taskstore.TaskVersion(st.Version) != u.PrevVersion {
		return taskstore.TaskVersionMissing, taskstore.ErrConcurrentModification
	}
	st = &storedTask{Version: st.Version + 1, Updated: time.Now().UTC(), Task: u.Task}
	key := s.liveKey(u.Task.ID)
	if _, running := s.live[key]; running && !u.Task.Status.State.Terminal() {
		t, err := copyTask(u.Task) // the caller goes on changing its own
		if err != nil {
			return taskstore.TaskVersionMissing, err
		}
		st.Task = t
		s.live[key] = st // written when it ends
		return taskstore.TaskVersion(st.Version), nil
	}
	if err := s.put(st); err != nil {
		return taskstore.TaskVersionMissing, err
	}
	delete(s.live, key)
	return taskstore.TaskVersion(st.Version), nil
}

// Get returns a stored task, or a2a.ErrTaskNotFound.
func (s *tasks) Get(ctx context.Context, id a2a.TaskID) (*taskstore.StoredTask, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.get(id)
	if err != nil {
		return nil, err
	}
	t, err := copyTask(st.Task)
	if err != nil {
		return nil, err
	}
	return &taskstore.StoredTask{Task: t, Version: taskstore.TaskVersion(st.Version)}, nil
}

// List returns the stored tasks that match req, most recently updated
// first; the page token is the offset of the next page.
func (s *tasks) List(ctx context.Context, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	size := req.PageSize
	switch {
	case size == 0:
		size = 50
	case size < 1 || size > 100:
		return nil, fmt.Errorf("page size %d: must be 1..100: %w", size, a2a.ErrInvalidParams)
	}
	offset := 0
	if req.PageToken != "" {
		n, err := strconv.Atoi(req.PageToken)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("page token %q: %w", req.PageToken, a2a.ErrInvalidParams)
		}
		offset = n
	}
	var all []storedTask
	var bad error
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.db.Records(s.table, func(key string, b []byte) bool {
		var st storedTask
		if err := json.Unmarshal(b, &st); err != nil || st.Task == nil {
			bad = fmt.Errorf("task %s: stored record unreadable", key)
			return false
		}
		if l, ok := s.live[s.liveKey(a2a.TaskID(key))]; ok {
			t, err := copyTask(l.Task)
			if err != nil {
				bad = err
				return false
			}
			st = storedTask{Version: l.Version, Updated: l.Updated, Task: t}
		}
		if matchTask(st, req) {
			all = append(all, st)
		}
		return len(all) < maxListed
	})
	if err == nil {
		err = bad
	}
	if err != nil {
		return nil, err
	}
	slices.SortFunc(all, func(a, b storedTask) int {
		return cmp.Or(b.Updated.Compare(a.Updated), cmp.Compare(a.Task.ID, b.Task.ID))
	})
	resp := &a2a.ListTasksResponse{Tasks: []*a2a.Task{}, TotalSize: len(all), PageSize: size}
	if offset > len(all) {
		offset = len(all)
	}
	end := min(offset+size, len(all))
	for _, st := range all[offset:end] {
		t := *st.Task
		if !req.IncludeArtifacts {
			t.Artifacts = nil
		}
		if req.HistoryLength != nil && *req.HistoryLength >= 0 && len(t.History) > *req.HistoryLength {
			t.History = t.History[len(t.History)-*req.HistoryLength:]
		}
		resp.Tasks = append(resp.Tasks, &t)
	}
	if end < len(all) {
		resp.NextPageToken = strconv.Itoa(end)
	}
	return resp, nil
}

func matchTask(st storedTask, req *a2a.ListTasksRequest) bool {
	t := st.Task
	if req.ContextID != "" && t.ContextID != req.ContextID {
		return false
	}
	if req.Status != "" && req.Status != a2a.TaskStateUnspecified && t.Status.State != req.Status {
		return false
	}
	if req.StatusTimestampAfter != nil {
		ts := st.Updated
		if t.Status.Timestamp != nil {
			ts = *t.Status.Timestamp
		}
		if !ts.After(*req.StatusTimestampAfter) {
			return false
		}
	}
	return true
}

// copyTask returns a deep copy of t.
func copyTask(t *a2a.Task) (*a2a.Task, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("task %s: copy: %w", t.ID, err)
	}
	var c a2a.Task
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("task %s: copy: %w", t.ID, err)
	}
	return &c, nil
}
