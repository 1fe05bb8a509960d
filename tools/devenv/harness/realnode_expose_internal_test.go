package harness

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// The pods' only route is the service range, via the gateway: no default route.
func TestCNIConflistRoutesOnlyTheServiceRange(t *testing.T) {
	var conf struct {
		Plugins []struct {
			IPMasq bool `json:"ipMasq"`
			IPAM   struct {
				Routes []map[string]string `json:"routes"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal([]byte(cniConflist()), &conf); err != nil {
		t.Fatalf("cniConflist is not JSON: %v\n%s", err, cniConflist())
	}
	if len(conf.Plugins) != 1 || conf.Plugins[0].IPMasq {
		t.Fatalf("want one bridge plugin without ipMasq: %+v", conf.Plugins)
	}
	want := []map[string]string{{"dst": "10.96.0.0/16"}}
	if got := conf.Plugins[0].IPAM.Routes; len(got) != 1 || got[0]["dst"] != want[0]["dst"] || len(got[0]) != 1 {
		t.Errorf("routes %v, want %v (the gateway is implied)", got, want)
	}
}

func TestPodNetworkRules(t *testing.T) {
	cases := []struct {
		name string
		got  []string
		want string
	}{
		{"expose", exposeRule(4222), "-d 10.88.0.1/32 -p tcp --dport 4222 -j DNAT --to-destination 127.0.0.1:4222"},
		{"prerouting", podNetworkJumps[0], "nat PREROUTING -i cni0 -j SP-HARNESS-EXPOSE"},
		{"input", podNetworkJumps[1], "filter INPUT -i cni0 -j SP-HARNESS-EXPOSE"},
		{"forward", podNetworkJumps[2], "filter FORWARD -i cni0 ! -o cni0 -j SP-HARNESS-NOFORWARD"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := strings.Join(c.got, " "); got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}
	// Every jump goes to one of the chains the clean-up removes.
	for _, j := range podNetworkJumps {
		target := j[len(j)-1]
		if !slices.Contains(podNetworkChains, [2]string{j[0], target}) {
			t.Errorf("jump %v to a chain the clean-up does not know", j)
		}
	}
}
