package protocol

import (
	"errors"
	"fmt"
)

// Validation failures. Every error Validate and Decode return wraps exactly
// one of these, so callers can map them to codes with errors.Is or Code.
var (
	ErrTooLarge     = errors.New("message too large")
	ErrMalformed    = errors.New("malformed message")
	ErrVersion      = errors.New("unsupported message version")
	ErrBadSender    = errors.New("bad sender")
	ErrBadSignature = errors.New("bad signature")
	ErrIDMismatch   = errors.New("message id does not match its bytes")
	ErrClockSkew    = errors.New("message created in the future")
	ErrExpired      = errors.New("message expired")
)

// codes maps each validation failure to its stable code; the most
// specific comes first.
var codes = []struct {
	err  error
	code string
}{
	{ErrTooLarge, "too_large"},
	{ErrVersion, "unsupported_version"},
	{ErrBadSender, "bad_sender"},
	{ErrBadSignature, "bad_signature"},
	{ErrIDMismatch, "id_mismatch"},
	{ErrClockSkew, "clock_skew"},
	{ErrExpired, "expired"},
	{ErrBadID, "bad_id"},
	{ErrMalformed, "malformed"},
}

// Code returns a short stable code for a validation error ("too_large",
// "malformed", …), or "invalid" for an error that wraps none of them.
func Code(err error) string {
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return "invalid"
}

// IsInvalid reports whether err is a validation failure: it wraps one of
// this package's sentinel errors.
func IsInvalid(err error) bool { return Code(err) != "invalid" }

func errorf(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", kind, fmt.Sprintf(format, args...))
}
