package v1

import "net/http"

// ErrorCode is the machine-readable kind of an API error: the "code" of
// Error. It is an error itself, so that an error carrying one can wrap it:
// the Go client's errors match errors.Is(err, v1.CodeNotFound).
//
// The server writes only the codes declared here (a test in
// internal/archtest fails on a code written as a string literal).
type ErrorCode string

// The error codes, each with the HTTP status the server answers it with.
const (
	// CodeInvalidArgument: the request is malformed or names something
	// invalid (400).
	CodeInvalidArgument ErrorCode = "invalid_argument"
	// CodeUnauthenticated: the request carries no credential, or one the
	// server does not take (401).
	CodeUnauthenticated ErrorCode = "unauthenticated"
	// CodePermissionDenied: the identity lacks the permission (403).
	CodePermissionDenied ErrorCode = "permission_denied"
	// CodeNotFound: what the request names does not exist (404).
	CodeNotFound ErrorCode = "not_found"
	// CodeFailedPrecondition: the request is valid but the state does not
	// allow it now (409).
	CodeFailedPrecondition ErrorCode = "failed_precondition"
	// CodeConflict: the request lost a race with another change (409).
	CodeConflict ErrorCode = "conflict"
	// CodeAlreadyExists: what the request creates exists already (409).
	CodeAlreadyExists ErrorCode = "already_exists"
	// CodeExpired: a sign-in, a device code or a token has expired (410).
	CodeExpired ErrorCode = "expired"
	// CodeTooLarge: the request body is larger than the server takes (413).
	CodeTooLarge ErrorCode = "too_large"
	// CodeUnsupportedMediaType: a change not sent as application/json (415).
	CodeUnsupportedMediaType ErrorCode = "unsupported_media_type"
	// CodeResourceExhausted: a rate or a limit of the caller is reached;
	// try again later (429).
	CodeResourceExhausted ErrorCode = "resource_exhausted"
	// CodeInternal: the server failed (500).
	CodeInternal ErrorCode = "internal"
	// CodeUnavailable: something the server needs (its store, an identity
	// provider) did not answer; try again (503).
	CodeUnavailable ErrorCode = "unavailable"
)

// ErrorCodes lists every declared code.
func ErrorCodes() []ErrorCode {
	return []ErrorCode{
		CodeInvalidArgument, CodeUnauthenticated, CodePermissionDenied, CodeNotFound,
		CodeFailedPrecondition, CodeConflict, CodeAlreadyExists, CodeExpired, CodeTooLarge,
		CodeUnsupportedMediaType, CodeResourceExhausted, CodeInternal, CodeUnavailable,
	}
}

// Error returns the code itself.
func (c ErrorCode) Error() string { return string(c) }

// HTTPStatus is the status the server answers the code with; an unknown
// code is a 500.
func (c ErrorCode) HTTPStatus() int {
	switch c {
	case CodeInvalidArgument:
		return http.StatusBadRequest
	case CodeUnauthenticated:
		return http.StatusUnauthorized
	case CodePermissionDenied:
		return http.StatusForbidden
	case CodeNotFound:
		return http.StatusNotFound
	case CodeFailedPrecondition, CodeConflict, CodeAlreadyExists:
		return http.StatusConflict
	case CodeExpired:
		return http.StatusGone
	case CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case CodeUnsupportedMediaType:
		return http.StatusUnsupportedMediaType
	case CodeResourceExhausted:
		return http.StatusTooManyRequests
	case CodeUnavailable:
		return http.StatusServiceUnavailable
	case CodeInternal:
	}
	return http.StatusInternalServerError
}
