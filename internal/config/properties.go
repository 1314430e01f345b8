package config

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// Property is one key=value entry of a Java properties file and the line
// it starts on.
type Property struct {
	Key, Value string
	Line       int
}

// ReadProperties reads a Java properties file as Kafka's tools write
// them: key=value lines, # and ! comments, and a trailing backslash
// continuing a value on the next line (Kafka's multi-line JAAS examples).
// Broker files (LoadFile) and the client commands' --command-config both
// read through it.
func ReadProperties(path string) ([]Property, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Property
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		start := line
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' || s[0] == '!' {
			continue
		}
		for continued(s) && sc.Scan() {
			line++
			s = s[:len(s)-1] + strings.TrimSpace(sc.Text())
		}
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return out, fmt.Errorf("%s:%d: expected key=value", path, start)
		}
		out = append(out, Property{Key: strings.TrimSpace(k), Value: strings.TrimSpace(v), Line: start})
	}
	return out, sc.Err()
}

// continued reports whether a properties line ends with an odd number of
// backslashes: it goes on on the next line (Kafka's multi-line
// sasl.jaas.config values are written so).
func continued(s string) bool {
	n := 0
	for i := len(s) - 1; i >= 0 && s[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}
