package a2abridge

import (
	"errors"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/weftmesh/weft/store"
)

func openStore(t *testing.T, dir string) *store.Store {
	t.Helper()
	s, err := store.Open(store.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newTasks(db Records, table string) *tasks {
	return &tasks{db: db, table: table, mu: &sync.Mutex{}, live: map[string]*storedTask{}}
}

// TestTasks: the task store keeps versions (a stale update is refused),
// lists per agent with filters and pages, and after a reopen has every
// task: finished ones as they ended, running ones as they were created.
func TestTasks(t *testing.T) {
	dir := t.TempDir()
	db := openStore(t, dir)
	s, other := newTasks(db, "a2a:/a2a/peer/A"), newTasks(db, "a2a:/a2a/peer/B")
	ctx := t.Context()
	mk := func(id, ctxID string) *a2a.Task {
		return &a2a.Task{ID: a2a.TaskID(id), ContextID: ctxID, Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted},
			History: []*a2a.Message{a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(id))}}
	}
	v1, err := s.Create(ctx, mk("t1", "c1"))
	if err != nil || v1 != 1 {
		t.Fatalf("Create: %v %v", v1, err)
	}
	if _, err := s.Create(ctx, mk("t1", "c1")); !errors.Is(err, taskstore.ErrTaskAlreadyExists) {
		t.Fatalf("Create twice: %v", err)
	}
	s.Create(ctx, mk("t2", "c2"))
	other.Create(ctx, mk("t3", "c1"))

	working := mk("t1", "c1")
	working.Status.State = a2a.TaskStateWorking
	v2, err := s.Update(ctx, &taskstore.UpdateRequest{Task: working, PrevVersion: v1})
	if err != nil || v2 != 2 {
		t.Fatalf("Update: %v %v", v2, err)
	}
	working.Status.State = a2a.TaskStateFailed // the caller's copy changes: the store's does not
	if got, _ := s.Get(ctx, "t1"); got.Task.Status.State != a2a.TaskStateWorking || got.Version != 2 {
		t.Fatalf("Get of a running task: %v v%d", got.Task.Status.State, got.Version)
	}
	if _, err := s.Update(ctx, &taskstore.UpdateRequest{Task: mk("t1", "c1"), PrevVersion: v1}); !errors.Is(err, taskstore.ErrConcurrentModification) {
		t.Fatalf("stale update: %v", err)
	}
	done := mk("t1", "c1")
	done.Status.State = a2a.TaskStateCompleted
	done.Artifacts = []*a2a.Artifact{{ID: "r", Parts: []*a2a.Part{a2a.NewTextPart("out")}}}
	if _, err := s.Update(ctx, &taskstore.UpdateRequest{Task: done, PrevVersion: v2}); err != nil {
		t.Fatal(err)
	}
	t2w := mk("t2", "c2")
	t2w.Status.State = a2a.TaskStateWorking
	s.Update(ctx, &taskstore.UpdateRequest{Task: t2w, PrevVersion: 1})
	if _, err := s.Get(ctx, "t3"); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("another agent's task: %v", err)
	}

	list, err := s.List(ctx, &a2a.ListTasksRequest{ContextID: "c1", IncludeArtifacts: true})
	if err != nil || len(list.Tasks) != 1 || list.Tasks[0].ID != "t1" || len(list.Tasks[0].Artifacts) != 1 {
		t.Fatalf("List by context: %+v %v", list, err)
	}
	list, _ = s.List(ctx, &a2a.ListTasksRequest{Status: a2a.TaskStateWorking})
	if len(list.Tasks) != 1 || list.Tasks[0].ID != "t2" {
		t.Fatalf("List working: %+v", list)
	}
	list, _ = s.List(ctx, &a2a.ListTasksRequest{PageSize: 1})
	if len(list.Tasks) != 1 || list.TotalSize != 2 || list.NextPageToken == "" {
		t.Fatalf("List page 1: %+v", list)
	}
	next, _ := s.List(ctx, &a2a.ListTasksRequest{PageSize: 1, PageToken: list.NextPageToken})
	if len(next.Tasks) != 1 || next.Tasks[0].ID == list.Tasks[0].ID || next.NextPageToken != "" {
		t.Fatalf("List page 2: %+v", next)
	}
	for _, bad := range []*a2a.ListTasksRequest{{PageSize: 101}, {PageToken: "x"}} {
		if _, err := s.List(ctx, bad); !errors.Is(err, a2a.ErrInvalidParams) {
			t.Errorf("List(%+v): %v, want invalid params", bad, err)
		}
	}

	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openStore(t, dir)
	defer db.Close()
	s = newTasks(db, "a2a:/a2a/peer/A")
	if got, err := s.Get(ctx, "t1"); err != nil || got.Task.Status.State != a2a.TaskStateCompleted || got.Task.Artifacts[0].Parts[0].Text() != "out" {
		t.Fatalf("finished task after a reopen: %+v %v", got, err)
	}
	if got, err := s.Get(ctx, "t2"); err != nil || got.Task.Status.State != a2a.TaskStateSubmitted {
		t.Fatalf("running task after a reopen: %+v %v", got, err)
	}
}
