package hookbox

// DistinctDeliveries groups a batch by (Source, DeliveryID) for a Store's
// Ingest. It returns the indexes of the first entry of each key, in order, and
// for every entry the index of the first entry with its key. A store inserts
// only the distinct entries and then calls CopyRepeats, so two copies of one
// delivery inside one batch yield one row: the first new, the rest duplicates.
func DistinctDeliveries(ds []Delivery) (distinct []int, first []int) {
	type key struct{ source, id string }
	first = make([]int, len(ds))
	seen := make(map[key]int, len(ds))
	distinct = make([]int, 0, len(ds))
	for i := range ds {
		k := key{ds[i].Source, ds[i].DeliveryID}
		if j, ok := seen[k]; ok {
			first[i] = j
			continue
		}
		seen[k] = i
		first[i] = i
		distinct = append(distinct, i)
	}
	return distinct, first
}

// CopyRepeats fills the receipt of every repeated entry from the receipt of
// the first entry with its key, marking it a duplicate.
func CopyRepeats(rs []Receipt, first []int) {
	for i, j := range first {
		if i != j {
			rs[i] = Receipt{ID: rs[j].ID, Duplicate: true}
		}
	}
}
