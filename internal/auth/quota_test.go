package auth

import (
	"fmt"
	"testing"
	"time"

	"github.com/berthmq/berth/internal/metadata"
)

// The rate is measured over at least n-1 windows, and the throttle is the
// time that brings it back to the quota.
func TestRateThrottle(t *testing.T) {
	q := NewQuotas(11, time.Second)
	now := time.Unix(1000, 0)
	q.Now = func() time.Time { return now }
	k := SensorKey{Key: QuotaProducerByteRate, User: "b"}
	// 10 s worth of a 100 B/s quota at once: exactly at the quota.
	if d := q.Record(k, 100, 1000); d != 0 {
		t.Fatalf("at quota: throttle %v", d)
	}
	// 500 more: 1500 over a 10 s span is 150 B/s, 50% over: 5 s.
	if d := q.Record(k, 100, 500); d != 5*time.Second {
		t.Fatalf("50%% over: throttle %v, want 5s", d)
	}
	// Taking it back leaves it at the quota.
	q.Unrecord(k, 500)
	if d := q.Throttle(k, 100); d != 0 {
		t.Fatalf("after unrecord: %v", d)
	}
	// Time passing lowers the rate: 11 windows later nothing counts.
	now = now.Add(12 * time.Second)
	if v := q.Value(k); v != 0 {
		t.Fatalf("after the windows: rate %v", v)
	}
	// A throttle is what brings the rate back to quota: 20 s worth of
	// quota over a 10 s span waits 10 s.
	if d := q.Record(k, 100, 2000); d != 10*time.Second {
		t.Fatalf("2x over: throttle %v, want 10s", d)
	}
	// It is capped at the windows' span (11 s here) against absurd quotas.
	if d := q.Record(k, 1e-9, 1e9); d != 11*time.Second || q.MaxThrottle() != 11*time.Second {
		t.Fatalf("huge overshoot: throttle %v, want the cap %v", d, q.MaxThrottle())
	}
}

// Steady traffic at twice the quota, obeying each throttle, achieves the
// quota over time.
func TestRateConvergesToQuota(t *testing.T) {
	q := NewQuotas(3, time.Second)
	now := time.Unix(0, 0)
	q.Now = func() time.Time { return now }
	k := SensorKey{Key: QuotaProducerRecordRate}
	start, sent := now, 0.0
	for now.Sub(start) < 60*time.Second {
		d := q.Record(k, 1000, 100)
		sent += 100
		now = now.Add(50*time.Millisecond + d) // 2000/s unthrottled
	}
	if rate := sent / now.Sub(start).Seconds(); rate < 900 || rate > 1150 {
		t.Fatalf("achieved %v/s against a quota of 1000/s", rate)
	}
}

func TestResolveQuotaPrecedence(t *testing.T) {
	u, ud := metadata.Exact("alice"), metadata.DefaultQuotaName
	c, cd := metadata.Exact("app"), metadata.DefaultQuotaName
	levels := []metadata.QuotaEntity{
		{User: u, ClientID: c}, {User: u, ClientID: cd}, {User: u},
		{User: ud, ClientID: c}, {User: ud, ClientID: cd}, {User: ud},
		{ClientID: c}, {ClientID: cd},
	}
	tags := [][2]string{{"alice", "app"}, {"alice", "app"}, {"alice", ""}, {"alice", "app"}, {"alice", "app"}, {"alice", ""}, {"", "app"}, {"", "app"}}
	// With levels i.. set, level i wins.
	for i := range levels {
		im := &metadata.Image{ClientQuotas: map[metadata.QuotaEntity]map[string]float64{}}
		for j := i; j < len(levels); j++ {
			im.ClientQuotas[levels[j]] = map[string]float64{QuotaProducerByteRate: float64(j + 1)}
		}
		// A level with another key only does not count.
		if i > 0 {
			im.ClientQuotas[levels[i-1]] = map[string]float64{QuotaConsumerByteRate: 1}
		}
		m, ok := ResolveQuota(im, "alice", "app", QuotaProducerByteRate)
		if !ok || m.Value != float64(i+1) || m.Entity != levels[i] {
			t.Fatalf("levels %d..: got %+v %v, want level %d (%s)", i, m, ok, i, levels[i])
		}
		if m.Sensor.User != tags[i][0] || m.Sensor.Client != tags[i][1] {
			t.Fatalf("level %d (%s): sensor %+v, want tags %v", i, levels[i], m.Sensor, tags[i])
		}
	}
	// Another user and client fall through to the defaults only.
	im := &metadata.Image{ClientQuotas: map[metadata.QuotaEntity]map[string]float64{
		{User: u}: {QuotaProducerByteRate: 1}, {ClientID: cd}: {QuotaProducerByteRate: 2},
	}}
	if m, _ := ResolveQuota(im, "bob", "x", QuotaProducerByteRate); m.Value != 2 || m.Sensor.Client != "x" {
		t.Fatalf("bob: %+v", m)
	}
	if _, ok := ResolveQuota(im, "bob", "x", QuotaConsumerByteRate); ok {
		t.Fatal("a key no entity sets resolved")
	}
	im.ClientQuotas[metadata.QuotaEntity{IP: metadata.DefaultQuotaName}] = map[string]float64{QuotaConnectionCreationRate: 3}
	im.ClientQuotas[metadata.QuotaEntity{IP: metadata.Exact("10.0.0.1")}] = map[string]float64{QuotaConnectionCreationRate: 4}
	if m, _ := ResolveIPQuota(im, "10.0.0.1"); m.Value != 4 {
		t.Fatalf("ip exact: %+v", m)
	}
	if m, _ := ResolveIPQuota(im, "10.0.0.2"); m.Value != 3 || m.Sensor.User != "10.0.0.2" {
		t.Fatalf("ip default: %+v", m)
	}
}

