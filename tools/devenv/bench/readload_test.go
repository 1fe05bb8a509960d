package bench

import (
	"math"
	"testing"
)

// A page is counted in the GETs timed between pages, so a machine that runs slower
// at one size than at the other moves both alike and leaves the ratio.
func TestPageRatio(t *testing.T) {
	for _, tc := range []struct {
		name                                 string
		smallPage, smallGet, bigPage, bigGet float64
		want                                 float64
	}{
		{"same machine, same cost", 1, 0.2, 1, 0.2, 1},
		{"same machine, page 1.5 × dearer", 1, 0.2, 1.5, 0.2, 1.5},
		{"machine twice as slow at the big size", 0.5, 0.1, 1, 0.2, 1},
		{"machine twice as slow and page 1.2 × dearer", 0.5, 0.1, 1.2, 0.2, 1.2},
		{"small size not measured", 0, 0, 1, 0.2, 0},
		{"no GET between pages at the big size", 1, 0.2, 1, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := PageRatio(Dist{P50: tc.smallPage}, Dist{P50: tc.smallGet}, Dist{P50: tc.bigPage}, Dist{P50: tc.bigGet})
			if math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("PageRatio = %v, want %v", got, tc.want)
			}
		})
	}
}
