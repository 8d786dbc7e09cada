package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ferrymq/ferry/internal/auth"
)

// allowFlags collect repeated -allow PATTERNS:ACTIONS values.
type allowFlags []auth.FilePermission

// String shows the permissions collected.
func (a *allowFlags) String() string {
	var out []string
	for _, p := range *a {
		out = append(out, strings.Join(p.Queues, ",")+":"+strings.Join(p.Actions, ","))
	}
	return strings.Join(out, " ")
}

// Set parses one "orders.*,billing:send,receive" value.
func (a *allowFlags) Set(v string) error {
	queues, actions, ok := strings.Cut(v, ":")
	if !ok {
		return fmt.Errorf("want QUEUES:ACTIONS, e.g. 'orders.*,billing:send,receive'")
	}
	*a = append(*a, auth.FilePermission{Queues: splitList(queues), Actions: splitList(actions)})
	return nil
}

// runToken is `ferryd token`: it makes a new random secret and its tokens
// file entry. The entry is appended to -file (created when missing) or
// printed; the secret is written to -secret-file (mode 0600) or printed,
// once: the file keeps only its hash, so it cannot be shown again.
func runToken(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ferryd token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", "", "name of the token, unique in the file (required)")
	cluster := fs.String("cluster", "", "comma-separated cluster permissions: admin, metrics")
	var allow allowFlags
	fs.Var(&allow, "allow", "queue permission QUEUES:ACTIONS, e.g. 'orders.*,billing:send,receive' (repeatable; actions: send, receive, admin)")
	file := fs.String("file", "", "tokens file to append the entry to (created when missing); without it the entry is printed")
	secretFile := fs.String("secret-file", "", "write the secret to this file (mode 0600, must not exist) instead of printing it")
	withSQS := fs.Bool("sqs", false, "also make an SQS secret access key (stored as is in the file; the access key id is the token's name)")
	sqsEnvFile := fs.String("sqs-env-file", "", "with -sqs: write AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY to this file (mode 0600, must not exist) instead of printing the key")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: ferryd token -name NAME [-cluster admin,metrics] [-allow QUEUES:ACTIONS]... [-file FILE]\n\n"+
			"Makes a new client token: a random secret, shown once, and its entry for the tokens file\n"+
			"(-tokens of ferryd), which keeps only the secret's SHA-256. Send ferryd SIGHUP to reload the file.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &usageError{err}
	}
	if fs.NArg() > 0 {
		return &usageError{fmt.Errorf("token: unexpected argument %q (flags only)", fs.Arg(0))}
	}
	secret, err := auth.NewSecret()
	if err != nil {
		return err
	}
	entry := auth.FileToken{Name: *name, SHA256: auth.HashSecret(secret), Cluster: splitList(*cluster), Permissions: allow}
	if *withSQS {
		if entry.SQSSecretKey, err = auth.NewSecret(); err != nil {
			return err
		}
		if *sqsEnvFile == "" {
			fmt.Fprintf(stderr, "SQS access key id %q, secret access key %s (kept in the tokens file)\n", *name, entry.SQSSecretKey)
		} else if err := writeNew(*sqsEnvFile, "AWS_ACCESS_KEY_ID="+*name+"\nAWS_SECRET_ACCESS_KEY="+entry.SQSSecretKey+"\n"); err != nil {
			return fmt.Errorf("token: %w", err)
		}
	} else if *sqsEnvFile != "" {
		return &usageError{errors.New("token: -sqs-env-file needs -sqs")}
	}
	one, err := json.MarshalIndent(auth.File{Tokens: []auth.FileToken{entry}}, "", "  ")
	if err != nil {
		return err
	}
	if _, err := auth.Parse(one); err != nil {
		return &usageError{fmt.Errorf("token: %w", err)}
	}
	if *secretFile != "" {
		if err := writeNew(*secretFile, secret+"\n"); err != nil {
			return fmt.Errorf("token: %w", err)
		}
	}
	if *file != "" {
		if err := auth.AddToFile(*file, entry); err != nil {
			if *secretFile != "" {
				os.Remove(*secretFile)
			}
			return fmt.Errorf("token: %w", err)
		}
		fmt.Fprintf(stderr, "added token %q to %s\n", *name, *file)
	} else {
		e, _ := json.MarshalIndent(entry, "", "  ")
		fmt.Fprintf(stdout, "%s\n", e)
	}
	if *secretFile != "" {
		fmt.Fprintf(stderr, "secret written to %s\n", *secretFile)
	} else {
		fmt.Fprintf(stderr, "secret (shown once; the file keeps only its hash):\n")
		fmt.Fprintln(stdout, secret)
	}
	return nil
}

// writeNew creates path with mode 0600 and writes text; it fails when path
// exists.
func writeNew(path, text string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
