package hookbox_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/hookbox/hookbox"
)

func TestDistinctByKeys(t *testing.T) {
	h1, h2 := []byte("body-1"), []byte("body-2")
	ds := []hookbox.Delivery{
		{Source: "gh", DeliveryID: "a", BodySHA256: h1},
		{Source: "gh", DeliveryID: "b", BodySHA256: h1}, // same body, new id: repeat of 0
		{Source: "gh", DeliveryID: "b", BodySHA256: h2}, // id of 1: repeat of 0
		{Source: "gh", DeliveryID: "c"},                 // no body key
		{Source: "other", DeliveryID: "d", BodySHA256: h1},
		{Source: "gh", DeliveryID: "e", BodySHA256: h2}, // body of 2, which was a repeat of 0
		{Source: "gh", DeliveryID: "bad"},
	}
	distinct, first := hookbox.DistinctByKeys(ds, func(i int) bool { return ds[i].DeliveryID == "bad" })
	if want := []int{0, 3, 4}; !slices.Equal(distinct, want) {
		t.Errorf("distinct = %v, want %v", distinct, want)
	}
	if want := []int{0, 0, 0, 3, 4, 0, -1}; !slices.Equal(first, want) {
		t.Errorf("first = %v, want %v", first, want)
	}
	rs := make([]hookbox.Receipt, len(ds))
	rs[0], rs[3], rs[4] = hookbox.Receipt{ID: 10}, hookbox.Receipt{ID: 13}, hookbox.Receipt{ID: 14}
	hookbox.FillRepeats(rs, first)
	if rs[5] != (hookbox.Receipt{ID: 10, Duplicate: true}) || rs[6] != (hookbox.Receipt{}) {
		t.Errorf("receipts = %+v", rs)
	}
}

func TestBadDelivery(t *testing.T) {
	long := strings.Repeat("x", 6000)
	err := hookbox.CheckStorable(&hookbox.Delivery{DeliveryID: long})
	if err == nil || len(err.Error()) > 300 {
		t.Errorf("CheckStorable(6 KB id) = %v", err)
	}
	if err := hookbox.CheckStorable(&hookbox.Delivery{DeliveryID: "ok", EventType: "x\xff"}); err == nil {
		t.Error("invalid UTF-8 type accepted")
	}
}
