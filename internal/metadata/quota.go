package metadata

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// Client quotas (Kafka's DescribeClientQuotas / AlterClientQuotas): a
// quota entity names up to one user, one client id and one ip, each by
// name or as the default of its type; each entity has a map of quota keys
// (producer_byte_rate, ...) to values. The handler checks keys and
// values; apply checks the entity's shape, so every node reaches the same
// image.

// Quota entity types, Kafka's names.
const (
	QuotaUser     = "user"
	QuotaClientID = "client-id"
	QuotaIP       = "ip"
)

// QuotaEntityPart is one (type, name) of a quota entity in a record;
// Name nil is the type's default entity.
type QuotaEntityPart struct {
	Type string  `json:"type"`
	Name *string `json:"name"`
}

// QuotaName is one component of a QuotaEntity: unset (the entity does
// not name this type), the type's default, or a name.
type QuotaName struct {
	Set     bool
	Default bool
	Name    string
}

// QuotaEntity is a quota entity as an image key (comparable).
type QuotaEntity struct {
	User, ClientID, IP QuotaName
}

// SetClientQuotas sets and removes quota values of one entity; an entity
// left with no values is dropped from the image.
type SetClientQuotas struct {
	Entity []QuotaEntityPart  `json:"entity"`
	Set    map[string]float64 `json:"set,omitempty"`
	Delete []string           `json:"delete,omitempty"`
}

// Exact is a named QuotaName; Default the type's default.
func Exact(name string) QuotaName { return QuotaName{Set: true, Name: name} }

// DefaultQuotaName is the default entity of a type.
var DefaultQuotaName = QuotaName{Set: true, Default: true}

// ParseQuotaEntity checks an entity's parts: known types, each at most
// once, at least one, and ip alone (Kafka keeps ip quotas apart).
func ParseQuotaEntity(parts []QuotaEntityPart) (QuotaEntity, error) {
	var e QuotaEntity
	if len(parts) == 0 {
		return e, fmt.Errorf("%w: a quota entity needs at least one type", ErrInvalidRecord)
	}
	for _, p := range parts {
		var dst *QuotaName
		switch p.Type {
		case QuotaUser:
			dst = &e.User
		case QuotaClientID:
			dst = &e.ClientID
		case QuotaIP:
			dst = &e.IP
		default:
			return e, fmt.Errorf("%w: unknown quota entity type %q", ErrInvalidRecord, p.Type)
		}
		if dst.Set {
			return e, fmt.Errorf("%w: quota entity type %q given twice", ErrInvalidRecord, p.Type)
		}
		if p.Name == nil {
			*dst = DefaultQuotaName
		} else {
			*dst = Exact(*p.Name)
		}
	}
	if e.IP.Set && (e.User.Set || e.ClientID.Set) {
		return e, fmt.Errorf("%w: an ip quota entity cannot be combined with user or client-id", ErrInvalidRecord)
	}
	return e, nil
}

// Parts is the entity as a record's parts, in the order user, client-id, ip.
func (e QuotaEntity) Parts() []QuotaEntityPart {
	var out []QuotaEntityPart
	add := func(typ string, n QuotaName) {
		if !n.Set {
			return
		}
		p := QuotaEntityPart{Type: typ}
		if !n.Default {
			name := n.Name
			p.Name = &name
		}
		out = append(out, p)
	}
	add(QuotaUser, e.User)
	add(QuotaClientID, e.ClientID)
	add(QuotaIP, e.IP)
	return out
}

// String is the entity in Kafka's ZooKeeper-path form, e.g.
// users/alice/clients/<default>.
func (e QuotaEntity) String() string {
	var b []string
	add := func(typ string, n QuotaName) {
		if !n.Set {
			return
		}
		name := n.Name
		if n.Default {
			name = "<default>"
		}
		b = append(b, typ, name)
	}
	add("users", e.User)
	add("clients", e.ClientID)
	add("ips", e.IP)
	return strings.Join(b, "/")
}

// ClientQuota returns an entity's quota values (nil when none; the map
// must not be modified).
func (im *Image) ClientQuota(e QuotaEntity) map[string]float64 { return im.ClientQuotas[e] }

func (b *builder) setClientQuotas(c *SetClientQuotas) error {
	e, err := ParseQuotaEntity(c.Entity)
	if err != nil {
		return err
	}
	cur := maps.Clone(b.im.ClientQuotas[e])
	if cur == nil {
		cur = map[string]float64{}
	}
	for _, k := range c.Delete {
		if _, both := c.Set[k]; both || k == "" {
			return fmt.Errorf("%w: quota key %q set and removed, or empty", ErrInvalidConfig, k)
		}
		delete(cur, k)
	}
	for k, v := range c.Set {
		if k == "" || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: quota %q = %v", ErrInvalidConfig, k, v)
		}
		cur[k] = v
	}
	if !b.ownQuotas {
		b.im.ClientQuotas, b.ownQuotas = maps.Clone(b.im.ClientQuotas), true
		if b.im.ClientQuotas == nil {
			b.im.ClientQuotas = map[QuotaEntity]map[string]float64{}
		}
	}
	if len(cur) == 0 {
		delete(b.im.ClientQuotas, e)
	} else {
		b.im.ClientQuotas[e] = cur
	}
	return nil
}

// clientQuotaJSON is one entity's quotas in a snapshot.
type clientQuotaJSON struct {
	Entity []QuotaEntityPart  `json:"entity"`
	Values map[string]float64 `json:"values"`
}

// encodeClientQuotas lists the image's quotas in a deterministic order.
func encodeClientQuotas(im *Image) []clientQuotaJSON {
	out := make([]clientQuotaJSON, 0, len(im.ClientQuotas))
	for e, v := range im.ClientQuotas {
		out = append(out, clientQuotaJSON{Entity: e.Parts(), Values: v})
	}
	slices.SortFunc(out, func(a, b clientQuotaJSON) int {
		return strings.Compare(quotaSortKey(a.Entity), quotaSortKey(b.Entity))
	})
	return out
}

func quotaSortKey(parts []QuotaEntityPart) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Type)
		if p.Name == nil {
			b.WriteString("\x00d")
		} else {
			b.WriteString("\x00n" + *p.Name)
		}
		b.WriteByte(0)
	}
	return b.String()
}

// decodeClientQuotas fills im from a snapshot's list.
func decodeClientQuotas(im *Image, list []clientQuotaJSON) error {
	for _, q := range list {
		e, err := ParseQuotaEntity(q.Entity)
		if err != nil {
			return fmt.Errorf("%w: image: client quota: %v", ErrCorrupt, err)
		}
		if _, dup := im.ClientQuotas[e]; dup || len(q.Values) == 0 {
			return fmt.Errorf("%w: image: client quotas of %s twice or empty", ErrCorrupt, e)
		}
		im.ClientQuotas[e] = maps.Clone(q.Values)
	}
	return nil
}
