package balance

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

const goodConfig = `vip = "203.0.113.10"
port = 51820
server_id_bits = 4

[[servers]]
id = 2
address = "10.1.0.12"
control = "http://10.1.0.12:9100"

[[servers]]
id = 1
address = "10.1.0.11"
control = "http://10.1.0.11:9100"
`

func TestParseDefaults(t *testing.T) {
	c, err := Parse("bal.toml", []byte(goodConfig))
	if err != nil {
		t.Fatal(err)
	}
	if c.VIP.String() != "203.0.113.10" || c.Port != 51820 || c.ServerIDBits != 4 {
		t.Errorf("service: %v:%d bits %d", c.VIP, c.Port, c.ServerIDBits)
	}
	if len(c.Servers) != 2 || c.Servers[0].ID != 1 || c.Servers[1].Address.String() != "10.1.0.12" || c.Servers[0].Control.Host != "10.1.0.11:9100" {
		t.Errorf("servers (sorted by id): %+v", c.Servers)
	}
	for _, d := range []struct {
		name      string
		got, want any
	}{
		{"health_interval", c.HealthInterval, DefaultHealthInterval},
		{"health_timeout", c.HealthTimeout, DefaultHealthTimeout},
		{"failures", c.Failures, DefaultFailures},
		{"rises", c.Rises, DefaultRises},
		{"route_poll", c.RoutePoll, DefaultRoutePoll},
		{"mark_base", c.MarkBase, uint32(DefaultMarkBase)},
		{"table_base", c.TableBase, DefaultTableBase},
		{"rule_priority", c.RulePriority, DefaultRulePriority},
		{"route_table", c.RouteTable, DefaultRouteTable},
		{"nft_table", c.NftTable, DefaultNftTable},
	} {
		if d.got != d.want {
			t.Errorf("%s = %v, want the default %v", d.name, d.got, d.want)
		}
	}
	if _, err := Parse("bal.toml", []byte(goodConfig+"\nhealth_interval = \"200ms\"\n")); err == nil {
		t.Fatal("a key after [[servers]] belongs to the last server: want an unknown-key error")
	}
	c, err = Parse("bal.toml", []byte("health_interval = \"200ms\"\nfailures = 5\n"+goodConfig))
	if err != nil {
		t.Fatal(err)
	}
	if c.HealthInterval != 200*time.Millisecond || c.Failures != 5 {
		t.Errorf("overrides: %v, %d", c.HealthInterval, c.Failures)
	}
}

