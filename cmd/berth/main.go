// Command berth is a durable, Kafka-compatible message broker.
package main

import (
	"os"

	"github.com/berthmq/berth/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:]))
}
