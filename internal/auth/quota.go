package auth

import (
	"math"
	"sync"
	"time"

	"github.com/berthmq/berth/internal/metadata"
)

// Client quotas, as Kafka's ClientQuotaManager measures them: each quota
// is a rate over quota.window.num samples of quota.window.size.seconds;
// a client over its quota is told to wait (throttle_time_ms) long enough
// for its rate over the window to come back to the quota, and the broker
// stops reading its connection for that long (KIP-219).

// Quota keys: Kafka's and Berth's.
const (
	QuotaProducerByteRate       = "producer_byte_rate"
	QuotaConsumerByteRate       = "consumer_byte_rate"
	QuotaRequestPercentage      = "request_percentage"
	QuotaControllerMutationRate = "controller_mutation_rate"
	QuotaConnectionCreationRate = "connection_creation_rate"
	// Berth's: records per second produced.
	QuotaProducerRecordRate = "producer_record_rate"
	// Berth's: the largest record a principal may produce, in bytes.
	QuotaMaxRecordBytes = "max_record_bytes"
	// Berth's: what a produce over quota gets; 0 throttle (Kafka's
	// behaviour), 1 reject (THROTTLING_QUOTA_EXCEEDED, nothing appended).
	QuotaViolationAction = "violation_action"
)

// Violation actions (QuotaViolationAction's values).
const (
	ActionThrottle = 0
	ActionReject   = 1
)

// QuotaKeyValid reports whether key is a quota key for an entity of the
// given kind (ip entities take connection_creation_rate only; user and
// client-id entities every other key).
func QuotaKeyValid(key string, ipEntity bool) bool {
	if ipEntity {
		return key == QuotaConnectionCreationRate
	}
	switch key {
	case QuotaProducerByteRate, QuotaConsumerByteRate, QuotaRequestPercentage, QuotaControllerMutationRate,
		QuotaProducerRecordRate, QuotaMaxRecordBytes, QuotaViolationAction:
		return true
	}
	return false
}

// QuotaValueValid checks a value for key: positive, a whole number for
// the byte and record counts Kafka keeps as longs, 0 or 1 for
// violation_action.
func QuotaValueValid(key string, v float64) bool {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return false
	}
	switch key {
	case QuotaViolationAction:
		return v == ActionThrottle || v == ActionReject
	case QuotaProducerByteRate, QuotaConsumerByteRate, QuotaMaxRecordBytes, QuotaConnectionCreationRate:
		return v > 0 && v == math.Trunc(v)
	}
	return v > 0
}

// QuotaMatch is the quota that applies to a principal and client id for
// one key: its value and the sensor it is measured on. Kafka's metric
// tags: a quota set on users/alice is shared by all of alice's clients
// (Client empty); one on users/<default> applies to each user apart.
type QuotaMatch struct {
	Value  float64
	Entity metadata.QuotaEntity // the entity it was found on
	Sensor SensorKey
}

// SensorKey names what a rate is measured on: the quota key and Kafka's
// (user, client-id) metric tags.
type SensorKey struct {
	Key, User, Client string
}

// ResolveQuota finds the quota for key of user (a principal's name) and
// clientID in Kafka's order of precedence:
//
//	users/<user>/clients/<client-id>
//	users/<user>/clients/<default>
//	users/<user>
//	users/<default>/clients/<client-id>
//	users/<default>/clients/<default>
//	users/<default>
//	clients/<client-id>
//	clients/<default>
//
// ok is false when no entity has a value for key.
func ResolveQuota(im *metadata.Image, user, clientID, key string) (m QuotaMatch, ok bool) {
	if len(im.ClientQuotas) == 0 {
		return m, false
	}
	u, ud := metadata.Exact(user), metadata.DefaultQuotaName
	c, cd := metadata.Exact(clientID), metadata.DefaultQuotaName
	none := metadata.QuotaName{}
	for _, e := range [...]metadata.QuotaEntity{
		{User: u, ClientID: c}, {User: u, ClientID: cd}, {User: u},
		{User: ud, ClientID: c}, {User: ud, ClientID: cd}, {User: ud},
		{ClientID: c}, {ClientID: cd},
	} {
		v, found := im.ClientQuotas[e][key]
		if !found {
			continue
		}
		s := SensorKey{Key: key}
		if e.User != none {
			s.User = user
		}
		if e.ClientID != none {
			s.Client = clientID
		}
		return QuotaMatch{Value: v, Entity: e, Sensor: s}, true
	}
	return m, false
}

