package node

import (
	"errors"
	"fmt"

	"github.com/weftmesh/weft/store"
)

// Error is a failure of a Node method that its caller can act on: Code is
// one of the stable codes of protocol/api (api.CodeUnknownSpace,
// api.CodeBadPeer, …). Node methods also return *protocol.CallError for
// calls and direct messages (its Code is a call code) and protocol's
// validation errors (protocol.Code names them); anything else is a failure
// of the node itself (its store, its network).
type Error struct {
	Code string
	Msg  string
	Err  error // the cause, if any
}

func (e *Error) Error() string {
	if e.Err != nil && e.Msg == "" {
		return e.Err.Error()
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// errorf returns an *Error with code and a formatted message.
func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// wrap returns an *Error with code whose message is err's.
func wrap(code string, err error) *Error { return &Error{Code: code, Err: err} }

// CodeOf returns the code of an *Error in err's chain, or "".
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// notFound turns the store's ErrNotFound into an *Error with code and msg;
// other errors pass unchanged.
func notFound(err error, code, msg string) error {
	if errors.Is(err, store.ErrNotFound) {
		return &Error{Code: code, Msg: msg, Err: err}
	}
	return err
}
