package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/ferrymq/ferry/client"
	"github.com/spf13/cobra"
)

// devToken is the admin token that `make run` writes; the CLI run from the
// checkout presents it when no other token is given.
const devToken = "data/pki/admin.token"

// tokenBytesMax bounds a token file read.
const tokenBytesMax = 4 << 10

// tokenFlags select the token the CLI presents.
type tokenFlags struct {
	token, file string
}

// register adds --token and --token-file, with their environment twins as
// defaults.
func (f *tokenFlags) register(cmd *cobra.Command) {
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.token, "token", os.Getenv("FERRY_TOKEN"),
		"client token to present (env FERRY_TOKEN; default: the first line of --token-file)")
	pf.StringVar(&f.file, "token-file", os.Getenv("FERRY_TOKEN_FILE"),
		"file holding the client token (env FERRY_TOKEN_FILE; default "+devToken+" when present)")
}

// secret returns the token to present: --token, else the first line of
// --token-file, else of devToken when it exists, else "" (no token).
func (f *tokenFlags) secret() (string, error) {
	if f.token != "" {
		if f.file != "" {
			return "", errors.New("--token and --token-file exclude each other")
		}
		return f.token, nil
	}
	path := f.file
	if path == "" {
		if _, err := os.Stat(devToken); err != nil {
			return "", nil
		}
		path = devToken
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	if len(data) > tokenBytesMax {
		return "", fmt.Errorf("--token-file %s: larger than %d bytes: not a token file", path, tokenBytesMax)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	if line = strings.TrimSpace(line); line == "" {
		return "", fmt.Errorf("--token-file %s: empty", path)
	}
	return line, nil
}

// tokenHint explains a refused connection in one line, or returns "" when
// err is something else.
func tokenHint(err error, given bool) string {
	if !errors.Is(err, client.ErrUnauthorized) {
		return ""
	}
	if !given {
		return "the cluster requires a token: give one with --token, --token-file, FERRY_TOKEN or FERRY_TOKEN_FILE (make run writes " + devToken + ")"
	}
	return "the cluster refused the token (" + shortCause(err) + "): check --token, --token-file, FERRY_TOKEN or FERRY_TOKEN_FILE"
}
