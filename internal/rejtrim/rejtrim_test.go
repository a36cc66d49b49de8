package rejtrim

import (
	"slices"
	"testing"
)

// TestCuts: the rows beyond the bound come from the largest group, cut
// down towards the next, and the unknown names' group gives up a row
// before a configured source of its size.
func TestCuts(t *testing.T) {
	u := func(n int) Group { return Group{Unknown: true, Count: n} }
	s := func(name string, n int) Group { return Group{Source: name, Count: n} }
	for _, c := range []struct {
		name   string
		groups []Group
		max    int
		want   []int
	}{
		{"within the bound", []Group{u(50), s("a", 50)}, 100, []int{0, 0}},
		{"the flood gives up its own rows", []Group{s("stripe", 1), u(150)}, 100, []int{0, 51}},
		{"a noisy source does not evict another", []Group{s("a", 5), s("b", 100)}, 100, []int{0, 5}},
		{"down to the next group, then both", []Group{s("a", 60), s("b", 50), u(10)}, 100, []int{15, 5, 0}},
		{"an uneven split: unknown names give up the extra row", []Group{s("a", 51), u(51)}, 100, []int{1, 1}},
		{"an uneven split", []Group{s("a", 51), u(51)}, 101, []int{0, 1}},
		{"a lowered bound levels everyone", []Group{s("a", 30), s("b", 10), u(60)}, 9, []int{27, 7, 57}},
		{"a bound of zero", []Group{s("a", 3), u(2)}, 0, []int{3, 2}},
	} {
		got := Cuts(c.groups, c.max)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: Cuts(%+v, %d) = %v, want %v", c.name, c.groups, c.max, got, c.want)
		}
	}
}
