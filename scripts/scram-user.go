//go:build ignore

// scram-user creates or replaces a SCRAM user through a broker with
// AlterUserScramCredentials, as kafka-configs.sh --alter --add-config
// 'SCRAM-SHA-256=[password=...]' does:
//
//	go run scripts/scram-user.go -broker 127.0.0.1:9092 -user alice -password secret [-mechanism SCRAM-SHA-512]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	broker := flag.String("broker", "127.0.0.1:9092", "a PLAINTEXT listener of the cluster")
	user := flag.String("user", "", "user name")
	password := flag.String("password", "", "password")
	mechanism := flag.String("mechanism", "SCRAM-SHA-256", "SCRAM-SHA-256 or SCRAM-SHA-512")
	iterations := flag.Int("iterations", 8192, "PBKDF2 iterations (4096..16384)")
	flag.Parse()
	if *user == "" || *password == "" {
		fmt.Fprintln(os.Stderr, "scram-user: -user and -password are required")
		os.Exit(2)
	}
	mech := kadm.ScramSha256
	if *mechanism == "SCRAM-SHA-512" {
		mech = kadm.ScramSha512
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(*broker))
	if err != nil {
		fmt.Fprintln(os.Stderr, "scram-user:", err)
		os.Exit(1)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := kadm.NewClient(cl).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{
		User: *user, Mechanism: mech, Iterations: int32(*iterations), Password: *password,
	}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scram-user: creating", *user+":", err)
		os.Exit(1)
	}
	fmt.Printf("scram-user: %s has a %s credential\n", *user, *mechanism)
}
