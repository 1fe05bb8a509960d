// Package config reads the provider's settings from the environment, with the names DCM
// deployments already use (drop-in for the reference provider), and validates them at
// start-up so a mistake stops the process with a clear message instead of failing later.
package config
