package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/hoplite-go/hoplite/cluster"
)

const certsUsage = `usage: hoplite certs --dir DIR --hosts HOST,...

Makes a test cluster's certificates for mutual TLS in DIR: a new CA
(ca.pem, ca-key.pem) and a member certificate it signs (member.pem,
member-key.pem), ECDSA P-256, valid for a year, with SANs for the hosts
(IP addresses and names). Every member and client of the cluster then runs
with --tls-cert DIR/member.pem --tls-key DIR/member-key.pem --tls-ca DIR/ca.pem.
Keep ca-key.pem away from the members.

flags:
`

func certsCommand(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("certs", flag.ContinueOnError)
	fs.SetOutput(flagOutput(stderr, "certs"))
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), certsUsage)
		fs.PrintDefaults()
	}
	dir := fs.String("dir", "", "directory to write the certificates to (created if missing)")
	hosts := fs.String("hosts", "127.0.0.1", "comma-separated hosts and IPs the members run on (the certificate's SANs)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected arguments %q", fs.Args())}
	}
	if *dir == "" {
		return usageError{"-dir is required"}
	}
	var hs []string
	for _, h := range strings.Split(*hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hs = append(hs, h)
		}
	}
	if len(hs) == 0 {
		return usageError{fmt.Sprintf("--hosts %q names no host", *hosts)}
	}
	ca, cert, key, err := cluster.GenerateCerts(*dir, hs)
	if err != nil {
		// The package's errors name it; the command's prefix says
		// "hoplite certs" already.
		return errors.New(strings.TrimPrefix(err.Error(), "certs: "))
	}
	// The flags as a shell takes them, so that the line can be pasted.
	fmt.Fprintf(stdout, "CA %s\nmember certificate %s (hosts %s)\nkey %s\nrun members with: --tls-cert %s --tls-key %s --tls-ca %s\n",
		ca, cert, strings.Join(hs, ","), key, shellQuote(cert), shellQuote(key), shellQuote(ca))
	return nil
}
