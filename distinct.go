package hookbox

import "bytes"

// DistinctByKeys is DistinctDeliveries for stores that dedupe by body too:
// an entry is a repeat of an earlier one with the same (Source, DeliveryID),
// or, when both set BodySHA256, the same (Source, BodySHA256). It returns
// the indexes of the first entry of each group, in order, and for every
// entry the index of the first entry of its group; entries where skip
// reports true are left out (they are in neither result; their first is
// -1).
//
// The groups chain: an entry that shares its id with one entry and its
// body with another joins the group of the earlier, and files both its
// keys under it. So no two first entries share a key, and they can be
// inserted in one statement whatever order it takes them in; but a repeat
// need not share a key with the first entry of its group, and its outcome
// is not always that entry's (see InsertInOrder).
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

// InsertInOrder stores the entries of ds that skip does not leave out, for
// a store that dedupes by id and by body (see DistinctByKeys), with the
// outcome of storing them one at a time in the order of ds: the same rows
// stored and the same receipts, however the deliveries were batched.
//
// It stores them in rounds. Each round, insert is given the entries that
// share no key with an earlier entry still to be stored (so no two of
// them share a key either); it stores them in one go and fills their
// receipts, new or the duplicate of the stored row with the entry's
// delivery id, else of the row with its body. insert may refuse an entry
// instead (its receipt left empty) if skip reports true for it from then
// on. An entry whose nearest earlier entry with the same delivery id was
// stored new, or was a duplicate with the same body key, has that entry's
// row as its own answer, and is filled without being sent: so two copies
// of one delivery in one batch take one round. The others (a repeat of a
// duplicate under another body, or of another entry's body only) go to a
// later round, where the store's constraints decide: the first entry of
// a delivery's id may have been a duplicate of a stored row by its body,
// leaving its id free, and storing a repeat under another body new.
//
// Each round stores or refuses at least one entry, so there are at most
// as many rounds as entries; a batch with no repeats takes one.
func InsertInOrder(ds []Delivery, rs []Receipt, skip func(i int) bool, insert func(idx []int) error) error {
	out := func(i int) bool { return skip != nil && skip(i) }
	distinct, _ := DistinctByKeys(ds, out)
	if err := insert(distinct); err != nil {
		return err
	}
	if len(distinct) == len(ds) {
		return nil // no repeats, nothing refused before: the common case
	}
	// sameID[i] is the nearest earlier entry with the delivery id of i,
	// or -1.
	type idKey struct{ source, id string }
	sameID := make([]int, len(ds))
	last := make(map[idKey]int, len(ds))
	for i := range ds {
		k := idKey{ds[i].Source, ds[i].DeliveryID}
		j, ok := last[k]
		if !ok {
			j = -1
		}
		sameID[i], last[k] = j, i
	}
	done := make([]bool, len(ds))
	for {
		for _, i := range distinct {
			done[i] = !out(i)
		}
		waiting := 0
		for i := range ds {
			if done[i] || out(i) {
				continue
			}
			p := sameID[i]
			for p >= 0 && out(p) {
				p = sameID[p] // refused: as if it had never come
			}
			if p >= 0 && done[p] && (!rs[p].Duplicate || bytes.Equal(ds[p].BodySHA256, ds[i].BodySHA256)) {
				rs[i] = Receipt{ID: rs[p].ID, Duplicate: true}
				done[i] = true
				continue
			}
			waiting++
		}
		if waiting == 0 {
			return nil
		}
		distinct, _ = DistinctByKeys(ds, func(i int) bool { return done[i] || out(i) })
		if err := insert(distinct); err != nil {
			return err
		}
	}
}
