package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/sqlite"
	"github.com/hookbox/hookbox/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) hookbox.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "hookbox.db"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestQueueConformance(t *testing.T) {
	storetest.RunQueue(t, func(t *testing.T) storetest.QueueStore {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "hookbox.db"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestOpsConformance(t *testing.T) {
	storetest.RunOps(t, func(t *testing.T) storetest.FullStore {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "hookbox.db"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
