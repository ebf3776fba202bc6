package compiler

import (
	"fmt"
	"unicode/utf8"
)

// maxMessage bounds one compile error message: values quoted in messages
// are clipped (config.Clip) where they are formatted, and this catches any
// other path, so an error never echoes a huge input whole (B18).
const maxMessage = 4096

// clipMessage shortens a message longer than maxMessage.
func clipMessage(msg string) string {
	if len(msg) <= maxMessage {
		return msg
	}
	cut := maxMessage
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (message cut, %d bytes)", msg[:cut], len(msg))
}
