//go:build !unix

package target

import (
	"context"
	"errors"

	"github.com/hookbox/hookbox"
)

var errUnsupported = errors.New("exec: the exec target needs a Unix system (process groups)")

func supported() error { return errUnsupported }

func (e *Exec) run(context.Context, *hookbox.Event) error { return errUnsupported }

// KillRunning does nothing where Exec runs no command; see the Unix
// version.
func KillRunning() {}