// ResolveIPQuota finds connection_creation_rate for an address: its own
// ip entity, else the ip default.
func ResolveIPQuota(im *metadata.Image, ip string) (m QuotaMatch, ok bool) {
	if len(im.ClientQuotas) == 0 {
		return m, false
	}
	for _, e := range [...]metadata.QuotaEntity{{IP: metadata.Exact(ip)}, {IP: metadata.DefaultQuotaName}} {
		if v, found := im.ClientQuotas[e][QuotaConnectionCreationRate]; found {
			return QuotaMatch{Value: v, Entity: e, Sensor: SensorKey{Key: QuotaConnectionCreationRate, User: ip}}, true
		}
	}
	return m, false
}

// Rate is a value measured per second over a number of sample windows
// (Kafka's Rate over a SampledStat): the sum of the live samples divided
// by the time they cover, at least (samples-1) windows, so a client's
// first second is not measured as a burst. Not safe for concurrent use
// (Quotas guards its rates).
type Rate struct {
	window  time.Duration
	samples []sample
	cur     int
	last    time.Time // last record, for expiry
}

type sample struct {
	start time.Time
	value float64
}

// NewRate makes a rate over n windows of w.
func NewRate(n int, w time.Duration) *Rate {
	if n < 2 {
		n = 2
	}
	if w <= 0 {
		w = time.Second
	}
	return &Rate{window: w, samples: make([]sample, n)}
}

// purge resets samples too old to count at now.
func (r *Rate) purge(now time.Time) {
	span := r.window * time.Duration(len(r.samples))
	for i := range r.samples {
		if s := &r.samples[i]; !s.start.IsZero() && now.Sub(s.start) >= span {
			*s = sample{}
		}
	}
}

// Record adds v at now.
func (r *Rate) Record(now time.Time, v float64) {
	r.purge(now)
	s := &r.samples[r.cur]
	if s.start.IsZero() {
		s.start = now
	} else if now.Sub(s.start) >= r.window {
		r.cur = (r.cur + 1) % len(r.samples)
		r.samples[r.cur] = sample{start: now}
		s = &r.samples[r.cur]
	}
	s.value += v
	r.last = now
}

// Unrecord takes back v recorded at now (a fetch answered empty, a
// produce rejected): Kafka's unrecordQuotaSensor.
func (r *Rate) Unrecord(now time.Time, v float64) {
	r.samples[r.cur].value -= v
}

// span is the time the live samples cover at now (Kafka's
// Rate.windowSize): from the oldest sample's start, at least n-1 windows.
func (r *Rate) span(now time.Time) time.Duration {
	var oldest time.Time
	for _, s := range r.samples {
		if !s.start.IsZero() && (oldest.IsZero() || s.start.Before(oldest)) {
			oldest = s.start
		}
	}
	el := time.Duration(0)
	if !oldest.IsZero() {
		el = now.Sub(oldest)
	}
	if min := r.window * time.Duration(len(r.samples)-1); el < min {
		el = min
	}
	return el
}

// Value is the rate per second at now.
func (r *Rate) Value(now time.Time) float64 {
	r.purge(now)
	total := 0.0
	for _, s := range r.samples {
		total += s.value
	}
	return total / r.span(now).Seconds()
}

