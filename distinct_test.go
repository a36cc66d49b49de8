package hookbox_test

import (
	"fmt"
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
}

// TestInsertInOrderRounds: which entries each round sends. A repeat of an
// entry stored new, or of a duplicate under the same body, is answered
// without being sent; a repeat of a duplicate under another body, a
// repeat by body only, and a repeat of a refused entry are sent in a
// later round, once every earlier entry that shares a key with them is
// settled. The stores' conformance tests check the outcomes against real
// databases.
func TestInsertInOrderRounds(t *testing.T) {
	x, y := []byte("body-x"), []byte("body-y")
	ds := []hookbox.Delivery{
		{Source: "gh", DeliveryID: "a", BodySHA256: x}, // new
		{Source: "gh", DeliveryID: "b", BodySHA256: y}, // a duplicate of a stored row
		{Source: "gh", DeliveryID: "a", BodySHA256: x}, // repeat of a new entry
		{Source: "gh", DeliveryID: "b", BodySHA256: y}, // repeat of a duplicate, same body
		{Source: "gh", DeliveryID: "b", BodySHA256: x}, // repeat of a duplicate, another body
		{Source: "gh", DeliveryID: "c", BodySHA256: x}, // body of 0 and of 4, which is not settled yet
		{Source: "gh", DeliveryID: "p"},                // refused
		{Source: "gh", DeliveryID: "p"},                // repeat of a refused entry
		{Source: "gh", DeliveryID: "q"},                // left out from the start
	}
	bad := map[int]bool{8: true}
	var sent [][]int
	rs := make([]hookbox.Receipt, len(ds))
	err := hookbox.InsertInOrder(ds, rs, func(i int) bool { return bad[i] }, func(idx []int) error {
		sent = append(sent, slices.Clone(idx))
		for _, i := range idx {
			switch i {
			case 1:
				rs[i] = hookbox.Receipt{ID: 99, Duplicate: true}
			case 5:
				rs[i] = hookbox.Receipt{ID: 100, Duplicate: true}
			case 6:
				bad[i] = true
			default:
				rs[i] = hookbox.Receipt{ID: int64(100 + i)}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := [][]int{{0, 1, 6}, {4, 7}, {5}}; !slices.EqualFunc(sent, want, slices.Equal) {
		t.Errorf("rounds sent %v, want %v", sent, want)
	}
	want := []hookbox.Receipt{
		{ID: 100}, {ID: 99, Duplicate: true}, {ID: 100, Duplicate: true}, {ID: 99, Duplicate: true},
		{ID: 104}, {ID: 100, Duplicate: true}, {}, {ID: 107}, {},
	}
	if !slices.Equal(rs, want) {
		t.Errorf("receipts = %+v, want %+v", rs, want)
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

// BenchmarkInsertInOrder is the bookkeeping of a batch on the ingest path,
// with an insert that stores every entry it is sent new: 64 distinct
// deliveries, and one delivery twice.
func BenchmarkInsertInOrder(b *testing.B) {
	distinct := make([]hookbox.Delivery, 64)
	for i := range distinct {
		distinct[i] = hookbox.Delivery{Source: "gh", DeliveryID: fmt.Sprint("d-", i), BodySHA256: []byte(fmt.Sprintf("%032d", i))}
	}
	twice := []hookbox.Delivery{distinct[0], distinct[0]}
	for name, ds := range map[string][]hookbox.Delivery{"distinct-64": distinct, "twice": twice} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				rs := make([]hookbox.Receipt, len(ds))
				err := hookbox.InsertInOrder(ds, rs, nil, func(idx []int) error {
					for _, i := range idx {
						rs[i] = hookbox.Receipt{ID: int64(i + 1)}
					}
					return nil
				})
				if err != nil || rs[len(rs)-1].ID == 0 {
					b.Fatal(rs, err)
				}
			}
		})
	}
}
