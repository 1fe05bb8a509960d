// Package httpapi is the HTTP layer: router, middleware, problem+json and handlers. It
// only translates between HTTP and the container domain and store; every error it
// writes, whatever raised it, is an RFC 9457 problem in the shape DCM's providers share.
package httpapi