// Throttle is how long a client measured by r must wait for its rate to
// come back to quota (Kafka's QuotaUtils.throttleTime), capped at max; 0
// when within quota.
func (r *Rate) Throttle(now time.Time, quota float64, max time.Duration) time.Duration {
	v := r.Value(now)
	if quota <= 0 || v <= quota {
		return 0
	}
	secs := (v - quota) / quota * r.span(now).Seconds()
	if secs >= max.Seconds() {
		return max
	}
	d := time.Duration(secs * float64(time.Second))
	if d < time.Millisecond {
		d = time.Millisecond
	}
	return d
}

// Quotas holds the rates of every sensor (one per quota key and metric
// tags) on this broker. Its mutex guards the map and every Rate; it is a
// leaf lock.
type Quotas struct {
	mu      sync.Mutex
	windows int
	window  time.Duration
	rates   map[SensorKey]*Rate
	pruned  time.Time
	// Now is the clock; tests may replace it before first use.
	Now func() time.Time
}

// NewQuotas makes the sensors' home: rates over n windows of w
// (quota.window.num, quota.window.size.seconds).
func NewQuotas(n int, w time.Duration) *Quotas {
	if n < 2 {
		n = 2
	}
	if w <= 0 {
		w = time.Second
	}
	return &Quotas{windows: n, window: w, rates: map[SensorKey]*Rate{}, Now: time.Now}
}

// MinSpan is the shortest time a rate is measured over: quota.window.num-1
// windows.
func (q *Quotas) MinSpan() time.Duration { return q.window * time.Duration(q.windows-1) }

// MaxThrottle bounds a throttle: the windows' whole span
// (quota.window.num × quota.window.size.seconds), at least 10 s. Kafka
// bounds only request-time throttles (to one window); a bandwidth
// throttle is whatever brings the rate back to the quota. Berth bounds
// both so that a quota set absurdly low (producer_byte_rate=1) cannot
// silence a connection for hours; only a single request worth more than
// that many seconds of the quota gets less than its full throttle.
func (q *Quotas) MaxThrottle() time.Duration {
	return max(q.window*time.Duration(q.windows), 10*time.Second)
}

// Window is one sample window (quota.window.size.seconds): the bound of a
// request_percentage throttle, as in Kafka.
func (q *Quotas) Window() time.Duration { return q.window }

func (q *Quotas) rate(k SensorKey, now time.Time) *Rate {
	r := q.rates[k]
	if r == nil {
		if now.Sub(q.pruned) > time.Minute {
			q.prune(now)
		}
		r = NewRate(q.windows, q.window)
		q.rates[k] = r
	}
	return r
}

// prune drops sensors idle for longer than their windows (Kafka expires
// idle quota sensors too), so the map follows the active clients.
func (q *Quotas) prune(now time.Time) {
	q.pruned = now
	idle := 2 * q.window * time.Duration(q.windows)
	for k, r := range q.rates {
		if now.Sub(r.last) > idle {
			delete(q.rates, k)
		}
	}
}

// Record adds v to sensor k and returns the throttle time it now calls
// for against quota.
func (q *Quotas) Record(k SensorKey, quota, v float64) time.Duration {
	return q.RecordBounded(k, quota, v, q.MaxThrottle())
}

// RecordBounded is Record with the throttle capped at max.
func (q *Quotas) RecordBounded(k SensorKey, quota, v float64, max time.Duration) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.Now()
	r := q.rate(k, now)
	r.Record(now, v)
	return r.Throttle(now, quota, max)
}

// Unrecord takes v back from sensor k.
func (q *Quotas) Unrecord(k SensorKey, v float64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if r := q.rates[k]; r != nil {
		r.Unrecord(q.Now(), v)
	}
}

// Throttle is sensor k's throttle time against quota without recording.
func (q *Quotas) Throttle(k SensorKey, quota float64) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	r := q.rates[k]
	if r == nil {
		return 0
	}
	return r.Throttle(q.Now(), quota, q.MaxThrottle())
}

// Value is sensor k's current rate (0 for an unknown sensor).
func (q *Quotas) Value(k SensorKey) float64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	r := q.rates[k]
	if r == nil {
		return 0
	}
	return r.Value(q.Now())
}
