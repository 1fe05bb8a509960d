package app_test

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"testing"

	"github.com/dcm-project/k8s-container-sp/tools/devenv/harness/testenv"
)

// Walking the list in pages returns every container that exists for the whole walk
// exactly once, even while others are created and deleted between pages.
func TestListPagingUnderChurn(t *testing.T) {
	ns := testenv.Namespace(t)
	p := startProvider(t, ns)
	p.waitSynced(t)
	create := func(id string) {
		t.Helper()
		if r := do(t, http.MethodPost, p.URL+containers+"?id="+id, spec("c", "nginx")); r.Status != 201 {
			t.Fatalf("create %s: %d %s", id, r.Status, r.Body)
		}
	}
	stable := map[string]bool{}
	for i := range 30 {
		id := fmt.Sprintf("s%02d", i)
		create(id)
		stable[id] = true
	}
	// Churn: ids that sort before, between and after the stable ones.
	for _, id := range []string{"a-early", "s05x", "s15x", "z-late"} {
		create(id)
	}

	seen := map[string]int{}
	token, pages := "", 0
	for {
		u := p.URL + containers + "?max_page_size=7"
		if token != "" {
			u += "&page_token=" + url.QueryEscape(token)
		}
		r := do(t, http.MethodGet, u, nil)
		if r.Status != 200 {
			t.Fatalf("page %d: %d %s", pages, r.Status, r.Body)
		}
		items := r.JSON["containers"].([]any)
		if len(items) > 7 {
			t.Fatalf("page of %d > max_page_size", len(items))
		}
		for _, it := range items {
			m := it.(map[string]any)
			seen[m["id"].(string)]++
			if m["status"] == nil || m["spec"] == nil || m["create_time"] == nil {
				t.Errorf("list item not fully populated: %v", m)
			}
		}
		pages++
		// Between pages: delete churn containers, create new ones on every side.
		switch pages {
		case 1:
			do(t, http.MethodDelete, p.URL+containers+"/s05x", nil)
			create("a-new")
			create("s07x")
		case 2:
			do(t, http.MethodDelete, p.URL+containers+"/z-late", nil)
			create("s20x")
			create("zz-new")
		case 3:
			do(t, http.MethodDelete, p.URL+containers+"/s25", nil) // a "stable" one that stops existing
			delete(stable, "s25")
		}
		next, _ := r.JSON["next_page_token"].(string)
		if next == "" {
			break
		}
		token = next
	}
	var missing, twice []string
	for id := range stable {
		if seen[id] != 1 {
			missing = append(missing, fmt.Sprintf("%s×%d", id, seen[id]))
		}
	}
	for id, n := range seen {
		if n > 1 {
			twice = append(twice, id)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 || len(twice) > 0 {
		t.Errorf("stable containers not seen exactly once: %v; seen twice: %v", missing, twice)
	}
	if pages < 5 {
		t.Errorf("only %d pages for 30+ containers at 7 per page", pages)
	}
}
