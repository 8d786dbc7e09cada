//go:build !unix

package main

// fileLimit is 0: the descriptor limit is not known here.
func fileLimit() int { return 0 }
