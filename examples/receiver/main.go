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
)

func main() {
	listen := flag.String("listen", "127.0.0.1:3000", "address to listen on")
	status := flag.Int("status", http.StatusNoContent, "status to answer every delivery with")
	flag.Parse()
	log.Printf("receiver: listening on http://%s, answering %d", *listen, *status)
	log.Fatal(http.ListenAndServe(*listen, handler(func(s string) { fmt.Fprint(os.Stdout, s) }, *status)))
}

// handler hands a description of each POST to print and answers status.
func handler(print func(string), status int) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(rw, "POST only", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(rw, "read body", http.StatusBadRequest)
			return
		}
		print(fmt.Sprintf("POST %s  event %s, attempt %s, Idempotency-Key %s\n%s\n\n", r.URL.Path,
			r.Header.Get("Hookbox-Event-Id"), r.Header.Get("Hookbox-Attempt"), strconv.Quote(r.Header.Get("Idempotency-Key")), body))
		rw.WriteHeader(status)
	})
}
