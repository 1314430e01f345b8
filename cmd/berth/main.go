// Command berth is a Kafka-compatible message broker with work queues.
package main

import (
	"os"

	"github.com/berthmq/berth/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:]))
}
