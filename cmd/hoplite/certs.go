package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/hoplite-go/hoplite/cluster"
)

const certsUsage = `usage: hoplite certs --dir DIR --hosts HOST,... [--name NAME]

Makes a test cluster's certificates for mutual TLS in DIR: a new CA
(ca.pem, ca-key.pem) and a member certificate it signs (member.pem,
member-key.pem), ECDSA P-256, valid for a year, with SANs for the hosts
(IP addresses and names). Every member and client of the cluster then runs
with --tls-cert DIR/member.pem --tls-key DIR/member-key.pem --tls-ca DIR/ca.pem.
Keep ca-key.pem away from the members.

With --name, the CA already in DIR signs another certificate,
NAME.pem and NAME-key.pem, for the hosts: a member or client of its own,
which the limits per source and certificate tell apart from the others.

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
	name := fs.String("name", "", "sign NAME.pem and NAME-key.pem with the CA already in -dir, instead of making a new CA")
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
	if *name != "" {
		if strings.ContainsAny(*name, `/\`) || *name == "ca" || *name == "." || *name == ".." {
			return usageError{fmt.Sprintf("--name %q must be a plain file name other than ca", *name)}
		}
		cert, key, err := cluster.IssueCert(*dir, *name, hs)
		if err != nil {
			return errors.New(strings.TrimPrefix(err.Error(), "certs: "))
		}
		ca := filepath.Join(*dir, "ca.pem")
		fmt.Fprintf(stdout, "certificate %s (hosts %s), signed by %s\nkey %s\nrun with: --tls-cert %s --tls-key %s --tls-ca %s\n",
			cert, strings.Join(hs, ","), ca, key, shellQuote(cert), shellQuote(key), shellQuote(ca))
		return nil
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
