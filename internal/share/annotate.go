package share

import (
	"fmt"
	"time"
	"unicode/utf8"
)

// Annotate attaches text, the consumer's error and stack (Berth's
// BerthAnnotateShareRecords request; stock clients cannot send one), to
// the records [first, last]. Every offset at or past StartOffset in the
// range must be acquired by member under a lock that has not expired at
// now, else nothing changes and the error wraps ErrInvalidRecordState;
// offsets below StartOffset are ignored (already finished). The text is
// cut to MaxErrorText bytes (on a UTF-8 boundary); an empty text removes
// an earlier one.
//
// The text stays with the records while the member holds them (a RENEW
// keeps it): a REJECT that carries no text of its own archives them with
// it, and so does a RELEASE or an expired lock that reaches the delivery
// limit, so the DLQ record's client-error header says why. Any other end
// of the delivery (ACCEPT, a RELEASE or expiry below the limit, the
// member gone) drops it. Nothing is persisted: the text lives no longer
// than the lock, which a restart or leader change ends anyway, so
// Annotate returns no StateChange.
func (p *SharePartition) Annotate(member string, first, last int64, text string, now time.Time) error {
	if first > last || first < 0 {
		return fmt.Errorf("%w: annotation range [%d, %d]", ErrInvalidAck, first, last)
	}
	first = max(first, p.start)
	if first > last {
		return nil
	}
	if err := p.checkAcquired(member, first, last, ms(now)); err != nil {
		return err
	}
	text = cutText(text, p.cfg.MaxErrorText)
	p.split(first)
	p.split(last + 1)
	for i := p.find(first); i < len(p.runs) && p.runs[i].first <= last; i++ {
		p.runs[i].errText = text
	}
	p.merge()
	return nil
}

// cutText cuts s to at most n bytes without splitting a UTF-8 sequence.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