// Every error names the file, the key and the problem.
func TestParseErrors(t *testing.T) {
	base := strings.Replace(goodConfig, "server_id_bits = 4\n", "", 1)
	for _, tc := range []struct {
		name, toml, want string
	}{
		{"bad vip", strings.Replace(goodConfig, "203.0.113.10", "nope", 1), `bal.toml: vip: "nope" is not an IP address`},
		{"no port", strings.Replace(goodConfig, "port = 51820\n", "", 1), "bal.toml: port: 0 out of range"},
		{"no bits", base, "bal.toml: server_id_bits: 0 out of range (1..16)"},
		{"id too big", strings.Replace(goodConfig, "id = 2", "id = 16", 1), "bal.toml: servers[0].id: 16 does not fit in server_id_bits = 4"},
		{"duplicate id", strings.Replace(goodConfig, "id = 2", "id = 1", 1), "bal.toml: servers[1].id: 1 is also servers[0]'s id"},
		{"bad address", strings.Replace(goodConfig, `address = "10.1.0.12"`, `address = "10.1.0"`, 1), `bal.toml: servers[0].address: "10.1.0" is not an IP address`},
		{"wrong family", strings.Replace(goodConfig, `address = "10.1.0.12"`, `address = "fd00::12"`, 1), "bal.toml: servers[0].address: fd00::12 is not of the vip's family"},
		{"bad control", strings.Replace(goodConfig, `control = "http://10.1.0.12:9100"`, `control = "10.1.0.12:9100"`, 1), "bal.toml: servers[0].control:"},
		{"no servers", goodConfig[:strings.Index(goodConfig, "[[servers]]")], "bal.toml: servers: no [[servers]]"},
		{"bad duration", "health_interval = \"often\"\n" + goodConfig, `bal.toml: health_interval: "often" is not a positive duration`},
		{"timeout past interval", "health_timeout = \"2s\"\n" + goodConfig, "bal.toml: health_timeout: 2s is longer than health_interval 500ms"},
		{"unknown key", "vipp = 1\n" + goodConfig, `unknown key "vipp"`},
		{"priority", "rule_priority = 40000\n" + goodConfig, "bal.toml: rule_priority: 40000 out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("bal.toml", []byte(tc.toml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// Initiation map: each live server's own id maps to it; all values spread
// evenly over the live servers; a server down leaves none.
func TestInitMap(t *testing.T) {
	for _, bits := range []int{1, 4, 8} {
		c, err := Parse("bal.toml", []byte(strings.Replace(goodConfig, "server_id_bits = 4", fmt.Sprintf("server_id_bits = %d", bits), 1)+
			"[[servers]]\nid = 0\naddress = \"10.1.0.10\"\ncontrol = \"http://10.1.0.10:9100\"\n"))
		if err != nil {
			if bits == 1 { // ids 1 and 2 do not fit: two servers, ids 0 and 1
				c, err = Parse("bal.toml", []byte(strings.Replace(strings.Replace(goodConfig, "server_id_bits = 4", "server_id_bits = 1", 1), "id = 2", "id = 0", 1)))
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		n := len(c.Servers)
		b := &Balancer{cfg: c, health: make([]health, n)}
		for i := range b.health {
			b.health[i].live = true
		}
		check := func(what string, live map[uint32]bool) {
			m := b.buildInitMap()
			count := map[uint32]int{}
			for v, id := range m {
				if !live[id] {
					t.Fatalf("%d bits, %s: value %d → server %d, not live", bits, what, v, id)
				}
				if own := uint32(v) >> (c.InitBits() - bits); live[own] && id != own {
					t.Errorf("%d bits, %s: value %d → %d, not its own live server %d", bits, what, v, id, own)
				}
				count[id]++
			}
			lo, hi := len(m), 0
			for id := range live {
				lo, hi = min(lo, count[id]), max(hi, count[id])
			}
			if hi-lo > 1 {
				t.Errorf("%d bits, %s: values per server %v, want even", bits, what, count)
			}
		}
		all := map[uint32]bool{}
		for _, s := range c.Servers {
			all[s.ID] = true
		}
		check("all live", all)
		b.health[0].live = false
		rest := map[uint32]bool{}
		for _, s := range c.Servers[1:] {
			rest[s.ID] = true
		}
		check(fmt.Sprintf("server %d down", c.Servers[0].ID), rest)
		// The dead server's own values (its clients' rekeys) are split over
		// the live servers, not handed to one.
		theirs := map[uint32]int{}
		for v, id := range b.buildInitMap() {
			if uint32(v)>>(c.InitBits()-bits) == c.Servers[0].ID {
				theirs[id]++
			}
		}
		lo, hi := 1<<InitSpreadBits, 0
		for id := range rest {
			lo, hi = min(lo, theirs[id]), max(hi, theirs[id])
		}
		if hi-lo > 1 || lo == 0 {
			t.Errorf("%d bits, server %d down: its values went %v, want an even split", bits, c.Servers[0].ID, theirs)
		}
		for i := range b.health {
			b.health[i].live = false
		}
		check("none live (as if all were)", all)
	}
}

func TestExampleParses(t *testing.T) {
	c, err := Load("../examples/scale/balance.toml")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Servers) != 3 {
		t.Errorf("%d servers", len(c.Servers))
	}
}
