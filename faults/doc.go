// Package faults is hookbox's fault and abuse suite: it runs the real
// `hookbox` binary as a child process and breaks things around it, checking
// the promises of shared/PRODUCT.md from the outside, as a sender and a
// forward target see them.
//
//   - Crash loop: the server is SIGKILLed at random moments under load from
//     many connections (with redelivered ids) and restarted; afterwards
//     every delivery that got a 202 is stored once, done, and seen by the
//     forward target (duplicates at the target are allowed and counted).
//   - Database outage: PostgreSQL behind a TCP proxy that is cut, SQLite on
//     files that cannot be written (immutable, or a full file system): every
//     answer during the outage is 503 with Retry-After, ingest and draining
//     resume without a restart, nothing acknowledged is lost.
//   - Bad input: oversized, slow, malformed, forged, stale and replayed
//     deliveries and path tricks get their documented status and store
//     nothing.
//
// The non-test files are the driver: building the binary (Build), running
// it (Binary.Start, Process), a forward target that records Idempotency-Keys
// (Sink) and a TCP relay that can be cut (Proxy). RELIABILITY.md at the root
// of the repository says what is promised and where each promise is tested.
package faults
