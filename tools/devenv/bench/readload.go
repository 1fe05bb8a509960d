package bench

import (
	"encoding/json"
	"net/url"
	"sync/atomic"
	"time"
)

// ReadLoad is what the read load measured: make bench's (Reads) and the capacity
// model's (tools/devenv/model) are the same load, and both results embed it.
type ReadLoad struct {
	Get        Dist `json:"get"`
	ListStart  Dist `json:"list_page_start"`
	ListMiddle Dist `json:"list_page_middle"`
	ListEnd    Dist `json:"list_page_end"`
	// ListPage is every page of the walks; ListGet, the GET of one container timed right
	// after each page, a yardstick of the machine's speed at that moment.
	ListPage      Dist `json:"list_page"`
	ListGet       Dist `json:"list_get_between_pages"`
	Walks         int  `json:"walks"`
	ListedPerWalk int  `json:"listed_per_walk"`
	// RPS: GETs answered per second from 8 clients; ClientsErr, the first error one of
	// them met (it stopped that client).
	RPS        float64 `json:"get_rps_8_clients"`
	ClientsErr error   `json:"-"`
}

// minPages is how many LIST pages MeasureReads times at least, at any size.
const minPages = 200

// MeasureReads puts the read load on the service through get (one GET of path: how
// long it took, the body, and an error for anything but 200): 2,000 GETs of anyID() one
// after the other; at least walks full walks of the LIST in pages of 50 with the API's
// page token, and more until minPages pages are timed, each page followed by a GET of
// anyID() (the start, middle and end being a tenth of the pages each); then 5 s of GETs
// of anyID() from 8 clients. An error of the first two parts ends it.
func MeasureReads(get func(path string) (time.Duration, []byte, error), anyID func() string, walks int) (ReadLoad, error) {
	var res ReadLoad
	var gets []time.Duration
	for range 2000 {
		d, _, err := get("/api/v1alpha1/containers/" + anyID())
		if err != nil {
			return res, err
		}
		gets = append(gets, d)
	}
	res.Get = summarize(gets)

	var startP, midP, endP, allP, afterP []time.Duration
	for res.Walks < walks || len(allP) < minPages {
		var pages []time.Duration
		token, listed := "", 0
		for {
			path := "/api/v1alpha1/containers?max_page_size=50"
			if token != "" {
				path += "&page_token=" + url.QueryEscape(token)
			}
			d, b, err := get(path)
			if err != nil {
				return res, err
			}
			pages = append(pages, d)
			n, next, err := decodePage(b)
			if err != nil {
				return res, err
			}
			g, _, err := get("/api/v1alpha1/containers/" + anyID())
			if err != nil {
				return res, err
			}
			afterP = append(afterP, g)
			listed += n
			if token = next; token == "" {
				break
			}
		}
		res.Walks++
		res.ListedPerWalk = listed
		allP = append(allP, pages...)
		k := max(1, len(pages)/10)
		startP = append(startP, pages[:k]...)
		midP = append(midP, pages[len(pages)/2-k/2:len(pages)/2-k/2+k]...)
		endP = append(endP, pages[len(pages)-k:]...)
	}
	res.ListStart, res.ListMiddle, res.ListEnd = summarize(startP), summarize(midP), summarize(endP)
	res.ListPage, res.ListGet = summarize(allP), summarize(afterP)

	var done atomic.Int64
	deadline := time.Now().Add(5 * time.Second)
	res.ClientsErr = parallel(8, 0, 8, func(int) error {
		for time.Now().Before(deadline) {
			if _, _, err := get("/api/v1alpha1/containers/" + anyID()); err != nil {
				return err
			}
			done.Add(1)
		}
		return nil
	})
	res.RPS = float64(done.Load()) / 5
	return res, nil
}

// decodePage reads a LIST answer: how many containers it holds and the next page's
// token ("" on the last page).
func decodePage(b []byte) (n int, next string, err error) {
	// Empty structs: the decoder checks each container's JSON but keeps none of it, so
	// the client's own garbage does not slow the pages it times.
	var page struct {
		Containers    []struct{} `json:"containers"`
		NextPageToken string     `json:"next_page_token"`
	}
	if err := json.Unmarshal(b, &page); err != nil {
		return 0, "", err
	}
	return len(page.Containers), page.NextPageToken, nil
}

// PageRatio is how much more a LIST page costs at a big size than at a small one, with
// the machine's speed at each time taken out: a page's p50 is counted in GETs of one
// container timed between the pages, which do the same work at any size. It is 0 when
// a size was not measured.
func PageRatio(smallPage, smallGet, bigPage, bigGet Dist) float64 {
	if smallPage.P50 <= 0 || smallGet.P50 <= 0 || bigGet.P50 <= 0 {
		return 0
	}
	return (bigPage.P50 / bigGet.P50) / (smallPage.P50 / smallGet.P50)
}
