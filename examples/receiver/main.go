// Command receiver stands in for your app in the README's quickstart: it
// listens on 127.0.0.1:3000, prints each delivery hookbox forwards to it
// (the headers hookbox adds and the body as received) and answers 204, so
// hookbox marks the event done.
//
//	go run ./examples/receiver
//	go run ./examples/receiver -listen 127.0.0.1:3001 -status 503   # a failing app: hookbox retries
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strconv"
	"strings"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:3000", "address to listen on")
	status := flag.Int("status", http.StatusNoContent, "status to answer every delivery with")
	flag.Parse()
	log.Printf("receiver: listening on http://%s, answering %d", *listen, *status)
	log.Fatal(http.ListenAndServe(*listen, handler(func(s string) { fmt.Fprint(os.Stdout, s) }, *status)))
}

// shown is how much of a body the receiver prints.
const shown = 4096

// handler hands a description of each POST to print and answers status.
// The body is read whole (a sender's body may be large) and its first
// shown bytes printed; it and the path are a stranger's text bound for a
// terminal, printed without their control characters (printable).
func handler(print func(string), status int) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(rw, "POST only", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, shown))
		if err != nil {
			http.Error(rw, "read body", http.StatusBadRequest)
			return
		}
		rest, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			http.Error(rw, "read body", http.StatusBadRequest)
			return
		}
		text := printable(string(body))
		if rest > 0 {
			text += fmt.Sprintf("\n… (%d bytes in all; the first %d shown)", int64(len(body))+rest, len(body))
		}
		print(fmt.Sprintf("POST %s  event %s, attempt %s, Idempotency-Key %s\n%s\n\n", printable(r.URL.Path),
			printable(r.Header.Get("Hookbox-Event-Id")), printable(r.Header.Get("Hookbox-Attempt")), strconv.Quote(r.Header.Get("Idempotency-Key")), text))
		rw.WriteHeader(status)
	})
}

// printable returns s with its control characters other than newline and
// tab as U+FFFD: text from a request, bound for a terminal.
func printable(s string) string {
	return strings.Map(func(c rune) rune {
		if c == '\n' || c == '\t' || (c >= ' ' && c != 0x7f && !(c >= 0x80 && c < 0xa0)) {
			return c
		}
		return '\uFFFD'
	}, s)
}
