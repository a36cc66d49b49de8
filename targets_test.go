package hookbox

import "testing"

func TestSummaryStatus(t *testing.T) {
	for _, c := range []struct {
		in   []Status
		want Status
	}{
		{nil, StatusStored},
		{[]Status{StatusDone, StatusDone}, StatusDone},
		{[]Status{StatusDone, StatusDead}, StatusDead},
		{[]Status{StatusDead, StatusPending}, StatusPending},
		{[]Status{StatusPending, StatusProcessing, StatusDead}, StatusProcessing},
	} {
		if got := SummaryStatus(c.in); got != c.want {
			t.Errorf("SummaryStatus(%v) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestQueueName(t *testing.T) {
	if n := QueueName("shop", ""); n != "shop" {
		t.Errorf("QueueName without target = %q", n)
	}
	n := QueueName("shop", "billing")
	if src, tgt := SplitQueueName(n); n != "shop/billing" || src != "shop" || tgt != "billing" {
		t.Errorf("QueueName/SplitQueueName: %q → %q %q", n, src, tgt)
	}
	ev := Event{Source: n}
	if ev.SourceName() != "shop" {
		t.Errorf("SourceName = %q", ev.SourceName())
	}
}
