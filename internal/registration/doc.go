// Package registration registers the provider with the DCM registry, with the registry's
// own Go client: in the background once our HTTP server answers, retrying what can
// succeed later, and again periodically so a registry that lost its data learns us again.
// The provider never exits because of the registry.
package registration
