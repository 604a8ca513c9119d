package localapi

import (
	"errors"
	"net/http"

	"github.com/weftmesh/weft/node"
	"github.com/weftmesh/weft/protocol"
	"github.com/weftmesh/weft/protocol/api"
)

// statusOf is the one table from an error's code to its HTTP status: every
// code the API answers with is here, so a mistake has one code and one
// status on every route. A call code an agent made up (a handler's own
// error) is not, and answers 502 as the failure of the remote handler.
var statusOf = map[string]int{
	// The request.
	api.CodeBadRequest:   http.StatusBadRequest,
	api.CodeBadCursor:    http.StatusBadRequest,
	api.CodeBadAddr:      http.StatusBadRequest,
	api.CodeBadPeer:      http.StatusBadRequest,
	api.CodeBadID:        http.StatusBadRequest,
	api.CodeMethod:       http.StatusMethodNotAllowed,
	api.CodeForbidden:    http.StatusForbidden,
	api.CodeUnauthorized: http.StatusUnauthorized,
	// What it names.
	api.CodeNotFound:     http.StatusNotFound,
	api.CodeUnknownSpace: http.StatusNotFound,
	api.CodeUnknownCall:  http.StatusNotFound,
	api.CodeNoHandler:    http.StatusNotFound,
	// A message that is not acceptable (protocol's validation codes).
	api.CodeInvalid:            http.StatusUnprocessableEntity,
	api.CodeTooLarge:           http.StatusRequestEntityTooLarge,
	api.CodeMalformed:          http.StatusUnprocessableEntity,
	api.CodeUnsupportedVersion: http.StatusUnprocessableEntity,
	api.CodeBadSender:          http.StatusUnprocessableEntity,
	api.CodeBadSignature:       http.StatusUnprocessableEntity,
	api.CodeIDMismatch:         http.StatusUnprocessableEntity,
	api.CodeClockSkew:          http.StatusUnprocessableEntity,
	api.CodeExpired:            http.StatusUnprocessableEntity,
	// Peers and calls.
	api.CodeConnectFailed: http.StatusBadGateway,
	api.CodeUnreachable:   http.StatusServiceUnavailable,
	api.CodeOverloaded:    http.StatusServiceUnavailable,
	api.CodeDeadline:      http.StatusGatewayTimeout,
	api.CodeCancelled:     http.StatusConflict,
	api.CodeHandlerFailed: http.StatusBadGateway,
	api.CodeRefused:       http.StatusBadGateway,
	api.CodeInternal:      http.StatusInternalServerError,
	// This node.
	api.CodeUnavailable: http.StatusServiceUnavailable,
	// Flood resistance.
	api.CodeQuotaExceeded: http.StatusInsufficientStorage,
	api.CodeRateLimited:   http.StatusTooManyRequests,
	// Private spaces.
	api.CodeNotMember: http.StatusForbidden,
	api.CodeBadInvite: http.StatusUnprocessableEntity,
}

// describe turns an error of the backend into the API's answer: its
// status, stable code and message.
func describe(err error) (int, api.ErrorBody) {
	var ne *node.Error
	var ce *protocol.CallError
	code := api.CodeUnavailable // the node itself failed: its store, its network
	switch {
	case errors.As(err, &ne):
		code = ne.Code
	case errors.As(err, &ce):
		code = ce.Code
		if ce.Message != "" {
			return status(code), api.ErrorBody{Code: code, Message: ce.Message}
		}
	case protocol.IsInvalid(err):
		code = protocol.Code(err)
	}
	return status(code), api.ErrorBody{Code: code, Message: err.Error()}
}

// status is a code's HTTP status; a code of an agent's own is a failure
// of the remote handler.
func status(code string) int {
	if s, ok := statusOf[code]; ok {
		return s
	}
	return http.StatusBadGateway
}

func writeErr(w http.ResponseWriter, err error) {
	st, body := describe(err)
	writeJSON(w, st, api.Error{Error: body})
}

// writeError answers with code (whose status comes from the table) and msg.
func writeError(w http.ResponseWriter, code, msg string) {
	writeJSON(w, status(code), api.Error{Error: api.ErrorBody{Code: code, Message: msg}})
}