func TestClientMetricsCap(t *testing.T) {
	m := NewClientMetrics(2)
	m.For(User("a")).BytesIn.Add(1)
	m.For(User("b")).BytesIn.Add(2)
	m.For(User("c")).BytesIn.Add(3)
	m.For(User("d")).BytesIn.Add(4)
	m.For(User("a")).Rejected("producer_byte_rate")
	m.For(User("d")).Throttled("producer_byte_rate", 5)
	s := m.Snapshot()
	if len(s) != 3 || s[0].Principal != "User:a" || s[1].Principal != "User:b" || s[2].Principal != OtherPrincipals {
		t.Fatalf("snapshot %+v", s)
	}
	if s[2].BytesIn != 7 || s[2].ThrottleNanos["producer_byte_rate"] != 5 || s[0].Rejected["producer_byte_rate"] != 1 {
		t.Fatalf("counters %+v", s)
	}
}

func TestQuotaKeysAndValues(t *testing.T) {
	for _, c := range []struct {
		key string
		ip  bool
		ok  bool
	}{
		{QuotaProducerByteRate, false, true}, {QuotaProducerByteRate, true, false},
		{QuotaConnectionCreationRate, true, true}, {QuotaConnectionCreationRate, false, false},
		{QuotaViolationAction, false, true}, {"bogus", false, false},
	} {
		if QuotaKeyValid(c.key, c.ip) != c.ok {
			t.Errorf("QuotaKeyValid(%q, ip=%v) != %v", c.key, c.ip, c.ok)
		}
	}
	for _, c := range []struct {
		key string
		v   float64
		ok  bool
	}{
		{QuotaProducerByteRate, 1024, true}, {QuotaProducerByteRate, 0, false}, {QuotaProducerByteRate, 1.5, false},
		{QuotaRequestPercentage, 0.5, true}, {QuotaProducerRecordRate, -1, false},
		{QuotaViolationAction, 0, true}, {QuotaViolationAction, 1, true}, {QuotaViolationAction, 2, false},
	} {
		if QuotaValueValid(c.key, c.v) != c.ok {
			t.Errorf("QuotaValueValid(%q, %v) != %v", c.key, c.v, c.ok)
		}
	}
}

// What a produce pays for quotas: resolving a key among many entities and
// recording against a sensor.
func BenchmarkResolveQuota(b *testing.B) {
	im := &metadata.Image{ClientQuotas: map[metadata.QuotaEntity]map[string]float64{}}
	for i := range 10000 {
		im.ClientQuotas[metadata.QuotaEntity{User: metadata.Exact(fmt.Sprint("user-", i))}] = map[string]float64{QuotaProducerByteRate: 1 << 20}
	}
	im.ClientQuotas[metadata.QuotaEntity{ClientID: metadata.DefaultQuotaName}] = map[string]float64{QuotaProducerRecordRate: 1000}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := ResolveQuota(im, "user-77", "app", QuotaProducerRecordRate); !ok { // falls through all 8 levels
			b.Fatal("not resolved")
		}
	}
}

func BenchmarkQuotaRecord(b *testing.B) {
	q := NewQuotas(11, time.Second)
	k := SensorKey{Key: QuotaProducerByteRate, User: "alice"}
	b.ReportAllocs()
	for b.Loop() {
		q.Record(k, 1<<30, 1000)
	}
}
