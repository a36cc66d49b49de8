package hookbox

// DistinctByKeys is DistinctDeliveries for stores that dedupe by body too:
// an entry is a repeat of an earlier one with the same (Source, DeliveryID),
// or, when both set BodySHA256, the same (Source, BodySHA256). It returns
// the indexes of the first entry of each group, in order, and for every
// entry the index of the first entry of its group; entries where skip
// reports true are left out (they are in neither result; their first is
// -1). FillRepeats then copies the receipts of the first entries to the
// repeats.
func DistinctByKeys(ds []Delivery, skip func(i int) bool) (distinct []int, first []int) {
	type idKey struct{ source, id string }
	type bodyKey struct{ source, sum string }
	first = make([]int, len(ds))
	byID := make(map[idKey]int, len(ds))
	var byBody map[bodyKey]int
	distinct = make([]int, 0, len(ds))
	for i := range ds {
		if skip != nil && skip(i) {
			first[i] = -1
			continue
		}
		d := &ds[i]
		ik := idKey{d.Source, d.DeliveryID}
		bk := bodyKey{d.Source, string(d.BodySHA256)}
		j, ok := byID[ik]
		if !ok && d.BodySHA256 != nil {
			j, ok = byBody[bk]
		}
		if !ok {
			j = i
			distinct = append(distinct, i)
		}
		first[i] = j
		if _, seen := byID[ik]; !seen {
			byID[ik] = j
		}
		if d.BodySHA256 != nil {
			if byBody == nil {
				byBody = map[bodyKey]int{}
			}
			if _, seen := byBody[bk]; !seen {
				byBody[bk] = j
			}
		}
	}
	return distinct, first
}

// FillRepeats fills the receipt of every repeat from the receipt of the
// first entry of its group, marking it a duplicate; entries left out
// (first -1) keep their receipt.
func FillRepeats(rs []Receipt, first []int) {
	for i, j := range first {
		if j >= 0 && i != j {
			rs[i] = Receipt{ID: rs[j].ID, Duplicate: true}
		}
	}
}
