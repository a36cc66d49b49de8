// Package rejtrim decides which rows of the rejected-deliveries log a write
// trims once the log holds more than its count bound, for the stores'
// AddRejections: always the oldest rows of the largest group, where a
// group is each configured source's rows, and the rows of every name no
// source has, together. A sender that floods the log (guessing names, or
// sending bad signatures to one source) so gives up its own rows, and the
// other groups keep theirs while they are smaller.
package rejtrim

import "slices"

// Group is one group of the log and how many rows it holds.
type Group struct {
	// Unknown marks the group of every name no source has (Source is
	// then empty).
	Unknown bool
	Source  string
	Count   int
}

// Cuts returns how many of its oldest rows each group of groups gives up
// (by index) so that they hold maxCount rows in all: the largest groups
// are cut down to one level, which no group below it reaches, so that
// every group cut holds as many rows as the others cut, or one more.
// Where the rows to give up do not divide evenly, configured sources keep
// the extra row before the unknown names' group does. Nothing is cut
// while the groups hold maxCount rows or fewer.
func Cuts(groups []Group, maxCount int) []int {
	cuts := make([]int, len(groups))
	total := 0
	for _, g := range groups {
		total += g.Count
	}
	excess := total - max(maxCount, 0)
	if excess <= 0 {
		return cuts
	}
	// Largest first; among equals, the unknown names' group first, so
	// that it is the one left with fewer rows.
	order := make([]int, len(groups))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ga, gb := groups[a], groups[b]
		if ga.Count != gb.Count {
			return gb.Count - ga.Count
		}
		switch {
		case ga.Unknown && !gb.Unknown:
			return -1
		case gb.Unknown && !ga.Unknown:
			return 1
		}
		return 0
	})
	top := 0 // rows of the first n groups in order
	for n := 1; n <= len(order); n++ {
		top += groups[order[n-1]].Count
		next := 0
		if n < len(order) {
			next = groups[order[n]].Count
		}
		if top-n*next < excess {
			continue // cutting the first n down to the next leaves too many
		}
		// The first n groups are cut to level, and spare of them keep one
		// more row: n*level + spare == top - excess.
		level := (top - excess) / n
		spare := top - excess - n*level
		for k := 0; k < n; k++ {
			keep := level
			if k >= n-spare {
				keep++ // the last in order: configured sources before unknown names
			}
			cuts[order[k]] = groups[order[k]].Count - keep
		}
		return cuts
	}
	return cuts // not reached: with n = len(groups), next is 0 and top-n*0 == total >= excess
}
