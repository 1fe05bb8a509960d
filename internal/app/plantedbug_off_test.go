//go:build !chaosbug

package app

const planted = false
