// Package layers holds the test that keeps kbroker's package dependencies
// pointing one way (see layers_test.go and the README's layout table). It
// has no code of its own.
package layers
