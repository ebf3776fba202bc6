package compiler

import (
	"fmt"
	"unicode/utf8"
)

// maxMessage bounds one compile error message: values quoted in messages
// are clipped (config.Clip) where they are formatted, and this catches any
// other path, so an error never echoes a huge input whole (B18).
const maxMessage = 4096

// clipMessage shortens a message longer than maxMessage by cutting out its
// middle: the start says what failed and where, the end usually holds the
// cause (wrapped errors put it last), so both are kept.
func clipMessage(msg string) string {
	if len(msg) <= maxMessage {
		return msg
	}
	head, tail := maxMessage/2, len(msg)-maxMessage/2
	for head > 0 && !utf8.RuneStart(msg[head]) {
		head--
	}
	for tail < len(msg) && !utf8.RuneStart(msg[tail]) {
		tail++
	}
	return fmt.Sprintf("%s ... (%d bytes cut out of %d) ... %s", msg[:head], tail-head, len(msg), msg[tail:])
}
