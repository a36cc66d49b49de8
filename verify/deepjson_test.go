package verify

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestDeepJSONCostsNoStack: the JSON scanner runs on bodies nobody has
// authenticated yet (mailgun's signature is inside the body, and a none
// source's id may be too), so what it spends must not grow faster than
// the body. It recursed once per level of nesting: a 20 KB body nested
// 9,990 deep grew the goroutine's stack to 512 KiB before the signature
// was looked at, 26 times the body, held until the collector shrank it.
// It now keeps a bit per open container, and a body nested that deep
// costs the goroutine no more stack than one nested ten deep, give or
// take a page.
func TestDeepJSONCostsNoStack(t *testing.T) {
	v, err := New(Config{Scheme: SchemeMailgun, Secrets: []string{"k"}, Tolerance: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	nested := func(depth int) []byte {
		return []byte(`{"event-data":` + strings.Repeat(`[{"a":`, depth/2) + "1" + strings.Repeat("}]", depth/2) + `}`)
	}
	shallow, deep := stackPerVerify(t, v, nested(10)), stackPerVerify(t, v, nested(9990))
	t.Logf("stack per goroutine: %d bytes for a body nested 10 deep, %d for one of %d bytes nested 9,990 deep", shallow, deep, len(nested(9990)))
	if deep > shallow+8<<10 {
		t.Errorf("a body nested 9,990 deep grew the verifying goroutine's stack by %d bytes more than one nested 10 deep, want at most 8 KiB more", deep-shallow)
	}
	// The deep body is valid JSON, so it is judged on its signature.
	if _, err := v.Verify(Request{Body: nested(9990)}); err != errMailgunNoSignature {
		t.Errorf("deep body: %v, want %v", err, errMailgunNoSignature)
	}
}

// stackPerVerify returns the stack in use per goroutine of goroutines
// parked after verifying body.
func stackPerVerify(t *testing.T, v Verifier, body []byte) int64 {
	t.Helper()
	const n = 64
	park, ready := make(chan struct{}), make(chan struct{}, n)
	defer close(park)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range n {
		go func() {
			v.Verify(Request{Body: body})
			ready <- struct{}{}
			<-park
		}()
	}
	for range n {
		<-ready
	}
	runtime.ReadMemStats(&after)
	return (int64(after.StackInuse) - int64(before.StackInuse)) / n
}
